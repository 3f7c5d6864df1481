"""报到 units (docs/rules.md §4.8): the four jokers (where they are a bomb) and every rank held
seven or eight times."""

from __future__ import annotations

from enum import StrEnum

from .cards import BIG_JOKER, SMALL_JOKER, SUITED_RANKS, Counts
from .rulesets import Ruleset

REPORT_RANK_COUNT = 7
#: The reported jokers, as the ranks they lock.
JOKER_UNIT = frozenset({SMALL_JOKER, BIG_JOKER})


def report_units(counts: Counts, ruleset: Ruleset) -> list[frozenset[int]]:
    """The units a hand may report, each as the set of ranks it locks."""
    units = [frozenset({r}) for r in SUITED_RANKS if counts[r] >= REPORT_RANK_COUNT]
    if ruleset.joker_bomb and counts[SMALL_JOKER] == 2 and counts[BIG_JOKER] == 2:
        units.append(JOKER_UNIT)
    return units


class ReportChoice(StrEnum):
    """The landlord's 报到 decision: report and play on (打), report and end the hand at
    once (不打), or report nothing."""

    PLAY = "play"
    NO_PLAY = "no_play"
    DECLINE = "decline"


def locked_ranks(units: list[frozenset[int]]) -> frozenset[int]:
    """The ranks the reported units lock."""
    return frozenset(r for unit in units for r in unit)
