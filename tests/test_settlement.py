"""Settlement of one hand (docs/rules.md §5) and the ``result`` block of the hand record
(docs/hand-record.md): factors, multiplier, settlement and its rounding rules."""

import json
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.game import GameError, MatchSettings
from service.game.settlement import (
    Factors,
    HandOutcome,
    Settlement,
    SettlementError,
    multiplier,
    settle,
)

D = Decimal


def amounts(*values):
    return tuple(D(v) for v in values)


def as_cents(values):
    return [int(v * 100) for v in values]


# --------------------------------------------------------------------------
# The hand-record example and the plain results
# --------------------------------------------------------------------------


def test_hand_record_example():
    # given: landlord seat 1, bid 2, two bombs, 5 % system cut, seat 3 disconnected first
    outcome = HandOutcome(
        landlord=1, bid=2, winner="landlord", factors=Factors(bombs=2), first_disconnect=3
    )
    # when
    s = settle(outcome, unit=D("1.00"), cap=None, rake=D("0.05"), bombs_double=True)
    # then: exactly the `result` block of docs/hand-record.md
    assert s.multiplier_text() == "4"
    assert outcome.factors.to_json() == {
        "marked_joker": False,
        "first_bid_three": False,
        "show_hand": False,
        "report": None,
        "report_units": 0,
        "bombs": 2,
    }
    assert s.to_json() == {
        "gross": ["-8.00", "24.00", "-8.00", "-8.00"],
        "after_cap": ["-8.00", "24.00", "-8.00", "-8.00"],
        "rake": ["0.00", "1.20", "0.00", "0.00"],
        "penalty": ["0.00", "0.00", "0.00", "6.00"],
        "net": ["-8.00", "22.80", "-8.00", "-14.00"],
        "house": "7.20",
    }
    assert s.net == amounts("-8", "22.80", "-8", "-14")
    assert s.house == D("7.20")


def test_farmers_win():
    # given: landlord seat 0 bid 3, marked joker (×2) and one bomb (×2): M = 4, S = 12
    outcome = HandOutcome(
        landlord=0, bid=3, winner="farmers", factors=Factors(marked_joker=True, bombs=1)
    )
    # when
    s = settle(outcome, rake=D("0.05"))
    # then: the landlord pays S to each farmer; each farmer gives 5 % of 12 to the house
    assert s.multiplier == 4
    assert s.gross == amounts("-36.00", "12.00", "12.00", "12.00")
    assert s.after_cap == s.gross
    assert s.rake == amounts("0.00", "0.60", "0.60", "0.60")
    assert s.penalty == amounts("0.00", "0.00", "0.00", "0.00")
    assert s.net == amounts("-36.00", "11.40", "11.40", "11.40")
    assert s.house == D("1.80")


def test_unit_scales_every_stake():
    # given: the same hand at a table with 底分 2.50
    outcome = HandOutcome(landlord=3, bid=1, winner="landlord", factors=Factors())
    # when
    s = settle(outcome, unit=D("2.50"))
    # then
    assert s.gross == amounts("-2.50", "-2.50", "-2.50", "7.50")
    assert s.net == s.gross and s.house == D("0.00")


# --------------------------------------------------------------------------
# 报到
# --------------------------------------------------------------------------


def test_report_play_lost_by_the_landlord_pays_nothing_but_the_penalty_stands():
    # given: 报到 then 打 (×2), three bombs, and the farmers win; the landlord disconnected first
    factors = Factors(report="play", report_units=1, bombs=3)
    outcome = HandOutcome(landlord=2, bid=2, winner="farmers", factors=factors, first_disconnect=2)
    # when
    s = settle(outcome, rake=D("0.05"))
    # then: nobody gains or loses, no rake; the penalty is 3 × 1 × 2 × 2 (打 counts, bombs don't)
    assert s.multiplier_text() == "16"
    assert s.gross == s.after_cap == s.rake == amounts("0.00", "0.00", "0.00", "0.00")
    assert s.penalty == amounts("0.00", "0.00", "12.00", "0.00")
    assert s.net == amounts("0.00", "0.00", "-12.00", "0.00")
    assert s.house == D("12.00")


