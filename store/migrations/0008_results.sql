-- What users measured with their own tools (a vLLM or SGLang benchmark's result file, a training
-- log), one row per record of such a file: the file's SHA-256 and the record's place identify
-- it (the same file ingested twice is stored once), the run as read (JSON) and the calibration
-- rows it became (a JSON array: what validate and calibrate --from-history predict and fit).
CREATE TABLE results (
    digest       TEXT    NOT NULL,
    record       INTEGER NOT NULL,
    source       TEXT    NOT NULL,   -- the file's name as given
    tool         TEXT    NOT NULL,   -- vllm, sglang, genai-perf, trtllm-bench, megatron, torchtitan, hf-trainer
    plan         TEXT,               -- the emitted plan's id (mrep_plan), when the run came from one
    run          TEXT    NOT NULL,
    rows         TEXT    NOT NULL,
    ingested_at  TEXT    NOT NULL,
    ingested_by  TEXT,
    PRIMARY KEY (digest, record)
);
