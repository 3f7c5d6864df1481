"""The hand record (``ddz-hand/1``, docs/hand-record.md): export a match's events as one
JSON document, and verify such a document on its own — re-derive the deal from the seed,
check the commitment, replay every action through the rules, recompute the settlement.

The verifier accepts every record written to the format: fields this project's producer
adds (:data:`ADDITIONS`) are checked where present and not required, and fields it does not
know are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..rules import SEATS, RulesError, commitment, deal, parse_seed
from .actions import action_of, command_of, command_of_event
from .commands import Command, CreateMatch, DealHand, TakeSeat
from .decider import applied
from .events import BOT, PLAYER, Event, HandDealt, MatchCreated, SeatTaken
from .settings import MatchSettings
from .state import ENDED, State, evolve, initial_state

FORMAT = "ddz-hand/1"

#: Fields our producer writes that the format does not require (docs/hand-record.md).
ADDITIONS = frozenset({"options.turn_seconds", "options.bot_level", "result.first_disconnect"})


def export(events: Iterable[Event]) -> dict[str, Any]:
    """The hand record of a match's events. Meant for a finished hand; for one under way
    (operators only) ``result`` is ``None``."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "seats": [None] * SEATS,
        "actions": [],
        "result": None,
    }
    state = initial_state
    for event in events:
        state = evolve(state, event)
        if isinstance(event, MatchCreated):
            document.update(match_id=event.match_id, **event.table.settings())
        elif isinstance(event, SeatTaken):
            document["seats"][event.seat] = {"player": event.player, "bot": event.bot}
        elif isinstance(event, HandDealt):
            document.update(
                commitment=event.commitment,
                seed=event.seed,
                deal={
                    "hands": [[c.code for c in hand] for hand in event.hands],
                    "bottom": [c.code for c in event.bottom],
                    "marked_card": event.marked_card.code,
                    "marked_seat": event.marked_seat,
                },
            )
        else:
            command = command_of_event(event)
            if command is not None:
                document["actions"].append(action_of(command))
    if state.phase == ENDED:
        assert state.result is not None
        document["result"] = state.result.to_json()
    return document


class Discrepancy(Exception):
    """Where a hand record disagrees with the rules or with itself."""

    def __init__(self, where: str | None, message: str):
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


class NotARecord(Discrepancy):
    """A document that is no ``ddz-hand/1`` record at all (a problem document, a page, …):
    said plainly, with no field to point at."""

    def __init__(self, why: str):
        super().__init__(None, f"not a {FORMAT} record ({why})")


def load(data: bytes) -> dict[str, Any]:
    """The hand record in a file's bytes, or :class:`NotARecord` if they hold none."""
    if not data.strip():
        raise NotARecord("empty")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise NotARecord("not JSON") from None
    return _require_record(document)


def _require_record(document: object) -> dict[str, Any]:
    """The document, if it is a hand record at all."""
    if not isinstance(document, dict):
        kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        kind = kinds.get(type(document), "a number")
        raise NotARecord(f"JSON {kind}, not an object")
    if document.get("format") != FORMAT:
        if "format" not in document:
            raise NotARecord('no "format" field')
        raise NotARecord(f"format {document['format']!r}")
    return document


def _command(action: dict[str, Any], state: State) -> Command:
    seat = action["seat"]
    system = isinstance(seat, int) and 0 <= seat < SEATS and state.is_system(seat)
    return command_of(action, seat, action.get("by", BOT if system else PLAYER))


def _check(where: str, recorded: object, recomputed: object) -> None:
    if recorded != recomputed:
        raise Discrepancy(where, f"recorded {recorded!r}, recomputed {recomputed!r}")


def _compare(where: str, recorded: object, recomputed: object) -> None:
    """The first difference between two JSON values, field by field; a producer's addition
    may be absent, and fields of the record that we do not write are not compared."""
    if isinstance(recomputed, dict) and isinstance(recorded, dict):
        for key, value in recomputed.items():
            path = f"{where}.{key}"
            if key in recorded:
                _compare(path, recorded[key], value)
            elif path not in ADDITIONS:
                raise Discrepancy(path, "missing")
    else:
        _check(where, recorded, recomputed)


def verify(document: dict[str, Any]) -> State:
    """Checks a hand record; returns the replayed final state or raises :class:`Discrepancy`
    (:class:`NotARecord` when the document is no hand record at all)."""
    _require_record(document)
    try:
        return _verify(document)
    except Discrepancy:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Discrepancy("record", f"malformed: {exc!r}") from None


def _verify(document: dict[str, Any]) -> State:
    seed = parse_seed(document["seed"])
    _check("commitment", document["commitment"], commitment(seed))
    dealt = deal(seed)
    recorded_deal = document["deal"]
    for seat, hand in enumerate(dealt.hands):
        _check(f"deal.hands[{seat}]", recorded_deal["hands"][seat], [c.code for c in hand])
    _check("deal.bottom", recorded_deal["bottom"], [c.code for c in dealt.bottom])
    _check("deal.marked_card", recorded_deal["marked_card"], dealt.marked_card.code)
    _check("deal.marked_seat", recorded_deal["marked_seat"], dealt.marked_seat)

    table = MatchSettings.from_json({"ruleset": document["ruleset"], **document["options"]})
    _compare(
        "options", document["options"], {k: v for k, v in table.to_json().items() if k != "ruleset"}
    )
    state = initial_state
    setup: list[Command] = [CreateMatch(document.get("match_id") or "record", table)]
    for seat, info in enumerate(document["seats"]):
        setup.append(TakeSeat(seat, info["player"], bool(info["bot"])))
    setup.append(DealHand(seed))
    for command in setup:
        try:
            state = applied(state, command)
        except RulesError as exc:
            raise Discrepancy("seats", f"{exc.code}: {exc}") from None

    for index, action in enumerate(document["actions"]):
        where = f"action {index}"
        try:
            state = applied(state, _command(action, state))
        except RulesError as exc:
            raise Discrepancy(where, f"{exc.code}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise Discrepancy(where, f"malformed action: {exc!r}") from None

    if state.phase != ENDED:
        raise Discrepancy("actions", f"the hand has not ended (phase {state.phase})")
    assert state.result is not None
    _compare("result", document["result"], state.result.to_json())
    return state
