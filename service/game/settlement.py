"""Settlement of one hand (docs/rules.md §5) and the ``factors`` / ``multiplier`` /
``settlement`` parts of the hand record's ``result`` block (docs/hand-record.md).

Pure standard library, no I/O. All arithmetic is exact: amounts are carried as
:class:`fractions.Fraction` or as integer cents and only turned into
:class:`decimal.Decimal` (always with exactly two places) at the end, so the result does
not depend on any decimal context.

The steps, in order (``S`` = each farmer's stake):

1. **Multiplier** ``M`` = 明王 ×2 · 头撂 ×4/3 · 摊打 ×2 · 报到-打 ×2 · (×2 per bomb when
   ``bombs_double``).
2. **Gross**: ``S = unit × bid × M``. Landlord wins: each farmer −S, landlord +3S. Farmers
   win: each farmer +S, landlord −3S — except after 报到-打, when every gross is 0.
   报到-不打 with ``N`` units: each farmer −unit × bid × M × N (``M`` without bomb factor),
   landlord +3 × that. A farmer's amount that is not exact to the cent is rounded toward
   zero; the landlord's is always the exact negative sum of the farmers'.
3. **Cap** (单局封顶): when the winners' total gain exceeds the cap, every farmer's gross
   is scaled by ``cap / total`` and rounded toward zero to 0.01; the landlord's is the
   exact negative sum of the farmers'. The cap is therefore never exceeded.
4. **Rake** (系统得分): ``rake`` × each winner's positive ``after_cap``, rounded half-up to
   0.01 per winner, goes to the house.
5. **Penalty** (会员掉线): the first seat that disconnected pays
   3 × unit × bid × (M without bomb factors) to the house, outside the cap
   (rounded toward zero to 0.01 in the degenerate case where it is not exact).
6. ``net[i] = after_cap[i] − rake[i] − penalty[i]``; ``house`` = all rake + all penalties;
   ``sum(net) + house == 0``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ..rules import SEATS, ReportChoice
from .errors import GameError
from .settings import amount, share

__all__ = [
    "Factors",
    "HandOutcome",
    "HandResult",
    "Settlement",
    "SettlementError",
    "multiplier",
    "settle",
    "SEATS",
    "REPORT_CHOICES",
    "WINNERS",
]

MIN_BID, MAX_BID = 1, 3
#: The sides that win a hand.
LANDLORD, FARMERS = "landlord", "farmers"
WINNERS = (LANDLORD, FARMERS)
#: Values of ``Factors.report`` when the landlord declared 报到 (None otherwise, a decline included).
REPORT_CHOICES = (ReportChoice.PLAY, ReportChoice.NO_PLAY)
MAX_REPORT_UNITS = 5

MARKED_JOKER_FACTOR = Fraction(2)  # 明王
FIRST_BID_THREE_FACTOR = Fraction(4, 3)  # 头撂
SHOW_HAND_FACTOR = Fraction(2)  # 摊打
REPORT_PLAY_FACTOR = Fraction(2)  # 报到 then 打
BOMB_FACTOR = 2  # each bomb / joker bomb played
PENALTY_STAKES = 3  # the disconnect penalty is 3 × unit × bid × M

_CENTS = 100
_AMOUNT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]{2}")
_MULTIPLIER_RE = re.compile(r"[1-9][0-9]*(?:/[1-9][0-9]*)?")
_SETTLEMENT_KEYS = ("gross", "after_cap", "rake", "penalty", "net")


class SettlementError(ValueError):
    """Invalid input to, or an inconsistent value of, a settlement."""

    code = "invalid_settlement"


# --------------------------------------------------------------------------
# Small exact helpers
# --------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _trunc_cents(x: Fraction) -> int:
    """``x`` in integer cents, rounded toward zero."""
    return math.trunc(x * _CENTS)


def _half_up_cents(x: Fraction) -> int:
    """``x`` in integer cents, rounded half-up (halves away from zero)."""
    scaled = abs(x * _CENTS)
    cents = math.floor(scaled + Fraction(1, 2))
    return cents if x >= 0 else -cents


def _cents_to_decimal(cents: int) -> Decimal:
    """Integer cents as a Decimal with exactly two places (never ``-0.00``); exact for any size."""
    digits = tuple(int(d) for d in str(abs(cents)).rjust(3, "0"))
    return Decimal((1 if cents < 0 else 0, digits, -2))


def _decimal_to_cents(value: Any, what: str) -> int:
    """A Decimal with exactly two places, as integer cents."""
    if not isinstance(value, Decimal) or not value.is_finite():
        raise SettlementError(f"{what} must be a finite Decimal, got {value!r}")
    sign, digits, exponent = value.as_tuple()
    if exponent != -2:
        raise SettlementError(f"{what} must have exactly two decimal places, got {value!r}")
    cents = int("".join(map(str, digits)) or "0")
    if sign and cents == 0:
        raise SettlementError(f"{what} must not be negative zero, got {value!r}")
    return -cents if sign else cents


def _format_amount(value: Decimal) -> str:
    return format(value, "f")


def _parse_amount(text: Any, what: str) -> Decimal:
    if not isinstance(text, str) or not _AMOUNT_RE.fullmatch(text):
        raise SettlementError(
            f'{what} must be a decimal string with exactly two places such as "-8.00", got {text!r}'
        )
    if text == "-0.00":
        raise SettlementError(f'{what} must not be "-0.00"')
    return Decimal(text)


def _seat_tuple(values: Iterable[Any], what: str) -> tuple[Any, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise SettlementError(f"{what} must be a sequence of {SEATS} amounts, got {values!r}")
    values = tuple(values)
    if len(values) != SEATS:
        raise SettlementError(f"{what} must have one amount per seat ({SEATS}), got {len(values)}")
    return values


# --------------------------------------------------------------------------
# Factors and the multiplier
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Factors:
    """Everything that multiplies the stake; docs/hand-record.md ``result.factors``.

    ``report`` is ``"play"`` (报到 then 打) or ``"no_play"`` (报到 then 不打), and None when
    no 报到 was declared — a declined one included: the factor is what multiplies, not the
    action. ``report_units`` is N (1…5) after ``"play"`` / ``"no_play"`` and 0 otherwise. ``bombs`` counts bombs and joker bombs
    played (always 0 after 不打: no cards are played).
    """

    marked_joker: bool = False
    first_bid_three: bool = False
    show_hand: bool = False
    report: str | None = None
    report_units: int = 0
    bombs: int = 0

    def __post_init__(self) -> None:
        for name in ("marked_joker", "first_bid_three", "show_hand"):
            if not isinstance(getattr(self, name), bool):
                raise SettlementError(f"factors.{name} must be a bool, got {getattr(self, name)!r}")
        if self.report is not None and self.report not in REPORT_CHOICES:
            raise SettlementError(
                f"factors.report must be null or one of {', '.join(REPORT_CHOICES)}, got {self.report!r}"
            )
        if not _is_int(self.report_units):
            raise SettlementError(
                f"factors.report_units must be an integer, got {self.report_units!r}"
            )
        if not _is_int(self.bombs) or self.bombs < 0:
            raise SettlementError(
                f"factors.bombs must be a non-negative integer, got {self.bombs!r}"
            )
        if self.show_hand and not self.first_bid_three:
            raise SettlementError(
                "factors.show_hand (摊打) is only possible after first_bid_three (头撂)"
            )
        if self.report in REPORT_CHOICES:
            if not 1 <= self.report_units <= MAX_REPORT_UNITS:
                raise SettlementError(
                    f"factors.report_units must be 1..{MAX_REPORT_UNITS} after 报到 ({self.report}), "
                    f"got {self.report_units}"
                )
        elif self.report_units != 0:
            raise SettlementError(
                f"factors.report_units must be 0 when there was no 报到 (report={self.report!r}), "
                f"got {self.report_units}"
            )
        if self.report == ReportChoice.NO_PLAY and self.bombs:
            raise SettlementError("factors.bombs must be 0 after 报到 不打: no cards are played")

    def to_json(self) -> dict[str, Any]:
        """Each field as it is (the API's schema of the factors is derived from their types)."""
        return {name: getattr(self, name) for name in _FACTOR_KEYS}

    @classmethod
    def from_json(cls, d: Any) -> Factors:
        if not isinstance(d, dict):
            raise SettlementError(f"factors must be an object, got {type(d).__name__}")
        missing = [k for k in _FACTOR_KEYS if k not in d]
        if missing:
            raise SettlementError(f"factors is missing {', '.join(missing)}")
        return cls(**{k: d[k] for k in _FACTOR_KEYS})


_FACTOR_KEYS = tuple(field.name for field in fields(Factors))


def multiplier(factors: Factors, bombs_double: bool = True, with_bombs: bool = True) -> Fraction:
    """The exact multiplier M; the bomb factor 2**bombs only when ``bombs_double`` and
    ``with_bombs`` (``with_bombs=False`` gives "M without bomb factors")."""
    if not isinstance(factors, Factors):
        raise SettlementError(f"factors must be a Factors, got {type(factors).__name__}")
    m = Fraction(1)
    if factors.marked_joker:
        m *= MARKED_JOKER_FACTOR
    if factors.first_bid_three:
        m *= FIRST_BID_THREE_FACTOR
    if factors.show_hand:
        m *= SHOW_HAND_FACTOR
    if factors.report == ReportChoice.PLAY:
        m *= REPORT_PLAY_FACTOR
    if bombs_double and with_bombs:
        m *= BOMB_FACTOR**factors.bombs
    return m


def _multiplier_text(m: Fraction) -> str:
    return str(m.numerator) if m.denominator == 1 else f"{m.numerator}/{m.denominator}"


def _parse_multiplier(text: Any) -> Fraction:
    if not isinstance(text, str) or not _MULTIPLIER_RE.fullmatch(text):
        raise SettlementError(
            f'multiplier must be an integer or a fraction such as "16/3", got {text!r}'
        )
    m = Fraction(text)
    if _multiplier_text(m) != text:
        raise SettlementError(
            f"multiplier must be in lowest terms, got {text!r} (write {_multiplier_text(m)!r})"
        )
    return m


# --------------------------------------------------------------------------
# HandOutcome and Settlement
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HandOutcome:
    """What settlement needs to know about a finished hand."""

    landlord: int
    bid: int
    winner: str
    factors: Factors
    first_disconnect: int | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.landlord) or not 0 <= self.landlord < SEATS:
            raise SettlementError(f"landlord must be a seat 0..{SEATS - 1}, got {self.landlord!r}")
        if not _is_int(self.bid) or not MIN_BID <= self.bid <= MAX_BID:
            raise SettlementError(f"bid must be {MIN_BID}..{MAX_BID}, got {self.bid!r}")
        if self.winner not in WINNERS:
            raise SettlementError(f'winner must be "landlord" or "farmers", got {self.winner!r}')
        if not isinstance(self.factors, Factors):
            raise SettlementError(f"factors must be a Factors, got {type(self.factors).__name__}")
        if self.first_disconnect is not None and (
            not _is_int(self.first_disconnect) or not 0 <= self.first_disconnect < SEATS
        ):
            raise SettlementError(
                f"first_disconnect must be None or a seat 0..{SEATS - 1}, got {self.first_disconnect!r}"
            )
        if self.factors.first_bid_three and self.bid != MAX_BID:
            raise SettlementError(
                f"first_bid_three (头撂) means a bid of {MAX_BID}, got bid {self.bid}"
            )
        if self.factors.report == ReportChoice.NO_PLAY and self.winner != LANDLORD:
            raise SettlementError(
                '报到 不打 (report no_play) is settled as a landlord win: winner must be "landlord"'
            )


