-- Ratings (docs/ratings.md): each player's rating per ruleset, its change at each hand, and
-- the settled hands with their rating pending or done. Safe to run again: every step
-- checks what is already there.

-- The rating of a player (a person or a bot account; system bots have none) in a ruleset.
-- bot_account is the player's mark, copied (it never changes) so that a leaderboard of
-- people or of bot accounts is one index's range.
CREATE TABLE IF NOT EXISTS ratings (
    player_id     uuid NOT NULL REFERENCES players (player_id),
    ruleset       text NOT NULL,
    bot_account   boolean NOT NULL,
    mu            double precision NOT NULL,
    sigma         double precision NOT NULL,
    conservative  double precision GENERATED ALWAYS AS (mu - 3 * sigma) STORED,
    hands         integer NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (player_id, ruleset)
);
CREATE INDEX IF NOT EXISTS ratings_leaderboard
    ON ratings (ruleset, bot_account, conservative DESC, player_id);

-- Each rated player's rating before and after each hand it played.
CREATE TABLE IF NOT EXISTS rating_changes (
    match_id      uuid NOT NULL,
    player_id     uuid NOT NULL REFERENCES players (player_id),
    ruleset       text NOT NULL,
    won           boolean NOT NULL,
    mu_before     double precision NOT NULL,
    sigma_before  double precision NOT NULL,
    mu            double precision NOT NULL,
    sigma         double precision NOT NULL,
    hands         integer NOT NULL,
    changed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (match_id, player_id)
);
CREATE INDEX IF NOT EXISTS rating_changes_by_player
    ON rating_changes (player_id, changed_at DESC, match_id);

-- Every settled hand, its rating pending (rated_at null) until the rating job has applied
-- it: the job claims the row, so a hand is rated once whoever runs it and however often.
-- A trigger adds the row in the settlement's own transaction, so that no settled hand is
-- ever left out, whichever code settles it.
CREATE TABLE IF NOT EXISTS rated_hands (
    match_id    uuid PRIMARY KEY REFERENCES settlements (match_id),
    settled_at  timestamptz NOT NULL,
    rated_at    timestamptz
);
CREATE INDEX IF NOT EXISTS rated_hands_pending ON rated_hands (settled_at) WHERE rated_at IS NULL;

CREATE OR REPLACE FUNCTION rating_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rated_hands (match_id, settled_at) VALUES (NEW.match_id, NEW.settled_at)
        ON CONFLICT (match_id) DO NOTHING;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS settlements_rating_pending ON settlements;
CREATE TRIGGER settlements_rating_pending AFTER INSERT ON settlements
    FOR EACH ROW EXECUTE FUNCTION rating_pending();

-- The hands settled before ratings existed: rated by the workers' sweep, oldest first.
INSERT INTO rated_hands (match_id, settled_at)
    SELECT match_id, settled_at FROM settlements ON CONFLICT (match_id) DO NOTHING;
