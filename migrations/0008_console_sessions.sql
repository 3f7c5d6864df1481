-- Console sessions kept on the server (docs/operations.md): the browser's cookie holds a
-- random id whose SHA-256 hash is here, so that signing out, `ddz operator revoke` and
-- removing the operator end a session at once, whatever cookie a browser saved. A session
-- ends at expires_at, counted from signing in, however busy the operator is.

CREATE TABLE console_sessions (
    session_hash  bytea PRIMARY KEY,
    operator_id   uuid NOT NULL REFERENCES operators (operator_id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX console_sessions_by_operator ON console_sessions (operator_id);

-- What admins do to operators from the console goes to the audit trail too: the action
-- ('add', 'revoke', 'remove') and the operator it was done to.
ALTER TABLE audit_trail ADD COLUMN subject text;