def test_report_play_won_by_the_landlord_doubles():
    # given: 报到 then 打 (×2) with one bomb (×2), bid 1, the landlord wins
    outcome = HandOutcome(
        landlord=0,
        bid=1,
        winner="landlord",
        factors=Factors(report="play", report_units=2, bombs=1),
    )
    # when
    s = settle(outcome)
    # then: S = 4 (N does not matter when the hand is played)
    assert s.gross == amounts("12.00", "-4.00", "-4.00", "-4.00")


def test_report_no_play_with_two_units():
    # given: 报到 then 不打 with N = 2, bid 1, no other factor
    outcome = HandOutcome(
        landlord=0, bid=1, winner="landlord", factors=Factors(report="no_play", report_units=2)
    )
    # when
    s = settle(outcome, rake=D("0.05"))
    # then: each farmer loses 1 × 1 × 1 × 2, the landlord wins 3 × that
    assert s.multiplier_text() == "1"
    assert s.gross == amounts("6.00", "-2.00", "-2.00", "-2.00")
    assert s.rake == amounts("0.30", "0.00", "0.00", "0.00")
    assert s.net == amounts("5.70", "-2.00", "-2.00", "-2.00")
    assert s.house == D("0.30")


def test_report_no_play_with_marked_joker_first_bid_three_and_show_hand():
    # given: 明王 ×2, 头撂 ×4/3 (bid 3), 摊打 ×2 → M = 16/3; 报到 不打 with N = 2; seat 1 disconnected
    factors = Factors(
        marked_joker=True, first_bid_three=True, show_hand=True, report="no_play", report_units=2
    )
    outcome = HandOutcome(landlord=3, bid=3, winner="landlord", factors=factors, first_disconnect=1)
    # when
    s = settle(outcome)
    # then: each farmer loses 3 × 16/3 × 2 = 32, the landlord wins 96; the penalty is 3 × 3 × 16/3 = 48
    assert s.multiplier_text() == "16/3"
    assert s.gross == amounts("-32.00", "-32.00", "-32.00", "96.00")
    assert s.penalty == amounts("0.00", "48.00", "0.00", "0.00")
    assert s.net == amounts("-32.00", "-80.00", "-32.00", "96.00")
    assert s.house == D("48.00")


def test_report_no_play_ignores_report_play_factor_and_bombs_double_option():
    # given: the same 不打 hand with and without bomb doubling
    outcome = HandOutcome(
        landlord=1, bid=2, winner="landlord", factors=Factors(report="no_play", report_units=3)
    )
    # when
    with_bombs, without = settle(outcome), settle(outcome, bombs_double=False)
    # then: each farmer loses 1 × 2 × 1 × 3 = 6 either way
    assert with_bombs == without
    assert with_bombs.gross == amounts("-6.00", "18.00", "-6.00", "-6.00")


# --------------------------------------------------------------------------
# Multiplier
# --------------------------------------------------------------------------


def test_first_bid_three_gives_exact_stakes():
    # given: 头撂 (×4/3) always comes with bid 3, so unit × 3 × 4/3 = 4 × unit
    outcome = HandOutcome(
        landlord=2, bid=3, winner="landlord", factors=Factors(first_bid_three=True)
    )
    # when / then
    assert settle(outcome).gross == amounts("-4.00", "-4.00", "12.00", "-4.00")
    assert settle(outcome, unit=D("0.35")).gross == amounts("-1.40", "-1.40", "4.20", "-1.40")
    assert settle(outcome, unit=D("0.01")).gross == amounts("-0.04", "-0.04", "0.12", "-0.04")
    assert settle(outcome).multiplier_text() == "4/3"


def test_multiplier_text_sixteen_thirds():
    # given: 头撂 ×4/3, 明王 ×2, 摊打 ×2, farmers win
    factors = Factors(marked_joker=True, first_bid_three=True, show_hand=True)
    outcome = HandOutcome(landlord=0, bid=3, winner="farmers", factors=factors)
    # when
    s = settle(outcome)
    # then: M = 16/3 and S = 3 × 16/3 = 16
    assert multiplier(factors) == Fraction(16, 3)
    assert s.multiplier == Fraction(16, 3) and s.multiplier_text() == "16/3"
    assert s.gross == amounts("-48.00", "16.00", "16.00", "16.00")


