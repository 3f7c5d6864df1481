-- Lists that do not slow with history (docs/operations.md, "The console"): the players
-- page read each player's figures from every hand and ledger entry of the history at
-- each view (0.6 s at 1,000 players); they are kept here instead, a row per player, as
-- each hand is settled and each ledger entry booked, so that the page reads one row per
-- player. `ddz rebuild` makes them again (player_figures_made(), below). And the
-- indexes that let the match list page by key: by creation, and by the house's take.

CREATE TABLE IF NOT EXISTS player_figures (
    player_id    uuid PRIMARY KEY REFERENCES players (player_id),
    balance      numeric(21, 2) NOT NULL DEFAULT 0,  -- what the player's ledger entries add to
    hands        integer NOT NULL DEFAULT 0,         -- settled hands where they had a seat
    disconnects  integer NOT NULL DEFAULT 0,         -- those they left or missed a deadline in
    rate         numeric GENERATED ALWAYS AS (disconnects::numeric / nullif(hands, 0)) STORED
);

-- Each player's figures as the settlements, the ledger and the events make them: what the
-- triggers below keep, made again from nothing (the backfill here, `ddz rebuild`).
CREATE OR REPLACE FUNCTION player_figures_made()
RETURNS TABLE (player_id uuid, balance numeric, hands integer, disconnects integer)
LANGUAGE sql STABLE AS $$
    WITH seated AS (
        SELECT m.match_id, (s.ord - 1)::int AS seat, (s.value->>'player')::uuid AS player_id
        FROM settlements t JOIN matches m USING (match_id),
            jsonb_array_elements(m.seats) WITH ORDINALITY AS s (value, ord)
        WHERE s.value->>'player' IS NOT NULL
    ),
    dropped AS (
        SELECT DISTINCT stream_id AS match_id, (payload->>'seat')::int AS seat
        FROM events WHERE type = 'disconnect'
    ),
    played AS (
        SELECT s.player_id, count(*)::int AS hands, count(d.match_id)::int AS disconnects
        FROM seated s LEFT JOIN dropped d USING (match_id, seat)
        GROUP BY s.player_id
    ),
    booked AS (
        SELECT substr(account, 8)::uuid AS player_id, sum(amount) AS balance
        FROM ledger_entries WHERE account LIKE 'player:%' GROUP BY 1
    )
    SELECT p.player_id, coalesce(b.balance, 0), coalesce(h.hands, 0), coalesce(h.disconnects, 0)
    FROM players p LEFT JOIN played h USING (player_id) LEFT JOIN booked b USING (player_id)
$$;

INSERT INTO player_figures (player_id, balance, hands, disconnects)
    SELECT * FROM player_figures_made()
    ON CONFLICT (player_id) DO UPDATE SET balance = EXCLUDED.balance,
        hands = EXCLUDED.hands, disconnects = EXCLUDED.disconnects;

-- A new player's row.
CREATE OR REPLACE FUNCTION player_figures_joined() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO player_figures (player_id) VALUES (NEW.player_id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS players_figures ON players;
CREATE TRIGGER players_figures AFTER INSERT ON players
    FOR EACH ROW EXECUTE FUNCTION player_figures_joined();

-- A settled hand counts for each player seated at it, and as a disconnect for those whose
-- seat has a disconnect event. The rows are taken in the order of their ids, so that two
-- settlements sharing players (a bot account at several tables) never wait on each other
-- in a cycle; the ledger entries that follow in the same transaction touch only rows it
-- holds already.
CREATE OR REPLACE FUNCTION player_figures_settled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO player_figures AS f (player_id, hands, disconnects)
        SELECT (s.value->>'player')::uuid, count(*), count(*) FILTER (WHERE EXISTS (
                SELECT 1 FROM events e WHERE e.stream_id = NEW.match_id
                AND e.type = 'disconnect' AND (e.payload->>'seat')::int = s.ord - 1))
        FROM matches m, jsonb_array_elements(m.seats) WITH ORDINALITY AS s (value, ord)
        WHERE m.match_id = NEW.match_id AND s.value->>'player' IS NOT NULL
        GROUP BY 1 ORDER BY 1
        ON CONFLICT (player_id) DO UPDATE SET hands = f.hands + EXCLUDED.hands,
            disconnects = f.disconnects + EXCLUDED.disconnects;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS settlements_figures ON settlements;
CREATE TRIGGER settlements_figures AFTER INSERT ON settlements
    FOR EACH ROW EXECUTE FUNCTION player_figures_settled();

-- Every entry booked to a player's account moves their balance (a settlement's, a
-- correction's, a void's): one statement's entries at once, in the order of the ids.
CREATE OR REPLACE FUNCTION player_figures_booked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO player_figures AS f (player_id, balance)
        SELECT substr(account, 8)::uuid, sum(amount) FROM booked
        WHERE account LIKE 'player:%' GROUP BY 1 ORDER BY 1
        ON CONFLICT (player_id) DO UPDATE SET balance = f.balance + EXCLUDED.balance;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS ledger_entries_figures ON ledger_entries;
CREATE TRIGGER ledger_entries_figures AFTER INSERT ON ledger_entries
    REFERENCING NEW TABLE AS booked
    FOR EACH STATEMENT EXECUTE FUNCTION player_figures_booked();

-- The players page sorted by name, a page after a name; by each figure, a page after it.
CREATE INDEX IF NOT EXISTS players_by_name ON players (name, player_id);
CREATE INDEX IF NOT EXISTS player_figures_by_balance ON player_figures (balance, player_id);
CREATE INDEX IF NOT EXISTS player_figures_by_hands ON player_figures (hands, player_id);
CREATE INDEX IF NOT EXISTS player_figures_by_disconnects ON player_figures (disconnects, player_id);
CREATE INDEX IF NOT EXISTS player_figures_by_rate ON player_figures (rate, player_id);
-- A search by part of a name (the players page's, the match list's) reads a trigram index
-- where PostgreSQL has the pg_trgm extension (its contrib modules; 6 ms instead of 190 ms
-- at 100,000 players); without it, the search reads every name.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
        CREATE INDEX IF NOT EXISTS players_by_name_part ON players USING gin (name gin_trgm_ops);
    END IF;
END
$$;
-- The match list, newest first, a page after a time (the list of every match had no
-- index to read in order: it sorted every match at each page).
CREATE INDEX IF NOT EXISTS matches_by_time ON matches (created_at, match_id);
-- The match list sorted by the house's take: the settled matches in that order.
CREATE INDEX IF NOT EXISTS settlements_by_house
    ON settlements (((result->'settlement'->>'house')::numeric), match_id);
-- ... then the matches not settled yet (no take), newest first: the hands under way.
CREATE INDEX IF NOT EXISTS matches_unsettled ON matches (created_at, match_id) WHERE NOT settled;
