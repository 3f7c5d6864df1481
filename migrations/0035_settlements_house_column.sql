-- The house's take of a settled match, kept as a column of its own. The match list sorted
-- by it (0032_player_figures.sql) read the take from an expression index; PostgreSQL
-- cannot answer an expression of a jsonb column from such an index alone, so an old
-- link's deep page (`?sort=house&page=2000`) read the settlement row of every match it
-- skipped. On a column the skip reads the index alone. Adding a stored column rewrites
-- the table once (about 7 s for a million settlements).
ALTER TABLE settlements ADD COLUMN IF NOT EXISTS house numeric
    GENERATED ALWAYS AS ((result->'settlement'->>'house')::numeric) STORED;
CREATE INDEX IF NOT EXISTS settlements_by_house_column ON settlements (house, match_id);
DROP INDEX IF EXISTS settlements_by_house;