@dataclass(frozen=True, slots=True)
class Settlement:
    """docs/hand-record.md ``result.settlement`` plus the multiplier M that produced it.

    Every amount is a Decimal with exactly two places; the per-seat amounts are tuples in
    seat order, one per seat (:data:`SEATS`). The invariants of docs/hand-record.md are
    checked on construction.
    """

    multiplier: Fraction
    gross: tuple[Decimal, ...]
    after_cap: tuple[Decimal, ...]
    rake: tuple[Decimal, ...]
    penalty: tuple[Decimal, ...]
    net: tuple[Decimal, ...]
    house: Decimal

    def __post_init__(self) -> None:
        if not isinstance(self.multiplier, Fraction) or self.multiplier <= 0:
            raise SettlementError(
                f"multiplier must be a positive Fraction, got {self.multiplier!r}"
            )
        cents: dict[str, list[int]] = {}
        for name in _SETTLEMENT_KEYS:
            values = _seat_tuple(getattr(self, name), name)
            object.__setattr__(self, name, values)
            cents[name] = [_decimal_to_cents(v, f"{name}[{i}]") for i, v in enumerate(values)]
        house = _decimal_to_cents(self.house, "house")
        for name in ("gross", "after_cap"):
            if sum(cents[name]) != 0:
                raise SettlementError(f"{name} must add up to 0.00")
        for name in ("rake", "penalty"):
            if any(c < 0 for c in cents[name]):
                raise SettlementError(f"{name} must not be negative")
        for i in range(SEATS):
            if cents["net"][i] != cents["after_cap"][i] - cents["rake"][i] - cents["penalty"][i]:
                raise SettlementError(
                    f"net[{i}] must equal after_cap[{i}] - rake[{i}] - penalty[{i}]"
                )
        if house != sum(cents["rake"]) + sum(cents["penalty"]):
            raise SettlementError("house must equal all rake plus all penalties")
        if sum(cents["net"]) + house != 0:  # implied by the checks above; kept as the contract
            raise SettlementError("the four net amounts plus house must add up to 0.00")

    def multiplier_text(self) -> str:
        """M as the hand record writes it: ``"4"`` or ``"16/3"``."""
        return _multiplier_text(self.multiplier)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            name: [_format_amount(v) for v in getattr(self, name)] for name in _SETTLEMENT_KEYS
        }
        out["house"] = _format_amount(self.house)
        return out

    @classmethod
    def from_json(cls, d: Any, multiplier: str) -> Settlement:
        if not isinstance(d, dict):
            raise SettlementError(f"settlement must be an object, got {type(d).__name__}")
        missing = [k for k in (*_SETTLEMENT_KEYS, "house") if k not in d]
        if missing:
            raise SettlementError(f"settlement is missing {', '.join(missing)}")
        fields: dict[str, Any] = {}
        for name in _SETTLEMENT_KEYS:
            values = d[name]
            if not isinstance(values, list):
                raise SettlementError(f"settlement.{name} must be a list of {SEATS} amounts")
            values = _seat_tuple(values, f"settlement.{name}")
            fields[name] = tuple(
                _parse_amount(v, f"settlement.{name}[{i}]") for i, v in enumerate(values)
            )
        return cls(
            multiplier=_parse_multiplier(multiplier),
            house=_parse_amount(d["house"], "settlement.house"),
            **fields,
        )