def test_multiplier_factors():
    # given / then: each factor on its own, and bombs only when doubling is on
    assert multiplier(Factors()) == 1
    assert multiplier(Factors(marked_joker=True)) == 2
    assert multiplier(Factors(first_bid_three=True)) == Fraction(4, 3)
    assert multiplier(Factors(first_bid_three=True, show_hand=True)) == Fraction(8, 3)
    assert multiplier(Factors(report="play", report_units=1)) == 2
    assert multiplier(Factors(report="no_play", report_units=5)) == 1
    assert multiplier(Factors(bombs=3)) == 8
    assert multiplier(Factors(bombs=3), bombs_double=False) == 1
    assert multiplier(Factors(marked_joker=True, bombs=3), with_bombs=False) == 2


def test_bombs_double_off():
    # given: three bombs, bid 2, at a table where bombs do not double
    outcome = HandOutcome(landlord=1, bid=2, winner="landlord", factors=Factors(bombs=3))
    # when
    s = settle(outcome, bombs_double=False)
    # then: S = 2, not 16
    assert s.multiplier == 1
    assert s.gross == amounts("-2.00", "6.00", "-2.00", "-2.00")
    assert settle(outcome).gross == amounts("-16.00", "48.00", "-16.00", "-16.00")


# --------------------------------------------------------------------------
# Cap
# --------------------------------------------------------------------------


def test_cap_scales_and_rounds_toward_zero_when_the_landlord_wins():
    # given: S = 7, so the landlord would win 21, over a cap of 10
    outcome = HandOutcome(landlord=0, bid=1, winner="landlord", factors=Factors())
    # when
    s = settle(outcome, unit=D("7"), cap=D("10"))
    # then: each farmer pays 7 × 10/21 = 3.333… → 3.33; the landlord gets their exact sum
    assert s.gross == amounts("21.00", "-7.00", "-7.00", "-7.00")
    assert s.after_cap == amounts("9.99", "-3.33", "-3.33", "-3.33")
    assert s.net == s.after_cap
    assert sum(a for a in s.after_cap if a > 0) <= D("10")
    assert -sum(a for a in s.after_cap if a < 0) <= D("10")


def test_cap_scales_and_rounds_toward_zero_when_the_farmers_win():
    # given: S = 7, farmers win, cap 10, system cut 5 %
    outcome = HandOutcome(landlord=2, bid=1, winner="farmers", factors=Factors())
    # when
    s = settle(outcome, unit=D("7"), cap=D("10"), rake=D("0.05"))
    # then: each farmer gets 3.33 (toward zero, not 3.34); cut 3.33 × 0.05 = 0.1665 → 0.17
    assert s.after_cap == amounts("3.33", "3.33", "-9.99", "3.33")
    assert s.rake == amounts("0.17", "0.17", "0.00", "0.17")
    assert s.net == amounts("3.16", "3.16", "-9.99", "3.16")
    assert s.house == D("0.51")


def test_cap_not_reached_changes_nothing():
    # given: the winners' total is exactly the cap
    outcome = HandOutcome(landlord=0, bid=2, winner="landlord", factors=Factors())
    # when
    s = settle(outcome, cap=D("6"))
    # then
    assert s.after_cap == s.gross == amounts("6.00", "-2.00", "-2.00", "-2.00")


def test_cap_zero_cancels_every_transfer_but_not_the_penalty():
    # given: a cap of 0 and a disconnected farmer
    outcome = HandOutcome(
        landlord=0, bid=2, winner="landlord", factors=Factors(bombs=1), first_disconnect=1
    )
    # when
    s = settle(outcome, cap=D("0"))
    # then: the penalty is outside the cap
    assert s.after_cap == amounts("0.00", "0.00", "0.00", "0.00")
    assert s.penalty == amounts("0.00", "6.00", "0.00", "0.00")
    assert s.house == D("6.00")


