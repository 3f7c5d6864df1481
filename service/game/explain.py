"""A settlement explained, as an operator reads it (docs/rules.md §5): the stake's formula
with its numbers, the multiplier as its named factors, what the cap took, the system cut
and the penalty with whose seat it is, each step named in Chinese and English with the
section of the rules it follows. Pure: the console shows it, the CSV takes its figures.

>>> from decimal import Decimal
>>> from service.game.settlement import Factors, HandOutcome, HandResult, settle
>>> from service.game.settings import MatchSettings
>>> table = MatchSettings.build("shanghai-platform", unit="0.50", cap="24.91", rake="0.05")
>>> factors = Factors(marked_joker=True, first_bid_three=True, show_hand=True, bombs=1)
>>> hand = HandOutcome(landlord=1, bid=3, winner="landlord", factors=factors, first_disconnect=2)
>>> result = HandResult(hand, settle(hand, unit=table.unit, cap=table.cap, rake=table.rake))
>>> for step in explain(result, table)["steps"]:
...     print(f"{step['zh']} / {step['en']}: {step['formula']}")
倍数 / multiplier: 明王 2 × 头撂 4/3 × 摊打 2 × 炸弹 2¹ = 32/3
底分 × 叫分 × 倍数 / stake: 0.50 × 3 × 32/3 = 16.00 (each farmer's stake: 地主 wins)
封顶 / cap: the winners' 48.00 over the cap 24.91: scaled by 24.91/48.00, the cap took 23.10
系统得分 / system cut: 0.05 × 24.90 (seat 1) = 1.25
掉线 / disconnect penalty: seat 2: 3 × 0.50 × 3 × 16/3 = 24.00
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ..rules import ReportChoice
from .settings import MatchSettings
from .settlement import (
    BOMB_FACTOR,
    FIRST_BID_THREE_FACTOR,
    LANDLORD,
    MARKED_JOKER_FACTOR,
    PENALTY_STAKES,
    REPORT_PLAY_FACTOR,
    SHOW_HAND_FACTOR,
    HandResult,
    multiplier,
)

#: What an operator reads, named as the players name it and in English (docs/rules.md).
NAMES: dict[str, tuple[str, str]] = {
    "landlord": ("地主", "landlord"),
    "farmers": ("农民", "farmers"),
    "unit": ("底分", "base stake"),
    "bid": ("叫分", "bid"),
    "multiplier": ("倍数", "multiplier"),
    "stake": ("底分 × 叫分 × 倍数", "stake"),
    "report_no_play": ("报到 不打", "report, then no play"),
    "cap": ("封顶", "cap"),
    "rake": ("系统得分", "system cut"),
    "penalty": ("掉线", "disconnect penalty"),
    "takeover": ("系统代打", "played by the system"),
    "marked_joker": ("明王", "marked joker"),
    "first_bid_three": ("头撂", "first bid of three"),
    "show_hand": ("摊打", "show hand"),
    "report_play": ("报到 打", "report, then play"),
    "bombs": ("炸弹", "bombs"),
}
#: Each combination as the players name it, and in English (docs/rules.md §2).
PLAY_NAMES: dict[str, tuple[str, str]] = {
    "single": ("单张", "single"),
    "pair": ("对子", "pair"),
    "triple": ("三张", "triple"),
    "straight": ("单顺", "straight"),
    "pair_chain": ("双顺", "pair chain"),
    "plane": ("飞机", "plane"),
    "full_house": ("三带二", "full house"),
    "plane_with_pairs": ("飞机带翅膀", "plane with pairs"),
    "bomb": ("炸弹", "bomb"),
    "joker_bomb": ("天王炸弹", "joker bomb"),
}
#: The section of docs/rules.md each step follows, by its heading's anchor.
RULES = {
    "multiplier": "51-the-multiplier-m",
    "stake": "52-stakes-gross",
    "report_no_play": "53-报到-then-不打",
    "cap": "54-the-cap-单局封顶",
    "rake": "55-the-system-cut-系统得分",
    "penalty": "56-the-disconnect-penalty-会员掉线",
}
#: The rule a ledger entry of each kind follows.
RULE_OF_KIND = {"stake": RULES["stake"], "rake": RULES["rake"], "penalty": RULES["penalty"]}
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_CENT = Decimal("0.01")


def fraction_text(value: Fraction) -> str:
    """``32/3``, ``2``: a multiplier as the hand record writes it."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def multiplier_decimal(value: Fraction) -> str:
    """The multiplier as a decimal of six places (``10.666667``), for a spreadsheet."""
    return str(
        (Decimal(value.numerator) / Decimal(value.denominator)).quantize(Decimal("0.000001"))
    )


