-- Named operators (docs/operations.md): each with a role and a password (an argon2 hash),
-- their API tokens (SHA-256 hashes, as players' are), and the audit trail of every read
-- of hidden data (who, when, what).

CREATE TABLE operators (
    operator_id    uuid PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    role           text NOT NULL CHECK (role IN ('auditor', 'admin')),
    password_hash  text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE operator_tokens (
    token_id     uuid PRIMARY KEY,
    operator_id  uuid NOT NULL REFERENCES operators (operator_id) ON DELETE CASCADE,
    token_hash   bytea NOT NULL UNIQUE,
    label        text,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- operator is a name, not a reference: the shared bootstrap token has no row, and the trail
-- outlives an operator removed.
CREATE TABLE audit_trail (
    audit_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT now(),
    operator  text NOT NULL,
    action    text NOT NULL,     -- what was read: 'events', 'record', 'stream', 'replay'
    match_id  uuid,
    via       text NOT NULL      -- 'api' or 'console'
);
CREATE INDEX audit_trail_by_time ON audit_trail (at DESC);
CREATE TRIGGER audit_trail_immutable BEFORE UPDATE OR DELETE ON audit_trail
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
