-- A checksum per run over its rows (sha256 of the dump as stored), verified on every load, so
-- a flipped bit is reported as corruption instead of read as other data; and a high-water mark
-- of run ids, so an id freed by rm is never handed to another run.
ALTER TABLE runs ADD COLUMN checksum TEXT;      -- over the dump's rows (modules, tensors, trace, config)
ALTER TABLE runs ADD COLUMN row_checksum TEXT;  -- over the run's own row, as listings read it
CREATE TABLE run_ids (last INTEGER NOT NULL);
INSERT INTO run_ids (last) SELECT COALESCE(MAX(id), 0) FROM runs;
