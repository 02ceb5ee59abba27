-- Who stored each run (user@host of the ingesting process, or of the first ingest when a run
-- is copied between histories): a team's shared history says which job or laptop a run came
-- from. NULL for runs ingested before.
ALTER TABLE runs ADD COLUMN ingested_by TEXT;
