-- The ledger's amounts, sized for the worst hand at the largest stake the API accepts:
-- numeric(16, 2) held less than 10^14, and a hand of 12 bombs at the largest unit moves
-- about 1.97 × 10^14 (tests/test_match_rights.py settles the worst hand into this table).
--
-- The bound. The largest unit the contract allows is 999,999,999.99 (its amounts match
-- ^\d{1,9}(\.\d{1,2})?$; DDZ_MAX_UNIT may only lower it) and the largest rake 1. The most
-- a hand multiplies: bid 3 with 头撂 (×4/3), 明王 (×2), 摊打 (×2), 报到 then 打 (×2) and
-- ×2 per bomb. A hand ends when one seat plays its last card, so the three others keep a
-- card each: at most 105 of the 108 cards are played, four or more to a bomb, so at most
-- ⌊105 / 4⌋ = 26 bombs. Each farmer's stake is then unit × 3 × 32/3 × 2^26 = unit × 2^31,
-- the landlord's gain three times that, 6,442,450,943,935,575,490.56, and a rake of 1
-- moves it whole to the house in one entry: the largest amount an entry can hold (the
-- stakes are one entry per farmer, the penalty 96 units). That is 19 digits before the
-- point: numeric(21, 2) holds up to 10^19.
--
-- Only the precision grows (the scale stays 2): PostgreSQL rewrites nothing, the entries'
-- triggers (never updated, every movement balanced) see no row change, and running this
-- twice changes nothing the second time.

ALTER TABLE ledger_entries ALTER COLUMN amount TYPE numeric(21, 2);
