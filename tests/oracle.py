"""Independent reference implementation ("oracle") of the Shanghai Dou Dizhu
combination and beating rules (docs/rules.md §1-3), used only by tests to
cross-check the real rules engine.

Written for clarity, following docs/rules.md literally, with brute force wherever
possible.  Pure standard library; it imports nothing from the project.

Cards are rank strings: one character per card from "3456789TJQKA2BR"
(B = small joker, R = big joker).  The order of the characters is irrelevant.

A *reading* is a tuple (type, rank_char, strength_key, extra):
  type          single, pair, triple, straight, pair_chain, plane, full_house,
                plane_with_pairs, bomb, joker_bomb
  rank_char     the rank that decides strength (top of a sequence, the triple of a
                full house, the triples' top of a plane_with_pairs, the bomb's rank;
                None for joker_bomb)
  strength_key  comparable within one type and one card count:
                single/pair/triple/full_house: index in the single-card order
                sequences and plane_with_pairs: top *position* (A = 1 or 14, 2 = 2,
                3..K = 3..13)
                bomb: (card count, index in the single-card order)
                joker_bomb: 0 (there is only one)
  extra         how the cards were read (informational):
                sequences: tuple of positions, bottom to top
                full_house: (pair rank,)
                plane_with_pairs: (triple positions, pair positions)
                bomb: (card count,)
                others: ()
"""

from collections import Counter
from itertools import product

ORDER = "3456789TJQKA2BR"  # single-card order, weakest first
JOKERS = "BR"
RANKS = "3456789TJQKA2"  # non-joker ranks
RULESETS = ("shanghai-platform", "shanghai-local")

MAX_PER_RANK = 8  # 4 suits x 2 decks
MAX_PER_JOKER = 2  # two decks, one of each joker per deck


# --------------------------------------------------------------------------
# Basic helpers
# --------------------------------------------------------------------------


def _check(cards):
    if not isinstance(cards, str):
        raise TypeError("cards must be a rank string")
    for c in cards:
        if c not in ORDER:
            raise ValueError(f"unknown rank character {c!r} in {cards!r}")


def _check_ruleset(ruleset):
    if ruleset not in RULESETS:
        raise ValueError(f"unknown ruleset {ruleset!r}")


def canonical(cards: str) -> str:
    """Sort a rank string in the single-card order 3456789TJQKA2BR."""
    _check(cards)
    return "".join(sorted(cards, key=ORDER.index))


def _order(rank):
    return ORDER.index(rank)


def _rank_at(position):
    """The rank that sits at a sequence position (1..14)."""
    if position in (1, 14):
        return "A"
    if position == 2:
        return "2"
    return "3456789TJQK"[position - 3]


def _windows(length):
    """Every run of `length` consecutive positions inside 1..14 whose ranks are
    all different (this drops 1..14 itself, where A would appear twice).
    Yields tuples of positions, bottom to top."""
    for bottom in range(1, 14 - length + 2):
        positions = tuple(range(bottom, bottom + length))
        ranks = [_rank_at(p) for p in positions]
        if len(set(ranks)) == length:
            yield positions


def _impossible(counts):
    for rank, n in counts.items():
        if rank in JOKERS and n > MAX_PER_JOKER:
            return True
        if rank not in JOKERS and n > MAX_PER_RANK:
            return True
    return False


# --------------------------------------------------------------------------
# Readings
# --------------------------------------------------------------------------


