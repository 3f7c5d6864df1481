-- Tables that play hand after hand (each table a stream of the events table) and the
-- lobby's tickets.

-- A read model of each table, written with its events (as matches is with a match's).
CREATE TABLE tables (
    table_id    uuid PRIMARY KEY,
    version     integer NOT NULL,
    private     boolean NOT NULL,
    seats       jsonb NOT NULL,          -- [{"player": uuid|null, "bot": bool, "leaving": bool}|null, ...]
    match_id    uuid,                    -- the hand under way, if any
    hands       integer NOT NULL,
    due         text,                    -- what the table waits for: 'deal' or 'bots'
    due_at      timestamptz,             -- and from when
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- The workers' scan for tables whose next deal or bots are due, every second.
CREATE INDEX tables_due ON tables (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX tables_in_play ON tables (match_id) WHERE match_id IS NOT NULL;
CREATE INDEX tables_seats ON tables USING gin (seats jsonb_path_ops);

-- Each hand a table dealt: the match, and which table and hand it is.
CREATE TABLE table_hands (
    match_id    uuid PRIMARY KEY,
    table_id    uuid NOT NULL REFERENCES tables (table_id),
    number      integer NOT NULL,
    UNIQUE (table_id, number)
);

-- The players' matches, newest first (GET /v1/me/matches).
CREATE INDEX matches_seats ON matches USING gin (seats jsonb_path_ops);

-- The lobby: a player waits for a table with these settings.
CREATE TABLE lobby_tickets (
    ticket_id   uuid PRIMARY KEY,
    player_id   uuid NOT NULL REFERENCES players (player_id),
    settings    jsonb NOT NULL,          -- ruleset and money options: equal settings play together
    allow_bots  boolean NOT NULL,
    status      text NOT NULL CHECK (status IN ('waiting', 'seated', 'cancelled')),
    table_id    uuid REFERENCES tables (table_id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'seated') = (table_id IS NOT NULL))
);
-- A player waits with one ticket at a time (two could land at one table).
CREATE UNIQUE INDEX lobby_one_waiting ON lobby_tickets (player_id) WHERE status = 'waiting';
CREATE INDEX lobby_waiting ON lobby_tickets (created_at) WHERE status = 'waiting';

-- Where each ticket was seated: a ticket is seated once (its primary key), one to a seat.
CREATE TABLE lobby_seatings (
    ticket_id   uuid PRIMARY KEY REFERENCES lobby_tickets (ticket_id),
    table_id    uuid NOT NULL REFERENCES tables (table_id),
    seat        integer NOT NULL CHECK (seat BETWEEN 0 AND 3),
    seated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (table_id, seat)
);
CREATE TRIGGER lobby_seatings_immutable BEFORE UPDATE OR DELETE ON lobby_seatings
    FOR EACH ROW EXECUTE FUNCTION refuse_change();

-- The player's own stream (GET /v1/me/stream) reads the events of every stream that
-- concerns the player in one order that no later commit can cut into: by the id of the
-- transaction that appended them, once no transaction older than it is still running
-- (pg_snapshot_xmin), then by position. Rows written before this get 1, older than any
-- transaction: a constant default is only recorded in the catalog, where a volatile one
-- would rewrite the whole table under an exclusive lock. New rows get their own.
ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT '1';
ALTER TABLE events ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX events_by_xid ON events (xid, position);

-- The table streams a player reads in its own stream: from the version it joined to the
-- one its seat was freed at (matches are read by their seats).
CREATE TABLE player_streams (
    player_id      uuid NOT NULL,
    stream_id      uuid NOT NULL,
    from_version   integer NOT NULL,
    until_version  integer,
    PRIMARY KEY (player_id, stream_id, from_version)
);