def test_cap_with_report_no_play():
    # given: 报到 不打 N = 5, bid 3, would move 45; cap 20
    outcome = HandOutcome(
        landlord=1, bid=3, winner="landlord", factors=Factors(report="no_play", report_units=5)
    )
    # when
    s = settle(outcome, cap=D("20"))
    # then: 15 × 20/45 = 6.666… → 6.66 per farmer
    assert s.gross == amounts("-15.00", "45.00", "-15.00", "-15.00")
    assert s.after_cap == amounts("-6.66", "19.98", "-6.66", "-6.66")


# --------------------------------------------------------------------------
# System cut (rake)
# --------------------------------------------------------------------------


def test_rake_rounds_half_up_per_winner_when_the_landlord_wins():
    # given: the landlord wins 0.90 (unit 0.10, bid 3), cut 5 %: 0.045
    outcome = HandOutcome(landlord=0, bid=3, winner="landlord", factors=Factors())
    # when
    s = settle(outcome, unit=D("0.10"), rake=D("0.05"))
    # then: half-up gives 0.05, where banker's rounding would give 0.04
    assert D("0.045").quantize(D("0.01"), rounding=ROUND_HALF_EVEN) == D("0.04")
    assert s.gross == amounts("0.90", "-0.30", "-0.30", "-0.30")
    assert s.rake == amounts("0.05", "0.00", "0.00", "0.00")
    assert s.net == amounts("0.85", "-0.30", "-0.30", "-0.30")
    assert s.house == D("0.05")


def test_rake_rounds_half_up_per_winner_when_the_farmers_win():
    # given: each farmer wins 0.50, cut 5 %: 0.025 each
    outcome = HandOutcome(landlord=3, bid=1, winner="farmers", factors=Factors())
    # when
    s = settle(outcome, unit=D("0.50"), rake=D("0.05"))
    # then: rounded per winner (0.03 each, 0.09 in all), not on the total (0.075 → 0.08)
    assert s.rake == amounts("0.03", "0.03", "0.03", "0.00")
    assert s.net == amounts("0.47", "0.47", "0.47", "-1.50")
    assert s.house == D("0.09")


def test_rake_of_one_gives_the_whole_gain_to_the_house():
    outcome = HandOutcome(landlord=0, bid=1, winner="landlord", factors=Factors())
    s = settle(outcome, rake=D("1"))
    assert s.rake == amounts("3.00", "0.00", "0.00", "0.00")
    assert s.net == amounts("0.00", "-1.00", "-1.00", "-1.00")


# --------------------------------------------------------------------------
# Disconnect penalty
# --------------------------------------------------------------------------


def test_penalty_on_the_first_of_two_disconnects_only():
    # given: seats 2 then 0 disconnected; the outcome carries only the first (seat 2)
    outcome = HandOutcome(
        landlord=1, bid=2, winner="farmers", factors=Factors(), first_disconnect=2
    )
    # when
    s = settle(outcome)
    # then: seat 2 pays 3 × 1 × 2 × 1 = 6 and nobody else pays
    assert s.penalty == amounts("0.00", "0.00", "6.00", "0.00")
    assert s.net == amounts("2.00", "-6.00", "-4.00", "2.00")
    assert s.house == D("6.00")


def test_no_disconnect_no_penalty():
    s = settle(HandOutcome(landlord=1, bid=2, winner="farmers", factors=Factors(bombs=2)))
    assert s.penalty == amounts("0.00", "0.00", "0.00", "0.00")
    assert s.house == D("0.00")


def test_penalty_ignores_bombs_but_not_the_other_factors():
    # given: five bombs, 明王, bid 1, the disconnected farmer wins
    factors = Factors(marked_joker=True, bombs=5)
    outcome = HandOutcome(landlord=0, bid=1, winner="farmers", factors=factors, first_disconnect=3)
    # when
    s, s_off = settle(outcome), settle(outcome, bombs_double=False)
    # then: the stake counts the bombs (2 × 32 = 64), the penalty does not (3 × 2 = 6)
    assert s.gross == amounts("-192.00", "64.00", "64.00", "64.00")
    assert s.penalty == s_off.penalty == amounts("0.00", "0.00", "0.00", "6.00")
    assert s.net[3] == D("58.00")


def test_penalty_is_outside_the_cap():
    outcome = HandOutcome(
        landlord=0, bid=3, winner="landlord", factors=Factors(bombs=4), first_disconnect=0
    )
    s = settle(outcome, cap=D("5"))
    assert s.after_cap == amounts("4.98", "-1.66", "-1.66", "-1.66")
    assert s.penalty == amounts("9.00", "0.00", "0.00", "0.00")
    assert s.net[0] == D("-4.02")


