-- Player administration from the console (docs/operations.md, "Players"): a player's
-- standing (suspended or banned players' tokens are refused with a problem saying so),
-- and adjustments of the ledger, each an operator's act with its reason: a correction
-- of a balance, or the voiding of a hand, written as entries of their own that balance
-- (double entry), never as an edit of an entry. Every act is in the audit trail, with
-- the reason the operator gave.

ALTER TABLE players ADD COLUMN IF NOT EXISTS standing text NOT NULL DEFAULT 'active'
    CHECK (standing IN ('active', 'suspended', 'banned'));
ALTER TABLE audit_trail ADD COLUMN IF NOT EXISTS reason text;

CREATE TABLE IF NOT EXISTS ledger_adjustments (
    adjustment_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind           text NOT NULL CHECK (kind IN ('correction', 'void')),
    match_id       uuid REFERENCES settlements (match_id),  -- the hand a void undoes
    operator       text NOT NULL,
    reason         text NOT NULL CHECK (reason <> ''),
    at             timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'void') = (match_id IS NOT NULL))
);
-- A hand is voided once.
CREATE UNIQUE INDEX IF NOT EXISTS ledger_adjustments_one_void ON ledger_adjustments (match_id)
    WHERE kind = 'void';
CREATE TRIGGER ledger_adjustments_immutable BEFORE UPDATE OR DELETE ON ledger_adjustments
    FOR EACH ROW EXECUTE FUNCTION refuse_change();

-- An entry belongs to a settlement or to an adjustment.
ALTER TABLE ledger_entries ADD COLUMN IF NOT EXISTS adjustment_id bigint
    REFERENCES ledger_adjustments (adjustment_id);
ALTER TABLE ledger_entries ALTER COLUMN match_id DROP NOT NULL;
ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_of_one;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_of_one
    CHECK ((match_id IS NULL) <> (adjustment_id IS NULL));
ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
    CHECK (kind IN ('stake', 'rake', 'penalty', 'correction', 'void'));
CREATE INDEX IF NOT EXISTS ledger_by_adjustment ON ledger_entries (adjustment_id)
    WHERE adjustment_id IS NOT NULL;

-- Every movement balances, a settlement's or an adjustment's: checked at commit.
CREATE OR REPLACE FUNCTION ledger_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM ledger_entries
        WHERE (NEW.match_id IS NOT NULL AND match_id = NEW.match_id)
           OR (NEW.adjustment_id IS NOT NULL AND adjustment_id = NEW.adjustment_id)
        GROUP BY match_id, adjustment_id, movement HAVING sum(amount) <> 0
    ) THEN
        RAISE EXCEPTION 'ledger entries of % do not balance',
            coalesce(NEW.match_id::text, 'adjustment ' || NEW.adjustment_id)
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;

