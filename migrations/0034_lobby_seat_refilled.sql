-- A seat of a lobby table is seated by a ticket again each time the lobby refills it
-- (0014_tables_refill.sql: a ticket takes the seat a person left between hands). Kept
-- unique from 0006, when tables were never refilled, (table_id, seat) refused the first
-- refill of a seat a ticket had held, and with it the matcher's whole pass: nobody was
-- seated from the lobby any more. A ticket is still seated once (its primary key).
ALTER TABLE lobby_seatings DROP CONSTRAINT IF EXISTS lobby_seatings_table_id_seat_key;
-- The seatings of a table, as the unique index found them.
CREATE INDEX IF NOT EXISTS lobby_seatings_by_table ON lobby_seatings (table_id, seat);
