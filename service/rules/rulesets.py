"""Rule profiles (docs/rules.md §7): ``shanghai-platform``, the online platform's rules,
and ``shanghai-local``, the rules played locally in Shanghai.

The profiles differ only in data held here, so the engine never asks which profile it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from .errors import UnknownRuleset

#: A farmer's own bidding, for the limit of ``shanghai-platform``: ``None`` = never got a
#: turn to bid, 0 = passed, 1 or 2 = the value bid.
OwnBid = int | None


@dataclass(frozen=True)
class BombLimit:
    """How many bombs a farmer may play in one hand (the landlord has no limit).

    ``basis`` says what the limit depends on: the farmer's own bidding (``own_bid``) or
    the landlord's winning bid (``landlord_bid``); ``limits`` maps that value to the
    number of bombs allowed, ``None`` meaning no limit.
    """

    basis: Literal["own_bid", "landlord_bid"]
    limits: Mapping[OwnBid, int | None]

    def for_farmer(self, own_bid: OwnBid, landlord_bid: int) -> int | None:
        key = own_bid if self.basis == "own_bid" else landlord_bid
        return self.limits[key]


@dataclass(frozen=True)
class Ruleset:
    """A named rule profile; look one up with :meth:`by_name`."""

    name: str
    #: ``BBRR`` is a ``joker_bomb``, and the four jokers count as one 报到 unit.
    joker_bomb: bool
    bomb_limit: BombLimit
    #: Every bomb or joker bomb played doubles the score (docs/rules.md §5 [decided]).
    bombs_double: bool = True

    def __hash__(self) -> int:
        return hash((self.name, self.joker_bomb, self.bombs_double))

    @staticmethod
    def by_name(name: str | None) -> Ruleset:
        """The ruleset of that name; ``None`` gives the default, ``shanghai-platform``."""
        if name is None:
            return DEFAULT_RULESET
        try:
            return RULESETS[name]
        except (KeyError, TypeError):
            raise UnknownRuleset(
                f"unknown ruleset {name!r}; known: {', '.join(RULESETS)}"
            ) from None

    def with_options(self, **changes: Any) -> Ruleset:
        """A copy with some options changed, e.g. ``bombs_double=False`` for a table."""
        return replace(self, **changes)

    def __str__(self) -> str:
        return self.name


SHANGHAI_PLATFORM = Ruleset(
    name="shanghai-platform",
    joker_bomb=True,
    bomb_limit=BombLimit("own_bid", MappingProxyType({None: None, 0: 1, 1: 1, 2: 2})),
)

SHANGHAI_LOCAL = Ruleset(
    name="shanghai-local",
    joker_bomb=False,
    bomb_limit=BombLimit("landlord_bid", MappingProxyType({1: 1, 2: 2, 3: None})),
)

RULESETS: Mapping[str, Ruleset] = MappingProxyType(
    {r.name: r for r in (SHANGHAI_PLATFORM, SHANGHAI_LOCAL)}
)
DEFAULT_RULESET = SHANGHAI_PLATFORM