def readings(cards: str, ruleset: str = "shanghai-platform") -> list:
    """Every legal reading of the multiset `cards` per docs/rules.md §2."""
    _check(cards)
    _check_ruleset(ruleset)
    counts = Counter(cards)
    total = len(cards)
    found = []

    if total == 0 or _impossible(counts):
        return []

    ranks_present = set(counts)

    # --- one rank only: single, pair, triple, bomb ------------------------
    if len(ranks_present) == 1:
        (rank,) = ranks_present
        if total == 1:
            found.append(("single", rank, _order(rank), ()))
        elif total == 2:
            # BB and RR are pairs (BR has two ranks and is handled below: nothing)
            found.append(("pair", rank, _order(rank), ()))
        elif total == 3:
            if rank not in JOKERS:  # jokers never form a triple
                found.append(("triple", rank, _order(rank), ()))
        else:
            # 4 or more of one rank is always a bomb and nothing else
            if rank not in JOKERS and 4 <= total <= MAX_PER_RANK:
                found.append(("bomb", rank, (total, _order(rank)), (total,)))
        return _dedupe(found)

    # --- the four jokers ----------------------------------------------------
    if counts == Counter("BBRR"):
        if ruleset == "shanghai-platform":
            found.append(("joker_bomb", None, 0, ()))
        return _dedupe(found)

    # --- sequences: straight (unit 1), pair_chain (unit 2), plane (unit 3) --
    for seq_type, unit, min_len in (("straight", 1, 5), ("pair_chain", 2, 3), ("plane", 3, 2)):
        if total % unit:
            continue
        length = total // unit
        if length < min_len:
            continue
        for positions in _windows(length):
            wanted = Counter()
            for p in positions:
                wanted[_rank_at(p)] += unit
            if wanted == counts:
                top = positions[-1]
                found.append((seq_type, _rank_at(top), top, positions))

    # --- full house: a triple + a pair of another rank ----------------------
    if total == 5:
        for triple_rank in RANKS:  # no joker triple
            for pair_rank in ORDER:  # joker pairs allowed
                if pair_rank == triple_rank:
                    continue
                wanted = Counter({triple_rank: 3, pair_rank: 2})
                if wanted == counts:
                    found.append(("full_house", triple_rank, _order(triple_rank), (pair_rank,)))

    # --- plane with pairs: n>=2 consecutive triples + n consecutive pairs ---
    if total % 5 == 0 and total // 5 >= 2:
        n = total // 5
        for triple_positions in _windows(n):
            for pair_positions in _windows(n):
                wanted = Counter()
                for p in triple_positions:
                    wanted[_rank_at(p)] += 3
                for p in pair_positions:
                    wanted[_rank_at(p)] += 2
                if wanted == counts:
                    top = triple_positions[-1]
                    found.append(
                        ("plane_with_pairs", _rank_at(top), top, (triple_positions, pair_positions))
                    )

    return _dedupe(found)


def _dedupe(found):
    out = []
    for r in found:
        if r not in out:
            out.append(r)
    return out


# --------------------------------------------------------------------------
# Strongest reading, classification, beating
# --------------------------------------------------------------------------


def _power(reading):
    """Sort key used to pick the strongest reading of one multiset.  (Different
    types cannot actually occur together for one multiset, but bombs are put
    above everything else to be safe.)"""
    kind = reading[0]
    tier = 2 if kind == "joker_bomb" else 1 if kind == "bomb" else 0
    return (tier, reading[2])


def strongest(cards: str, ruleset: str = "shanghai-platform"):
    rs = readings(cards, ruleset)
    if not rs:
        return None
    return max(rs, key=_power)


def classify(cards: str, ruleset: str = "shanghai-platform") -> dict:
    best = strongest(cards, ruleset)
    if best is None:
        return {"valid": False}
    return {"valid": True, "type": best[0], "rank": best[1]}


def _is_bomb(kind):
    return kind in ("bomb", "joker_bomb")


def _reading_beats(mine, my_count, theirs, their_count):
    """docs/rules.md §3, for one reading of each side."""
    mine_type, theirs_type = mine[0], theirs[0]
    if theirs_type == "joker_bomb":
        return False  # nothing beats the joker bomb
    if mine_type == "joker_bomb":
        return True  # it beats everything else
    if mine_type == "bomb" and theirs_type == "bomb":
        return mine[2] > theirs[2]  # (count, rank): more cards, then rank
    if mine_type == "bomb":
        return True  # any bomb beats any non-bomb
    if theirs_type == "bomb":
        return False  # a non-bomb never beats a bomb
    return mine_type == theirs_type and my_count == their_count and mine[2] > theirs[2]


def beats(cards: str, over: str, ruleset: str = "shanghai-platform"):
    """True/False whether `cards` beats `over`; None when either has no reading.
    `over` is taken at its strongest reading; `cards` wins if any reading does."""
    mine = readings(cards, ruleset)
    theirs = strongest(over, ruleset)
    if not mine or theirs is None:
        return None
    return any(_reading_beats(r, len(cards), theirs, len(over)) for r in mine)


# --------------------------------------------------------------------------
# Brute-force enumeration over sub-multisets of a hand
# --------------------------------------------------------------------------


def _sub_multisets(hand):
    counts = Counter(hand)
    ranks = sorted(counts, key=_order)
    for choice in product(*(range(counts[r] + 1) for r in ranks)):
        sub = "".join(r * k for r, k in zip(ranks, choice))
        if sub:
            yield sub  # already canonical (ranks sorted)


def all_plays(hand: str, ruleset: str = "shanghai-platform") -> set:
    """Every distinct sub-multiset of `hand` (canonical string) with a reading."""
    _check(hand)
    _check_ruleset(ruleset)
    return {sub for sub in _sub_multisets(hand) if readings(sub, ruleset)}


def all_replies(hand: str, over: str, ruleset: str = "shanghai-platform") -> set:
    """Every distinct sub-multiset of `hand` (canonical string) that beats `over`.
    Empty when `over` itself is no combination."""
    _check(hand)
    _check(over)
    _check_ruleset(ruleset)
    return {sub for sub in _sub_multisets(hand) if beats(sub, over, ruleset) is True}
