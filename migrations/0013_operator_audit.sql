-- Operator accounts, second part (docs/operations.md).
--
-- Revoking an operator ended their tokens and sessions but left the password working: the
-- revoked operator signed in again. revoked_at marks the account as closed to sign-ins and
-- new tokens (remove and add the operator again to let them back).
--
-- Every operator action goes to the audit trail, with where it came from: the client's
-- address for the API and the console (the one the trusted proxies forward), the host
-- for the CLI (whose "operator" is cli:<the system user who ran it>). The console searches
-- the trail by operator, action, way in and day, newest first.

ALTER TABLE operators ADD COLUMN IF NOT EXISTS revoked_at timestamptz;
ALTER TABLE audit_trail ADD COLUMN IF NOT EXISTS address text;
CREATE INDEX IF NOT EXISTS audit_trail_by_operator ON audit_trail (operator, audit_id DESC);