def test_inexact_uncapped_stake_rounds_toward_zero_and_stays_zero_sum():
    # given: a unit of 0.015 (not a whole cent): S = 0.015
    outcome = HandOutcome(
        landlord=0, bid=1, winner="landlord", factors=Factors(), first_disconnect=1
    )
    # when
    s = settle(outcome, unit=D("0.015"))
    # then: farmers pay 0.01 each, the landlord gets their sum; the penalty 0.045 → 0.04
    assert s.gross == amounts("0.03", "-0.01", "-0.01", "-0.01")
    assert s.penalty == amounts("0.00", "0.04", "0.00", "0.00")
    assert sum(s.net) + s.house == 0


# --------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------


def test_json_round_trip_of_factors_and_settlement():
    # given
    factors = Factors(
        marked_joker=True,
        first_bid_three=True,
        show_hand=True,
        report="play",
        report_units=2,
        bombs=1,
    )
    outcome = HandOutcome(landlord=1, bid=3, winner="landlord", factors=factors, first_disconnect=0)
    s = settle(outcome, unit=D("0.50"), cap=D("50"), rake=D("0.03"))
    # when: through real JSON text
    f_json = json.loads(json.dumps(factors.to_json()))
    s_json = json.loads(json.dumps(s.to_json()))
    # then
    assert Factors.from_json(f_json) == factors
    assert Settlement.from_json(s_json, s.multiplier_text()) == s
    assert s.multiplier_text() == "64/3"
    assert set(s_json) == {"gross", "after_cap", "rake", "penalty", "net", "house"}


def test_amounts_never_print_negative_zero():
    outcome = HandOutcome(
        landlord=0, bid=1, winner="farmers", factors=Factors(report="play", report_units=1)
    )
    text = json.dumps(settle(outcome).to_json())
    assert "-0.00" not in text
    assert settle(outcome).to_json()["gross"] == ["0.00", "0.00", "0.00", "0.00"]


@pytest.mark.parametrize(
    "patch, multiplier_text",
    [
        ({"house": "7.2"}, "4"),
        ({"house": "-0.00"}, "4"),
        ({"net": ["-8.00", "22.80", "-8.00"]}, "4"),
        ({"net": ["-8.00", "22.80", "-8.00", "-14.01"]}, "4"),  # net ≠ after_cap − rake − penalty
        ({"house": "7.21"}, "4"),
        ({"gross": ["-8.00", "24.00", "-8.00", "-7.00"]}, "4"),  # not zero-sum
        ({"rake": [-1, "1.20", "0.00", "0.00"]}, "4"),
        ({}, "8/2"),
        ({}, "1.5"),
        ({}, "0"),
        ({}, 4),
    ],
)
def test_settlement_from_json_rejects_bad_records(patch, multiplier_text):
    # given: the hand-record example, spoiled
    good = settle(
        HandOutcome(
            landlord=1, bid=2, winner="landlord", factors=Factors(bombs=2), first_disconnect=3
        ),
        rake=D("0.05"),
    ).to_json()
    assert Settlement.from_json(good, "4").to_json() == good
    # when / then
    with pytest.raises(ValueError):
        Settlement.from_json({**good, **patch}, multiplier_text)


@pytest.mark.parametrize(
    "d",
    [
        None,
        {
            "marked_joker": False,
            "first_bid_three": False,
            "show_hand": False,
            "report": None,
            "bombs": 0,
        },
        {
            "marked_joker": 0,
            "first_bid_three": False,
            "show_hand": False,
            "report": None,
            "report_units": 0,
            "bombs": 0,
        },
        {
            "marked_joker": False,
            "first_bid_three": False,
            "show_hand": False,
            "report": "yes",
            "report_units": 0,
            "bombs": 0,
        },
        {
            "marked_joker": False,
            "first_bid_three": False,
            "show_hand": False,
            "report": None,
            "report_units": 0,
            "bombs": -1,
        },
        {
            "marked_joker": False,
            "first_bid_three": False,
            "show_hand": False,
            "report": None,
            "report_units": 0,
            "bombs": 1.0,
        },
    ],
)
def test_factors_from_json_rejects_bad_records(d):
    with pytest.raises(ValueError):
        Factors.from_json(d)


