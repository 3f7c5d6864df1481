-- Settlement into a double-entry ledger, and what the workers need to find deadlines and lost work.

ALTER TABLE matches
    ADD COLUMN turn_seat      integer,
    ADD COLUMN system_to_act  boolean NOT NULL DEFAULT false,  -- a bot or a disconnected seat acts next
    ADD COLUMN deadline       timestamptz,                      -- when the seat to act loses its turn
    ADD COLUMN settled        boolean NOT NULL DEFAULT false;
CREATE INDEX matches_unfinished ON matches (status, settled) WHERE status <> 'open';
-- The workers' deadline scan, every second.
CREATE INDEX matches_deadlines ON matches (deadline) WHERE status = 'playing' AND NOT system_to_act;

CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are never updated or deleted (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

-- At most one settlement per match: a second settlement job, or two at once, pays once.
CREATE TABLE settlements (
    match_id    uuid PRIMARY KEY REFERENCES matches (match_id),
    result      jsonb NOT NULL,  -- the result block, recomputed from the match's events
    settled_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per side of each movement of points: the two sides of a movement add to zero.
CREATE TABLE ledger_entries (
    entry_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    match_id    uuid NOT NULL REFERENCES settlements (match_id),
    movement    integer NOT NULL,
    account     text NOT NULL,   -- 'player:<uuid>', 'bots' (system bot seats) or 'house'
    seat        integer CHECK (seat BETWEEN 0 AND 3),
    kind        text NOT NULL CHECK (kind IN ('stake', 'rake', 'penalty')),
    amount      numeric(16, 2) NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_by_account ON ledger_entries (account, entry_id);
CREATE INDEX ledger_by_match ON ledger_entries (match_id);

CREATE TRIGGER settlements_immutable BEFORE UPDATE OR DELETE ON settlements
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER ledger_immutable BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION refuse_change();

-- Every settlement balances: checked when its transaction commits.
CREATE FUNCTION ledger_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM ledger_entries WHERE match_id = NEW.match_id
        GROUP BY movement HAVING sum(amount) <> 0
    ) THEN
        RAISE EXCEPTION 'ledger entries of match % do not balance', NEW.match_id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER ledger_entries_balance AFTER INSERT ON ledger_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_balances();
