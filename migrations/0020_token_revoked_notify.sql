-- Every deleted token, a player's or an operator's (revoked, or gone with its operator), is
-- named by its hash on the channel ddz_token_revoked, whatever deleted it (the API, the
-- CLI, the console, plain SQL): every API process then forgets it and ends the streams and
-- long polls it holds open, at once (service/api/open_streams.py). Safe to run again.

CREATE OR REPLACE FUNCTION notify_token_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ddz_token_revoked', encode(OLD.token_hash, 'hex'));
    RETURN OLD;
END
$$;

DROP TRIGGER IF EXISTS tokens_revoked ON tokens;
CREATE TRIGGER tokens_revoked AFTER DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION notify_token_revoked();

DROP TRIGGER IF EXISTS operator_tokens_revoked ON operator_tokens;
CREATE TRIGGER operator_tokens_revoked AFTER DELETE ON operator_tokens
    FOR EACH ROW EXECUTE FUNCTION notify_token_revoked();