# --------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"report": "maybe"},
        {"report": "play", "report_units": 0},
        {"report": "no_play", "report_units": 6},
        {"report": "decline"},  # a declined 报到 is no factor: report is null
        {"report_units": 1},
        {"bombs": -1},
        {"bombs": True},
        {"marked_joker": 1},
        {"show_hand": True},  # 摊打 only after 头撂
        {"report": "no_play", "report_units": 1, "bombs": 1},  # no cards are played after 不打
    ],
)
def test_bad_factors_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        Factors(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"landlord": 4},
        {"landlord": -1},
        {"landlord": True},
        {"bid": 0},
        {"bid": 4},
        {"bid": 2.0},
        {"winner": "draw"},
        {"winner": "Landlord"},
        {"first_disconnect": 4},
        {"first_disconnect": -1},
        {"factors": {"bombs": 0}},
        {"bid": 2, "factors": Factors(first_bid_three=True)},  # 头撂 is a bid of 3
        {"winner": "farmers", "factors": Factors(report="no_play", report_units=1)},
    ],
)
def test_bad_outcomes_raise_value_error(kwargs):
    base = {
        "landlord": 0,
        "bid": 3,
        "winner": "landlord",
        "factors": Factors(),
        "first_disconnect": None,
    }
    with pytest.raises(ValueError):
        HandOutcome(**{**base, **kwargs})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"unit": D("-1")},
        {"unit": D("NaN")},
        {"unit": D("Infinity")},
        {"unit": 1.5},
        {"unit": "abc"},
        {"cap": D("-0.01")},
        {"cap": D("sNaN")},
        {"rake": D("-0.05")},
        {"rake": D("1.01")},
        {"rake": 0.05},
        {"bombs_double": "yes"},
    ],
)
def test_bad_options_raise_value_error(kwargs):
    outcome = HandOutcome(landlord=0, bid=1, winner="landlord", factors=Factors())
    with pytest.raises(ValueError, match=r"unit|cap|rake|bombs_double"):
        settle(outcome, **kwargs)


def test_settle_requires_an_outcome():
    with pytest.raises(ValueError):
        settle({"landlord": 0, "bid": 1, "winner": "landlord"})


def test_error_type():
    assert issubclass(SettlementError, ValueError)


# --------------------------------------------------------------------------
# Properties over random hands and table options
# --------------------------------------------------------------------------


@st.composite
def outcomes(draw):
    report = draw(st.sampled_from([None, "play", "no_play"]))
    first_bid_three = draw(st.booleans())
    factors = Factors(
        marked_joker=draw(st.booleans()),
        first_bid_three=first_bid_three,
        show_hand=first_bid_three and draw(st.booleans()),
        report=report,
        report_units=draw(st.integers(1, 5)) if report in ("play", "no_play") else 0,
        bombs=0 if report == "no_play" else draw(st.integers(0, 12)),
    )
    return HandOutcome(
        landlord=draw(st.integers(0, 3)),
        bid=3 if first_bid_three else draw(st.integers(1, 3)),
        winner="landlord"
        if report == "no_play"
        else draw(st.sampled_from(["landlord", "farmers"])),
        factors=factors,
        first_disconnect=draw(st.none() | st.integers(0, 3)),
    )


units = st.decimals(min_value=0, max_value=1000, places=2) | st.decimals(
    min_value=0, max_value=10, places=3
)
caps = st.none() | st.decimals(min_value=0, max_value=5000, places=2)
rakes = st.decimals(min_value=0, max_value=1, places=3)


def has_two_places(d: Decimal) -> bool:
    return isinstance(d, Decimal) and d.as_tuple().exponent == -2 and not (d.is_signed() and d == 0)


