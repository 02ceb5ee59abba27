-- PostgreSQL text of 0003_integrity.sql: the checksums, and run ids from a sequence (never
-- handed out twice, and taken without a lock that concurrent writers would queue on).
ALTER TABLE runs ADD COLUMN checksum TEXT;
ALTER TABLE runs ADD COLUMN row_checksum TEXT;
CREATE SEQUENCE run_ids;
