"""Bidding and 摊打 by measured points (service/game/bot/calibration.py, calibrated.py)."""

from __future__ import annotations

import pytest
from crafted import first_bid_view, make_view

from service.game.bot import BotPolicy, Style, evaluation
from service.game.bot.calibration import Measured, calibrate, markdown, module_source
from service.game.bot.levels import policy
from service.game.commands import Bid, ShowHand
from service.game.policies import acting_party
from service.game.settings import MatchSettings
from service.game.simulate import hand_seed
from service.game.state import SHOW_HAND


def test_measured_gains_rise_with_the_chance():
    m = Measured()
    for chance, gain in ((0.12, -4.0), (0.52, 6.0), (0.57, 2.0), (0.57, 0.0), (0.81, 9.0)):
        m.add(chance, gain)
    gains = m.monotone()
    # 0.5-0.55 (+6) above 0.55-0.6 (+1) breaks the rise: the two are pooled (+8/3).
    assert gains[10] == gains[11] == round(8 / 3, 2)
    assert gains[0] == gains[1] == -4.0  # bands without hands take the nearest one's
    assert gains[16] == gains[19] == 9.0
    assert list(gains) == sorted(gains)


def test_bids_the_choice_measured_to_gain_most(monkeypatch):
    table = MatchSettings.build("shanghai-platform")
    view = first_bid_view("3456789TJQKA23579J468TQKA", table)
    style = Style(by_points=True)
    bands = len(Measured().hands)
    gains = {"first 1": (1.0,) * bands, "first 2": (3.0,) * bands, "first 3": (2.0,) * bands}
    monkeypatch.setitem(evaluation.GAINS, ("shanghai-platform", True), gains)
    assert BotPolicy(style=style).act(view) == Bid(0, 2, acting_party(view))
    losing = {key: (-1.0,) * bands for key in gains}
    monkeypatch.setitem(evaluation.GAINS, ("shanghai-platform", True), losing)
    assert BotPolicy(style=style).act(view) == Bid(0, 0, acting_party(view))
    # Where nothing was measured, the thresholds decide.
    monkeypatch.setitem(evaluation.GAINS, ("shanghai-platform", True), {})
    thresholds = Style(by_points=True, bid_thresholds=((1, 0.0),))
    assert BotPolicy(style=thresholds).act(view) == Bid(0, 1, acting_party(view))


def test_shows_the_hand_where_showing_was_measured_to_gain(monkeypatch):
    table = MatchSettings.build("shanghai-local", bombs_double=False)
    view = make_view(
        "33445566778899TTJJQQKKAA2BR34567",
        seat=0,
        landlord=0,
        phase=SHOW_HAND,
        bids=(3, None, None, None),
        bid=3,
        first_bid_three=True,
        table=table,
    )
    chance = evaluation.show_chance(view)
    band = int(chance / evaluation.BAND)
    bands = len(Measured().hands)
    gains = tuple(1.0 if b >= band else -1.0 for b in range(bands))
    monkeypatch.setitem(evaluation.GAINS, ("shanghai-local", False), {"show": gains})
    assert BotPolicy(style=Style(by_points=True)).act(view) == ShowHand(0, True, acting_party(view))
    later = tuple(1.0 if b > band else -1.0 for b in range(bands))
    monkeypatch.setitem(evaluation.GAINS, ("shanghai-local", False), {"show": later})
    assert BotPolicy(style=Style(by_points=True)).act(view) == ShowHand(
        0, False, acting_party(view)
    )


@pytest.mark.parametrize("ruleset", ["shanghai-platform", "shanghai-local"])
def test_calibration_measures_bids_and_writes_its_table(ruleset):
    table = MatchSettings.build(ruleset)
    found = calibrate(12, "calibrate-test", table, policy("normal"), hand_seed)
    assert any(key.startswith("first ") for key in found.measured)
    # A bid of 1 or 2 by the first bidder and passing end alike when every other seat
    # passes: the gains are measured on the same hands as the others.
    assert sum(sum(m.hands) for m in found.measured.values()) >= 12
    lines = markdown(ruleset, found)
    assert lines[0].startswith(ruleset)
    source = module_source({(table.ruleset.name, True): found}, "ddz simulate --calibrate")
    namespace: dict[str, object] = {}
    exec(source, namespace)  # noqa: S102 - the generated module is Python we wrote
    gains = namespace["GAINS"]
    assert isinstance(gains, dict) and set(gains) == {(table.ruleset.name, True)}


def test_simulate_calibrate_writes_the_module(tmp_path):
    import io

    from service.cli import run_calibrate

    out = tmp_path / "calibrated.py"
    printed = io.StringIO()
    assert run_calibrate(4, "ab" * 32, "shanghai-local", "no", str(out), printed) == 0
    assert "shanghai-local, bombs do not double" in printed.getvalue()
    namespace: dict[str, object] = {}
    exec(out.read_text(encoding="utf-8"), namespace)  # noqa: S102 - the module we wrote
    assert set(namespace["GAINS"]) == {("shanghai-local", False)}  # type: ignore[call-overload]
