-- Tables that keep their seats filled (docs/tables.md): the lobby seats a waiting ticket
-- at a public table that lost a person between hands, with the same settings (the ruleset
-- and money options, compared as a ticket's `settings` are); a table of people only that
-- no one refills closes after its wait, so `due` may now be 'close' too, and `due_at` is
-- until when the table waits (never before its rest after a hand is over).
ALTER TABLE tables ADD COLUMN IF NOT EXISTS settings jsonb;
UPDATE tables t SET settings = e.payload->'table'
    FROM events e
    WHERE t.settings IS NULL AND e.stream_id = t.table_id AND e.version = 1;
-- The lobby's look for tables to refill, each second: those waiting for bots or closing
-- after a hand, public.
CREATE INDEX IF NOT EXISTS tables_refill ON tables (settings)
    WHERE due IN ('bots', 'close') AND NOT private AND hands > 0;
-- A table of people only that lost a person between hands waited for ever before this:
-- it closes now once the wait of tables made before it is over (its last change + 120 s,
-- service/game/events.py's DEFAULT_CLOSE_SECONDS), unless someone takes the seat first.
UPDATE tables SET due = 'close', due_at = updated_at + interval '120 seconds'
    WHERE due IS NULL AND match_id IS NULL AND hands > 0
    AND seats @> '[null]' AND seats @> '[{"bot": false}]';
