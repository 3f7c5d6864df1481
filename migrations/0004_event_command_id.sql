-- Each event records the command that appended it (an id the service draws for each
-- command). When a connection breaks after an append was sent, the service reads the
-- stream after the version the command was decided on: its events there mean the append
-- committed, and their absence that it did not (so the command may be decided again).
-- No index: the lookup goes by (stream_id, version), which events_stream_version serves.
-- Events appended before this have none.

ALTER TABLE events ADD COLUMN command_id uuid;
