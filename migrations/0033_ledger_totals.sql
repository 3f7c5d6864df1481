-- The ledger check's totals kept as they change (docs/operations.md, "Stored verdicts"):
-- the Ledger page and every /metrics scrape added up all the stored verdicts and counted
-- all the settlements at each read (0.5 s at 1,000,000 hands). Triggers keep the sums
-- here instead, in 16 rows (a settlement adds to the row of its match's hash, so that
-- settlements at once seldom wait on one row); a read adds the 16 rows up.

CREATE TABLE IF NOT EXISTS ledger_totals (
    slot      smallint PRIMARY KEY CHECK (slot BETWEEN 0 AND 15),
    settled   bigint NOT NULL DEFAULT 0,          -- settlements
    checked   bigint NOT NULL DEFAULT 0,          -- stored verdicts
    entries   bigint NOT NULL DEFAULT 0,          -- the entries they checked
    total     numeric(21, 2) NOT NULL DEFAULT 0,  -- what those entries add to
    failing   bigint NOT NULL DEFAULT 0           -- verdicts with problems
);

CREATE OR REPLACE FUNCTION ledger_slot(match_id uuid) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$ SELECT (hashtext(match_id::text) & 15)::smallint $$;

-- Each slot's sums made again from the rows that fall in it: what the triggers below keep
-- (the backfill here, `ddz rebuild`).
CREATE OR REPLACE FUNCTION ledger_totals_made()
RETURNS TABLE (slot smallint, settled bigint, checked bigint, entries bigint, total numeric,
               failing bigint)
LANGUAGE sql STABLE AS $$
    SELECT s.slot::smallint, coalesce(t.settled, 0), coalesce(v.checked, 0),
        coalesce(v.entries, 0), coalesce(v.total, 0), coalesce(v.failing, 0)
    FROM generate_series(0, 15) AS s (slot)
    LEFT JOIN (SELECT ledger_slot(match_id) AS slot, count(*) AS settled FROM settlements
               GROUP BY 1) t USING (slot)
    LEFT JOIN (SELECT ledger_slot(match_id) AS slot, count(*) AS checked,
                   sum(entries)::bigint AS entries, sum(total) AS total,
                   count(*) FILTER (WHERE cardinality(problems) > 0) AS failing
               FROM ledger_verdicts GROUP BY 1) v USING (slot)
$$;

INSERT INTO ledger_totals SELECT * FROM ledger_totals_made()
    ON CONFLICT (slot) DO UPDATE SET settled = EXCLUDED.settled, checked = EXCLUDED.checked,
        entries = EXCLUDED.entries, total = EXCLUDED.total, failing = EXCLUDED.failing;

CREATE OR REPLACE FUNCTION ledger_totals_settled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ledger_totals SET settled = settled + 1 WHERE slot = ledger_slot(NEW.match_id);
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS settlements_totals ON settlements;
CREATE TRIGGER settlements_totals AFTER INSERT ON settlements
    FOR EACH ROW EXECUTE FUNCTION ledger_totals_settled();

-- A verdict stored, replaced (a full check writes it anew) or deleted.
CREATE OR REPLACE FUNCTION ledger_totals_checked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE ledger_totals SET checked = checked - 1, entries = entries - OLD.entries,
            total = total - OLD.total,
            failing = failing - (cardinality(OLD.problems) > 0)::int
        WHERE slot = ledger_slot(OLD.match_id);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE ledger_totals SET checked = checked + 1, entries = entries + NEW.entries,
            total = total + NEW.total,
            failing = failing + (cardinality(NEW.problems) > 0)::int
        WHERE slot = ledger_slot(NEW.match_id);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS ledger_verdicts_totals ON ledger_verdicts;
CREATE TRIGGER ledger_verdicts_totals AFTER INSERT OR UPDATE OR DELETE ON ledger_verdicts
    FOR EACH ROW EXECUTE FUNCTION ledger_totals_checked();
