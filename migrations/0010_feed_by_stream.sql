-- The players' feed is read once per API process for every player at once
-- (service/app/feed_fanout.py): for each event, the players seated at its table when it was
-- appended, and a joining player's lobby ticket. Both by the stream, not by the player.
CREATE INDEX IF NOT EXISTS player_streams_by_stream ON player_streams (stream_id);
CREATE INDEX IF NOT EXISTS lobby_tickets_by_table ON lobby_tickets (table_id)
    WHERE table_id IS NOT NULL;
