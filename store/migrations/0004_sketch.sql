-- Dump schema version 2: each parameter's statistics carry the Frobenius norm and a CountSketch,
-- from which weight drift between any two checkpoints is estimated without the weights.
-- NULL for runs ingested from version-1 dumps.
ALTER TABLE tensors ADD COLUMN stat_norm REAL;
ALTER TABLE tensors ADD COLUMN sketch BLOB;  -- float64 little-endian, one per bucket