def factors_named(result: HandResult, bombs_double: bool) -> list[tuple[str, str]]:
    """The multiplier's factors that apply: (key of :data:`NAMES`, the factor as text)."""
    factors = result.outcome.factors
    named = [
        (key, fraction_text(value))
        for key, applies, value in (
            ("marked_joker", factors.marked_joker, MARKED_JOKER_FACTOR),
            ("first_bid_three", factors.first_bid_three, FIRST_BID_THREE_FACTOR),
            ("show_hand", factors.show_hand, SHOW_HAND_FACTOR),
            ("report_play", factors.report == ReportChoice.PLAY, REPORT_PLAY_FACTOR),
        )
        if applies
    ]
    if bombs_double and factors.bombs:
        named.append(("bombs", f"{BOMB_FACTOR}{str(factors.bombs).translate(_SUPERSCRIPT)}"))
    return named


def _cents(value: Fraction) -> Decimal:
    """An exact amount toward zero to the cent, as the rules round a stake."""
    cents = int(value * 100)  # int() truncates toward zero
    return (Decimal(cents) / 100).quantize(_CENT)


def untranslated(message: str, **values: Any) -> str:
    """A formula's message in English, as gettext gives it where no catalogue has it."""
    return message % values if values else message


def explain(
    result: HandResult, table: MatchSettings, gettext: Callable[..., str] = untranslated
) -> dict[str, Any]:
    """The steps of the hand's settlement, each ``{"key", "zh", "en", "formula", "rule"}``,
    and ``capped`` (the cap took something), ``cap_took`` (what), ``penalty_seat``.
    ``gettext`` translates the formulas' words (the console's Flask-Babel: its messages
    catalogue has these); the API's settlement has them in English."""
    outcome, settlement = result.outcome, result.settlement
    bombs_double = table.ruleset.bombs_double
    unit, bid = table.unit, outcome.bid
    m = settlement.multiplier
    steps: list[dict[str, Any]] = []

    def step(key: str, formula: str) -> None:
        zh, en = NAMES[key]
        steps.append({"key": key, "zh": zh, "en": en, "formula": formula, "rule": RULES.get(key)})

    named = factors_named(result, bombs_double)
    product = " × ".join(f"{NAMES[key][0]} {text}" for key, text in named) or "1"
    step("multiplier", f"{product} = {fraction_text(m)}")
    if outcome.factors.report == ReportChoice.NO_PLAY:
        plain = multiplier(outcome.factors, bombs_double, with_bombs=False)
        units = outcome.factors.report_units
        each = _cents(Fraction(unit) * bid * plain * units)
        step(
            "report_no_play",
            gettext(
                "%(unit)s × %(bid)s × %(m)s × %(units)s = %(each)s (each farmer pays 地主)",
                unit=unit,
                bid=bid,
                m=fraction_text(plain),
                units=units,
                each=each,
            ),
        )
    else:
        each = _cents(Fraction(unit) * bid * m)
        values = {"unit": unit, "bid": bid, "m": fraction_text(m), "each": each}
        if outcome.winner == LANDLORD:
            formula = gettext(
                "%(unit)s × %(bid)s × %(m)s = %(each)s (each farmer's stake: 地主 wins)", **values
            )
        else:
            formula = gettext(
                "%(unit)s × %(bid)s × %(m)s = %(each)s (each farmer's stake: 农民 win)", **values
            )
            if outcome.factors.report == ReportChoice.PLAY:
                formula += gettext(" (报到 打 lost: 地主 pays nothing)")
        step("stake", formula)
    gained = sum((a for a in settlement.gross if a > 0), Decimal(0))
    kept = sum((a for a in settlement.after_cap if a > 0), Decimal(0))
    took = gained - kept
    if table.cap is not None:
        if took:
            step(
                "cap",
                gettext(
                    "the winners' %(gained)s over the cap %(cap)s: scaled by %(cap)s/%(gained)s,"
                    " the cap took %(took)s",
                    gained=gained,
                    cap=table.cap,
                    took=took,
                ),
            )
        else:
            step(
                "cap",
                gettext(
                    "the winners' %(gained)s within the cap %(cap)s: nothing taken",
                    gained=gained,
                    cap=table.cap,
                ),
            )
    cuts = [(seat, a) for seat, a in enumerate(settlement.rake) if a]
    if cuts:
        for seat, cut in cuts:
            step(
                "rake",
                gettext(
                    "%(rate)s × %(gain)s (seat %(seat)s) = %(cut)s",
                    rate=table.rake,
                    gain=settlement.after_cap[seat],
                    seat=seat,
                    cut=cut,
                ),
            )
    elif table.rake:
        step("rake", gettext("%(rate)s of each winner's gain: nothing to cut", rate=table.rake))
    first = outcome.first_disconnect
    if first is not None:
        plain = multiplier(outcome.factors, bombs_double, with_bombs=False)
        step(
            "penalty",
            gettext(
                "seat %(seat)s: %(stakes)s × %(unit)s × %(bid)s × %(m)s = %(penalty)s",
                seat=first,
                stakes=PENALTY_STAKES,
                unit=unit,
                bid=bid,
                m=fraction_text(plain),
                penalty=settlement.penalty[first],
            ),
        )
    return {"steps": steps, "capped": bool(took), "cap_took": took, "penalty_seat": first}
