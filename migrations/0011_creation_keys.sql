-- Idempotency-Key on the requests that create (a match, a table, a seat at a table, a
-- lobby ticket): the first request's answer, kept to be sent again to a retry. A key is
-- reserved (status NULL) before its request creates anything and answered after, so that
-- a concurrent or later duplicate never creates a second resource.
CREATE TABLE IF NOT EXISTS creation_keys (
    player_id     uuid NOT NULL REFERENCES players (player_id),
    operation     text NOT NULL,          -- 'POST /v1/tables', 'POST /v1/tables/<id>/seats' ...
    key           text NOT NULL,
    request_hash  bytea NOT NULL,
    status        integer,                -- NULL: the first request is under way
    body          bytea,                  -- the answer exactly as first sent
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (player_id, operation, key)
);
