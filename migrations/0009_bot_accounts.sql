-- A player may be a bot account: an author's program playing through the API as a person
-- does, marked as such on its seats (not a system bot, which is no player at all). Set
-- when the player is registered, never changed. Operators list bot accounts newest first.
-- Safe to run again: every step checks what is already there.

ALTER TABLE players ADD COLUMN IF NOT EXISTS bot_account boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS players_bot_accounts ON players (created_at, player_id)
    WHERE bot_account;
