-- An idempotency key now records the versions its first request appended, not the
-- response: a retry's answer is built again from those events (it is the same document),
-- so the key can be written by the append statement itself, with no transaction around.

ALTER TABLE idempotency_keys
    ADD COLUMN first_version integer,
    ADD COLUMN last_version integer;

-- Keys written before: their response names the versions.
UPDATE idempotency_keys SET
    first_version = (body::jsonb -> 'events' -> 0 ->> 'version')::integer,
    last_version = (body::jsonb ->> 'version')::integer;

ALTER TABLE idempotency_keys
    ALTER COLUMN first_version SET NOT NULL,
    ALTER COLUMN last_version SET NOT NULL,
    DROP COLUMN status,
    DROP COLUMN body;
