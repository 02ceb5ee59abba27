-- PostgreSQL text of 0004_sketch.sql.
ALTER TABLE tensors ADD COLUMN stat_norm DOUBLE PRECISION;
ALTER TABLE tensors ADD COLUMN sketch BYTEA;
