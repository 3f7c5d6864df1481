-- The ladder (docs/tables.md): bot accounts ask the lobby for rated tables of bot
-- accounts only. A ticket says whether it is the ladder's; the lobby's tables that seated
-- ladder tickets are listed, so that a seat freed there goes only to another ladder
-- ticket, and a ladder ticket only to such a table. Safe to run again.
ALTER TABLE lobby_tickets ADD COLUMN IF NOT EXISTS ladder boolean NOT NULL DEFAULT false;
CREATE TABLE IF NOT EXISTS ladder_tables (
    table_id    uuid PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now()
);
