-- Fair play (docs/ratings.md, "Fair play"): who owns each bot account, which tables the
-- lobby made (the only ones whose hands are rated: nobody chose who sits there), and the
-- hands whose rating effect an operator voided. Safe to run again: every step checks
-- what is already there.

-- A bot account belongs to the person whose token created it (null for a person, and for
-- a bot account registered before owners were kept). Its owner's standing is its own too.
ALTER TABLE players ADD COLUMN IF NOT EXISTS owner_id uuid REFERENCES players (player_id);
ALTER TABLE players DROP CONSTRAINT IF EXISTS players_owners_own_bots;
ALTER TABLE players ADD CONSTRAINT players_owners_own_bots
    CHECK (owner_id IS NULL OR bot_account);
CREATE INDEX IF NOT EXISTS players_by_owner ON players (owner_id) WHERE owner_id IS NOT NULL;

-- Every table the lobby made, its quick match's or the ladder's (the ladder's are also in
-- ladder_tables). Those made before: the ladder's, and each table whose seats the lobby
-- gave in the transaction that made it (the tickets seated there before its first event
-- was recorded; a seat the lobby gives a table later comes after).
CREATE TABLE IF NOT EXISTS lobby_tables (
    table_id    uuid PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO lobby_tables (table_id, created_at)
    SELECT table_id, created_at FROM ladder_tables ON CONFLICT (table_id) DO NOTHING;
INSERT INTO lobby_tables (table_id, created_at)
    SELECT DISTINCT t.table_id, t.created_at FROM tables t
    JOIN lobby_seatings s ON s.table_id = t.table_id AND s.seated_at <= t.created_at
    ON CONFLICT (table_id) DO NOTHING;

-- The hands whose rating effect an operator voided, who, why and when: the rating job
-- rates such a hand for no one (and a void after it took the hand's changes back), and
-- `ddz ratings rebuild` leaves it out. A hand is voided once, for good.
CREATE TABLE IF NOT EXISTS rating_voids (
    match_id  uuid PRIMARY KEY REFERENCES rated_hands (match_id),
    operator  text NOT NULL,
    reason    text NOT NULL CHECK (reason <> ''),
    at        timestamptz NOT NULL DEFAULT now()
);
DROP TRIGGER IF EXISTS rating_voids_immutable ON rating_voids;
CREATE TRIGGER rating_voids_immutable BEFORE UPDATE OR DELETE ON rating_voids
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