@dataclass(frozen=True, slots=True)
class HandResult:
    """The hand record's ``result`` block (docs/hand-record.md): how the hand ended and its
    settlement. Its JSON is what the ``hand_ended`` event stores, the record shows, the
    API answers and the ledger keeps."""

    outcome: HandOutcome
    settlement: Settlement

    def to_json(self) -> dict[str, Any]:
        outcome = self.outcome
        return {
            "landlord": outcome.landlord,
            "bid": outcome.bid,
            "winner": outcome.winner,
            "factors": outcome.factors.to_json(),
            "multiplier": self.settlement.multiplier_text(),
            "first_disconnect": outcome.first_disconnect,
            "settlement": self.settlement.to_json(),
        }

    @classmethod
    def from_json(cls, d: Any) -> HandResult:
        if not isinstance(d, dict):
            raise SettlementError(f"result must be an object, got {type(d).__name__}")
        missing = [
            k
            for k in (
                "landlord",
                "bid",
                "winner",
                "factors",
                "multiplier",
                "first_disconnect",
                "settlement",
            )
            if k not in d
        ]
        if missing:
            raise SettlementError(f"result is missing {', '.join(missing)}")
        factors = Factors.from_json(d["factors"])
        outcome = HandOutcome(d["landlord"], d["bid"], d["winner"], factors, d["first_disconnect"])
        return cls(outcome, Settlement.from_json(d["settlement"], d["multiplier"]))


