-- The event store: one stream per match; events are facts, never updated or deleted.

CREATE TABLE players (
    player_id   uuid PRIMARY KEY,
    name        text NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,  -- SHA-256 of the bearer token, which is shown once
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE events (
    position        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- global order, for readers
    stream_id       uuid NOT NULL,
    version         integer NOT NULL CHECK (version >= 1),
    type            text NOT NULL,
    schema_version  integer NOT NULL,
    payload         jsonb NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Optimistic concurrency: two appends at one version cannot both commit.
    CONSTRAINT events_stream_version UNIQUE (stream_id, version)
);

CREATE FUNCTION events_are_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are never updated or deleted (% on events)', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER events_no_update_or_delete BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_are_immutable();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_are_immutable();

-- A read model of each match for listing; written in the same transaction as its events.
CREATE TABLE matches (
    match_id      uuid PRIMARY KEY,
    ruleset       text NOT NULL,
    turn_seconds  integer NOT NULL,
    status        text NOT NULL,           -- open, playing, ended
    phase         text NOT NULL,
    version       integer NOT NULL,
    seats         jsonb NOT NULL,          -- [{"player": uuid|null, "bot": bool}|null, ...]
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX matches_by_status ON matches (status, created_at DESC);

-- The first response to a command sent with an Idempotency-Key, replayed for retries.
CREATE TABLE idempotency_keys (
    player_id     uuid NOT NULL REFERENCES players (player_id),
    key           text NOT NULL,
    match_id      uuid NOT NULL,
    request_hash  bytea NOT NULL,
    status        integer NOT NULL,
    body          text NOT NULL,           -- the JSON exactly as first sent, byte for byte
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (player_id, key)
);
