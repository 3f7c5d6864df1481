-- The ledger check, stored (docs/operations.md, "The ledger"): each settled hand is
-- checked once, in the transaction that settles it, and its verdict kept here with what
-- its entries add to, so that the console and /metrics read verdicts and totals instead
-- of recomputing every hand of the history at every view. A full check, run on demand in
-- the background, checks every settled hand again and writes its verdict anew.

CREATE TABLE IF NOT EXISTS ledger_verdicts (
    match_id    uuid PRIMARY KEY REFERENCES settlements (match_id),
    problems    text[] NOT NULL,          -- none when the hand checks out
    entries     integer NOT NULL,         -- its ledger entries when checked
    total       numeric(21, 2) NOT NULL,  -- what they add to (0.00)
    checked_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ledger_verdicts_failing ON ledger_verdicts (match_id)
    WHERE cardinality(problems) > 0;

-- Each full check: who asked, how far it is, and what it found of the ledger as a whole.
CREATE TABLE IF NOT EXISTS ledger_checks (
    check_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    requested_by  text NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    hands         integer,                   -- the settled hands to check, once counted
    done          integer NOT NULL DEFAULT 0,
    failing       integer NOT NULL DEFAULT 0,
    problems      text[] NOT NULL DEFAULT '{}',  -- of the ledger as a whole (its total)
    updated_at    timestamptz NOT NULL DEFAULT now(),  -- its last progress
    finished_at   timestamptz
);

-- The takings chart reads the house's entries of the last days, not all of them.
CREATE INDEX IF NOT EXISTS ledger_by_account_time ON ledger_entries (account, created_at);
