-- What the workers prune (service/store/retention.py), found by time rather than by a scan
-- of each table: idempotency keys and creation keys by age, player tokens and console
-- sessions by expiry. Safe to run again.
CREATE INDEX IF NOT EXISTS idempotency_keys_by_time ON idempotency_keys (created_at);
CREATE INDEX IF NOT EXISTS creation_keys_by_time ON creation_keys (created_at);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS console_sessions_by_expiry ON console_sessions (expires_at);
