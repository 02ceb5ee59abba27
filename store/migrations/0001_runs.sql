-- One row per ingested dump. content_hash identifies content: the same dump ingested twice is
-- the same run.
CREATE TABLE runs (
    id               INTEGER PRIMARY KEY,
    content_hash     TEXT    NOT NULL UNIQUE,
    model_name       TEXT    NOT NULL,
    label            TEXT,
    step             INTEGER,
    tags             TEXT    NOT NULL DEFAULT '[]',  -- JSON array
    root_class       TEXT    NOT NULL,
    source_kind      TEXT    NOT NULL,
    source_path      TEXT,
    model_type       TEXT,
    text_config_key  TEXT,
    dtype            TEXT,
    schema_version   INTEGER NOT NULL,
    created_at       TEXT    NOT NULL,               -- the dump's clock (RFC 3339 UTC)
    ingested_at      TEXT    NOT NULL,               -- mrep's clock (RFC 3339 UTC)
    source_file      TEXT,
    total_params     INTEGER NOT NULL,
    trainable_params INTEGER NOT NULL,
    total_bytes      INTEGER NOT NULL,
    num_modules      INTEGER NOT NULL,
    has_stats        INTEGER NOT NULL,
    has_trace        INTEGER NOT NULL,
    config           TEXT,                           -- JSON object or NULL
    framework        TEXT    NOT NULL                -- JSON object
);
CREATE INDEX runs_model_label_step ON runs (model_name, label, step);

CREATE TABLE modules (
    run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,   -- position in the dump (depth-first, root 0)
    name       TEXT    NOT NULL,
    class      TEXT    NOT NULL,
    py_module  TEXT    NOT NULL,
    parent_idx INTEGER,            -- NULL for the root
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;

CREATE TABLE tensors (
    run_id         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    module_idx     INTEGER NOT NULL,
    kind           TEXT    NOT NULL CHECK (kind IN ('param', 'buffer')),
    pos            INTEGER NOT NULL,
    name           TEXT    NOT NULL,
    shape          TEXT,            -- JSON array; NULL for a lazy parameter
    dtype          TEXT    NOT NULL,
    numel          INTEGER NOT NULL,
    device         TEXT    NOT NULL,
    tied_to        TEXT,
    requires_grad  INTEGER,         -- params only
    lazy           INTEGER,         -- params only
    expert_axis    INTEGER,         -- params only
    persistent     INTEGER,         -- buffers only
    stat_mean      REAL,
    stat_std       REAL,
    stat_min       REAL,
    stat_max       REAL,
    stat_nonfinite INTEGER,
    hist           TEXT,            -- JSON {"lo":..,"hi":..,"counts":[..]}
    PRIMARY KEY (run_id, module_idx, kind, pos)
) WITHOUT ROWID;

CREATE TABLE traces (
    run_id                 INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    batch                  INTEGER NOT NULL,
    seq                    INTEGER NOT NULL,
    device                 TEXT    NOT NULL,
    attn_implementation    TEXT,
    experts_implementation TEXT,
    total_flops            INTEGER NOT NULL
);

CREATE TABLE trace_modules (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name   TEXT    NOT NULL,
    flops  INTEGER NOT NULL,
    ops    TEXT    NOT NULL,        -- JSON object op -> FLOPs
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
