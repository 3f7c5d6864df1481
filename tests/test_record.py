"""The hand record (docs/hand-record.md): a record written to the format alone verifies —
this project's additions are checked where present and optional where absent — and a
tampered one fails at its first discrepancy."""

import copy

import pytest

from service.game import MatchSettings
from service.game.bot import BotPolicy
from service.game.commands import Disconnect
from service.game.record import Discrepancy, NotARecord, export, load, verify
from service.game.simulate import hand_seed, play_hand
from service.game.state import PLAYING

BOT = BotPolicy()


def disconnect_seat_2(state):
    """Seat 2 misses its first deadline of the play."""
    if state.phase == PLAYING and state.turn == 2 and state.first_disconnect is None:
        return [Disconnect(2, "deadline")]
    return []


def record_with_a_disconnect(cap=None) -> dict:
    table = MatchSettings.build(unit="0.50", cap=cap, rake="0.05", turn_seconds=20)
    events, _ = play_hand(
        table,
        hand_seed("record", 0),
        [BOT] * 4,
        match_id="m-1",
        players=("alice", "bob", "carol", "dave"),
        interrupt=disconnect_seat_2,
    )
    return export(events)


def reordered(value):
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(value)}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def to_the_format_alone(record: dict) -> dict:
    """The record as a producer that writes only what docs/hand-record.md requires would:
    no ``options.turn_seconds``, no ``result.first_disconnect``, no action ``by`` or
    ``reason``, keys in another order."""
    record = copy.deepcopy(record)
    del record["options"]["turn_seconds"], record["result"]["first_disconnect"]
    for action in record["actions"]:
        action.pop("by", None)
        action.pop("reason", None)
    return reordered(record)


def test_our_export_writes_the_additions_and_verifies():
    record = record_with_a_disconnect()
    assert record["options"]["turn_seconds"] == 20
    assert record["result"]["first_disconnect"] == 2
    assert record["result"]["settlement"]["penalty"][2] != "0.00"
    assert {"seat": 2, "action": "disconnect", "reason": "deadline"} in record["actions"]
    verify(record)


@pytest.mark.parametrize("cap", [None, "5.00"])
def test_a_record_written_to_the_format_alone_verifies(cap):
    record = to_the_format_alone(record_with_a_disconnect(cap))
    assert "first_disconnect" not in record["result"]
    state = verify(record)
    # the penalty is still recomputed and checked, from the disconnect action alone
    assert state.first_disconnect == 2


def test_hands_of_every_kind_written_to_the_format_alone_verify():
    kinds = set()
    for index in range(40):
        events, state = play_hand(
            MatchSettings.build(rake="0.05"), hand_seed("kinds", index), [BOT] * 4
        )
        factors = state.result.to_json()["factors"]
        kinds |= {key for key in ("first_bid_three", "show_hand") if factors[key]} | {
            factors["report"]
        }
        verify(to_the_format_alone(export(events)))
    assert {"first_bid_three", None} <= kinds


def test_fields_the_format_does_not_know_are_ignored():
    record = to_the_format_alone(record_with_a_disconnect())
    record["producer"] = {"name": "another server", "version": 3}
    record["options"]["currency"] = "points"
    record["result"]["settlement"]["note"] = "settled"
    verify(record)


def test_an_addition_that_is_present_is_checked():
    record = record_with_a_disconnect()
    record["result"]["first_disconnect"] = 1
    with pytest.raises(Discrepancy) as raised:
        verify(record)
    assert raised.value.where == "result.first_disconnect"
    record = record_with_a_disconnect()
    record["options"]["turn_seconds"] = 0
    with pytest.raises(Discrepancy, match="turn_seconds"):
        verify(record)


@pytest.mark.parametrize(
    "path",
    [
        ("options", "rake"),
        ("options", "bombs_double"),
        ("result", "factors", "report"),
        ("result", "multiplier"),
    ],
)
def test_a_field_the_format_requires_may_not_be_missing(path):
    record = to_the_format_alone(record_with_a_disconnect())
    *parents, last = path
    holder = record
    for key in parents:
        holder = holder[key]
    del holder[last]
    with pytest.raises(Discrepancy) as raised:
        verify(record)
    assert str(raised.value) == ".".join(path) + ": missing"


def test_a_tampered_record_fails_at_its_first_discrepancy():
    record = to_the_format_alone(record_with_a_disconnect())
    plays = [i for i, a in enumerate(record["actions"]) if a["action"] == "play"]
    record["actions"][plays[2]]["cards"] = ["S3"] * 9
    record["result"]["settlement"]["penalty"] = ["0.00"] * 4
    with pytest.raises(Discrepancy) as raised:
        verify(record)
    assert raised.value.where == f"action {plays[2]}"

    record = to_the_format_alone(record_with_a_disconnect())
    record["result"]["settlement"]["penalty"][2] = "0.00"
    with pytest.raises(Discrepancy) as raised:
        verify(record)
    assert raised.value.where == "result.settlement.penalty"


@pytest.mark.parametrize(
    "data, why",
    [
        (
            b'{"type": "about:blank", "title": "Not Found", "status": 404, "code": "not_found"}',
            'no "format" field',
        ),
        (b"<!doctype html><html><body>Not found</body></html>", "not JSON"),
        (b"[]", "JSON an array, not an object"),
        (b"null", "JSON null, not an object"),
        (b"", "empty"),
        (b" \n", "empty"),
        (b'{"format": "ddz-hand/2"}', "format 'ddz-hand/2'"),
        (b"\xff\xfe\x00", "not JSON"),
    ],
)
def test_what_is_no_hand_record_is_told_so(data, why):
    with pytest.raises(NotARecord) as raised:
        load(data)
    assert str(raised.value) == f"not a ddz-hand/1 record ({why})"


def test_verify_tells_a_document_that_is_no_record():
    with pytest.raises(NotARecord):
        verify(["ddz-hand/1"])
    with pytest.raises(NotARecord):
        verify({"type": "about:blank", "status": 404})
