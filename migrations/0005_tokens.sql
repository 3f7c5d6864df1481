-- A player may hold several bearer tokens, each revocable and optionally expiring. Tokens
-- move out of players into their own table, still stored only as SHA-256 hashes. Safe to
-- run again: every step checks what is already there.

CREATE TABLE IF NOT EXISTS tokens (
    token_id    uuid PRIMARY KEY,
    player_id   uuid NOT NULL REFERENCES players (player_id),
    token_hash  bytea NOT NULL UNIQUE,   -- SHA-256 of the token, which is shown once
    last4       text,                    -- its last four characters, to tell tokens apart (NULL for tokens made before 0005)
    label       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz              -- NULL: never
);
CREATE INDEX IF NOT EXISTS tokens_by_player ON tokens (player_id, created_at);

DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'players' AND column_name = 'token_hash'
    ) THEN
        INSERT INTO tokens (token_id, player_id, token_hash, created_at)
            SELECT gen_random_uuid(), player_id, token_hash, created_at FROM players
            ON CONFLICT (token_hash) DO NOTHING;
        ALTER TABLE players DROP COLUMN token_hash;
    END IF;
END
$$;
