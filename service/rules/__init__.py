"""The rules of Shanghai Dou Dizhu (上海斗地主), as pure Python with no I/O.

>>> from service.rules import classify, legal_plays, parse_ranks
>>> c = classify("TJQKA")
>>> c.type.value, c.rank
('straight', 'A')
>>> classify("A2345").beats(classify("23456"))
False
>>> sorted(p.ranks for p in legal_plays("33445", classify("4")))
['5']
"""

from .cards import (
    ACE,
    BIG_JOKER,
    DECK,
    NUM_RANKS,
    RANKS,
    SMALL_JOKER,
    SUITS,
    TWO,
    Card,
    Counts,
    counts_of,
    format_cards,
    format_ranks,
    parse_cards,
    parse_ranks,
    rank_index,
)
from .combinations import (
    Combination,
    CombinationType,
    beats,
    classify,
    readings,
    why_invalid,
)
from .deal import SEATS, Deal, commitment, deal, new_seed, parse_seed
from .errors import InvalidCombination, InvalidNotation, RulesError, UnknownRuleset
from .moves import IllegalPlay, Move, can_play, legal_moves, legal_plays, pick_cards, verify_play
from .report import JOKER_UNIT, ReportChoice, locked_ranks, report_units
from .rulesets import (
    DEFAULT_RULESET,
    RULESETS,
    SHANGHAI_LOCAL,
    SHANGHAI_PLATFORM,
    BombLimit,
    Ruleset,
)

__all__ = [name for name in dir() if not name.startswith("_")]
