-- The full ledger check runs a batch of hands per job (docs/operations.md, "Stored
-- verdicts"), each job enqueuing the next, so that a check of a year of hands never holds
-- a worker for long: the games' jobs run between its batches. Where the next batch
-- starts is kept with the check: the last settled match checked, by id.

ALTER TABLE ledger_checks ADD COLUMN IF NOT EXISTS checked_to uuid;
