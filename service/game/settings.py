"""A match's settings: the ruleset and the money options of docs/rules.md §5 (the API's
``table`` object). Named apart from the lobby's tables (``service/app/tables.py``), which
deal hand after hand, each a match with these settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ..rules import Ruleset
from .errors import GameError

CENT = Decimal("0.01")
DEFAULT_TURN_SECONDS = 30
#: How well the system plays its seats (service/game/bot/levels.py).
BOT_LEVELS = ("easy", "normal", "hard")
DEFAULT_BOT_LEVEL = "normal"
MAX_TURN_SECONDS = 3600
#: How a money option may be given (anything else is refused, see :func:`amount`).
Amount = Decimal | int | str


def amount(value: object, name: str) -> Decimal:
    """A money option of a table (``unit``, ``cap``, ``rake``): a finite decimal of at least
    0, given as a Decimal, an int or a decimal string (a float is no exact amount). The one
    check of these options, for a table and for :func:`~.settlement.settle`."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, str)):
        raise GameError(f"{name} must be a decimal amount, not {value!r}", "invalid_table")
    try:
        exact = Decimal(value)
    except (InvalidOperation, ValueError):
        raise GameError(
            f"{name} must be a decimal amount, not {value!r}", "invalid_table"
        ) from None
    if not exact.is_finite() or exact < 0:
        raise GameError(
            f"{name} must be a finite amount of at least 0, not {value!r}", "invalid_table"
        )
    return exact


def share(value: object, name: str) -> Decimal:
    """The ``rake``: an amount from 0 to 1, the share of each winner's gain."""
    exact = amount(value, name)
    if exact > 1:
        raise GameError(f"{name} is a share between 0 and 1, not {value!r}", "invalid_table")
    return exact


@dataclass(frozen=True)
class MatchSettings:
    """Ruleset (with its ``bombs_double`` option), base stake ``unit`` (底分), per-hand
    ``cap`` (单局封顶, ``None`` = no cap), system cut ``rake`` (系统得分, a share) and the
    seconds each decision may take before the system plays the seat; ``bot_level``: how well
    the system plays its seats (a disconnected player's at least ``normal``)."""

    ruleset: Ruleset
    unit: Decimal = Decimal("1.00")
    cap: Decimal | None = None
    rake: Decimal = Decimal("0.00")
    turn_seconds: int = DEFAULT_TURN_SECONDS
    bot_level: str = DEFAULT_BOT_LEVEL

    @classmethod
    def build(
        cls,
        ruleset: str | None = None,
        unit: Amount = "1.00",
        cap: Amount | None = None,
        rake: Amount = "0.00",
        bombs_double: bool | None = None,
        turn_seconds: int = DEFAULT_TURN_SECONDS,
        bot_level: str = DEFAULT_BOT_LEVEL,
    ) -> MatchSettings:
        """A table from plain values, checked."""
        base = Ruleset.by_name(ruleset)
        if bombs_double is not None and bombs_double != base.bombs_double:
            base = base.with_options(bombs_double=bool(bombs_double))
        unit_ = amount(unit, "unit")
        if unit_ == 0 or unit_ != unit_.quantize(CENT):
            raise GameError(
                f"unit must be a positive amount in cents, not {unit!r}", "invalid_table"
            )
        cap_ = None if cap is None else amount(cap, "cap")
        if cap_ is not None and (cap_ == 0 or cap_ != cap_.quantize(CENT)):
            raise GameError(f"cap must be a positive amount in cents, not {cap!r}", "invalid_table")
        rake_ = share(rake, "rake")
        if type(turn_seconds) is not int or not 1 <= turn_seconds <= MAX_TURN_SECONDS:
            raise GameError(
                f"turn_seconds must be a whole number from 1 to {MAX_TURN_SECONDS}", "invalid_table"
            )
        if bot_level not in BOT_LEVELS:
            raise GameError(
                f"bot_level is one of {', '.join(BOT_LEVELS)}, not {bot_level!r}", "invalid_table"
            )
        cap_ = None if cap_ is None else cap_.quantize(CENT)
        return cls(base, unit_.quantize(CENT), cap_, rake_, turn_seconds, bot_level)

    def to_json(self) -> dict[str, Any]:
        return {
            "ruleset": self.ruleset.name,
            "unit": str(self.unit),
            "cap": None if self.cap is None else str(self.cap),
            "rake": str(self.rake),
            "bombs_double": self.ruleset.bombs_double,
            "turn_seconds": self.turn_seconds,
            "bot_level": self.bot_level,
        }

    def settings(self) -> dict[str, Any]:
        """The table as every answer of the API shows it: ``ruleset`` (its name) and the
        ``options`` of the table."""
        options = self.to_json()
        return {"ruleset": options.pop("ruleset"), "options": options}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MatchSettings:
        return cls.build(
            data.get("ruleset"),
            data["unit"],
            data.get("cap"),
            data.get("rake", "0"),
            data.get("bombs_double"),
            data.get("turn_seconds", DEFAULT_TURN_SECONDS),
            data.get("bot_level", DEFAULT_BOT_LEVEL),
        )