# --------------------------------------------------------------------------
# Settling a hand
# --------------------------------------------------------------------------


def _with_landlord(landlord: int, farmer_cents: list[int]) -> list[int]:
    """Seat-order cents: the three farmers' amounts (in seat order), and the landlord's
    as their exact negative sum."""
    out, farmers = [], iter(farmer_cents)
    for seat in range(SEATS):
        out.append(0 if seat == landlord else next(farmers))
    out[landlord] = -sum(farmer_cents)
    return out


def settle(
    outcome: HandOutcome,
    *,
    unit: Decimal = Decimal("1"),
    cap: Decimal | None = None,
    rake: Decimal = Decimal("0"),
    bombs_double: bool = True,
) -> Settlement:
    """Settle one hand (docs/rules.md §5). ``rake`` is the system-cut share (``Decimal("0.05")``
    for 5 %), ``cap`` the per-hand cap (None: no cap). Raises :class:`SettlementError`
    (a ``ValueError``) on invalid input."""
    if not isinstance(outcome, HandOutcome):
        raise SettlementError(f"outcome must be an HandOutcome, got {type(outcome).__name__}")
    try:
        unit_x = Fraction(amount(unit, "unit"))
        cap_x = None if cap is None else Fraction(amount(cap, "cap"))
        rake_x = Fraction(share(rake, "rake"))
    except GameError as exc:
        raise SettlementError(str(exc)) from None
    if not isinstance(bombs_double, bool):
        raise SettlementError(f"bombs_double must be a bool, got {bombs_double!r}")

    factors = outcome.factors
    landlord = outcome.landlord
    farmer_seats = [s for s in range(SEATS) if s != landlord]
    m_full = multiplier(factors, bombs_double)
    m_plain = multiplier(factors, bombs_double, with_bombs=False)
    base = unit_x * outcome.bid  # unit × bid, exact

    # 1. Gross, in cents. Farmers' amounts round toward zero when not exact to the cent.
    if factors.report == ReportChoice.NO_PLAY:
        applied_m = m_plain  # 报到 不打: no bomb factor (and no cards were played)
        farmer = -_trunc_cents(base * applied_m * factors.report_units)
    else:
        applied_m = m_full
        if outcome.winner == LANDLORD:
            farmer = -_trunc_cents(base * applied_m)
        elif factors.report == ReportChoice.PLAY:
            farmer = 0  # 报到 then 打, and the landlord lost: the landlord pays nothing
        else:
            farmer = _trunc_cents(base * applied_m)
    gross = _with_landlord(landlord, [farmer] * len(farmer_seats))

    # 2. Cap: scale every transfer in proportion, farmers toward zero, landlord = −sum.
    winners_gain = sum(c for c in gross if c > 0)  # == the losers' total loss (zero-sum)
    if cap_x is not None and Fraction(winners_gain, _CENTS) > cap_x:
        ratio = cap_x / Fraction(winners_gain, _CENTS)
        after_cap = _with_landlord(
            landlord, [_trunc_cents(Fraction(gross[s], _CENTS) * ratio) for s in farmer_seats]
        )
    else:
        after_cap = list(gross)

    # 3. System cut on each winner's gain, half-up per winner.
    rake_c = [_half_up_cents(Fraction(c, _CENTS) * rake_x) if c > 0 else 0 for c in after_cap]

    # 4. Disconnect penalty: first disconnected seat only, no bomb factors, outside the cap.
    penalty_c = [0] * SEATS
    if outcome.first_disconnect is not None:
        penalty_c[outcome.first_disconnect] = _trunc_cents(PENALTY_STAKES * base * m_plain)

    net = [after_cap[i] - rake_c[i] - penalty_c[i] for i in range(SEATS)]
    house = sum(rake_c) + sum(penalty_c)

    def dec(values: list[int]) -> tuple[Decimal, ...]:
        return tuple(_cents_to_decimal(c) for c in values)

    return Settlement(
        multiplier=applied_m,
        gross=dec(gross),
        after_cap=dec(after_cap),
        rake=dec(rake_c),
        penalty=dec(penalty_c),
        net=dec(net),
        house=_cents_to_decimal(house),
    )