@settings(max_examples=400)
@given(outcomes(), units, caps, rakes, st.booleans())
def test_settlement_properties(outcome, unit, cap, rake, bombs_double):
    # when
    s = settle(outcome, unit=unit, cap=cap, rake=rake, bombs_double=bombs_double)
    seats = range(4)
    landlord = outcome.landlord
    farmers = [i for i in seats if i != landlord]
    with localcontext() as ctx:
        ctx.prec = 200  # exact checks whatever the size
        # then: every amount has exactly two places, no negative zero
        everything = [*s.gross, *s.after_cap, *s.rake, *s.penalty, *s.net, s.house]
        assert all(has_two_places(d) for d in everything)
        # zero-sum to the cent, at every stage
        assert sum(s.gross) == 0 and sum(s.after_cap) == 0
        assert sum(s.net) + s.house == 0
        # net = after_cap − rake − penalty; house = rake + penalties
        assert all(s.net[i] == s.after_cap[i] - s.rake[i] - s.penalty[i] for i in seats)
        assert s.house == sum(s.rake) + sum(s.penalty)
        # the three farmers are treated alike; the landlord is their exact negative sum
        assert (
            len({s.gross[i] for i in farmers}) == 1 and len({s.after_cap[i] for i in farmers}) == 1
        )
        assert s.after_cap[landlord] == -sum(s.after_cap[i] for i in farmers)
        # gross follows docs/rules.md §5 (rounded toward zero for farmers if not exact)
        m = multiplier(outcome.factors, bombs_double)
        m_plain = multiplier(outcome.factors, bombs_double, with_bombs=False)
        exact_unit = Fraction(unit) * outcome.bid
        if outcome.factors.report == "no_play":
            farmer = -exact_unit * m_plain * outcome.factors.report_units
        elif outcome.winner == "farmers" and outcome.factors.report == "play":
            farmer = Fraction(0)
        else:
            farmer = exact_unit * m * (1 if outcome.winner == "farmers" else -1)
        assert Fraction(s.gross[farmers[0]]) == Fraction(int(farmer * 100), 100)
        # the cap is never exceeded, and scaling only happens when needed, toward zero
        winners_gain = sum(a for a in s.after_cap if a > 0)
        losers_loss = -sum(a for a in s.after_cap if a < 0)
        assert winners_gain == losers_loss
        gross_gain = sum(a for a in s.gross if a > 0)
        if cap is None or gross_gain <= cap:
            assert s.after_cap == s.gross
        else:
            assert winners_gain <= cap
            assert winners_gain > cap - D("0.03")  # each of 3 farmers loses < 0.01 to rounding
            assert all(abs(s.after_cap[i]) <= abs(s.gross[i]) for i in seats)
            assert all(s.after_cap[i] * s.gross[i] >= 0 for i in seats)
        # the rake: that share of each winner's gain, half-up per winner
        for i in seats:
            want = (
                (s.after_cap[i] * rake).quantize(D("0.01"), rounding=ROUND_HALF_UP)
                if s.after_cap[i] > 0
                else 0
            )
            assert s.rake[i] == want
        # the penalty: first disconnect only, 3 × unit × bid × M without bombs
        for i in seats:
            if i == outcome.first_disconnect:
                assert Fraction(s.penalty[i]) == Fraction(int(3 * exact_unit * m_plain * 100), 100)
            else:
                assert s.penalty[i] == 0
    # and the JSON round-trips
    assert Settlement.from_json(json.loads(json.dumps(s.to_json())), s.multiplier_text()) == s
    assert Factors.from_json(json.loads(json.dumps(outcome.factors.to_json()))) == outcome.factors


@pytest.mark.parametrize(
    "kwargs",
    [
        {"unit": "abc"},
        {"unit": 1.5},
        {"unit": D("-1")},
        {"cap": D("NaN")},
        {"rake": D("1.01")},
        {"rake": True},
    ],
)
def test_a_table_and_settle_refuse_an_option_in_the_same_words(kwargs):
    """One check of the money options: what a table refuses, settle refuses with the same message."""
    outcome = HandOutcome(landlord=0, bid=1, winner="landlord", factors=Factors())
    with pytest.raises(GameError) as table_refusal:
        MatchSettings.build(**kwargs)
    with pytest.raises(SettlementError) as settle_refusal:
        settle(outcome, **kwargs)
    assert table_refusal.value.code == "invalid_table"
    assert str(settle_refusal.value) == str(table_refusal.value)
