-- Dump schema version 2: a checkpoint dumped by the training hook carries what was measured
-- (median step time, tokens per step, world size, device, precision), as JSON; NULL otherwise.
ALTER TABLE runs ADD COLUMN measurement TEXT;
