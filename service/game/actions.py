"""A seat's actions: the one mapping between the action documents — the API's command body
``{"action": ..., "value"/"cards": ...}`` and the hand record's action entries — the
decider's commands, and the events they cause; and the actions a seat is offered now,
found by asking the decider (:func:`~service.game.decider.can`) about every candidate, so
that what is offered never disagrees with what :func:`~service.game.decider.decide` accepts.

An action's name is its command's ``name`` and the ``type`` of the event it causes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Any

from ..rules import InvalidNotation, ReportChoice, parse_cards, pick_cards
from .commands import Bid, Disconnect, Pass, Play, Report, Resume, SeatCommand, ShowHand
from .decider import can
from .errors import GameError
from .events import PLAYER, Event
from .state import BIDDING, BIDS, PLAYING, REPORT, SHOW_HAND, State

#: The commands by which a seat takes its turn's decision, in the order they are offered.
DECISIONS: tuple[type[SeatCommand], ...] = (Bid, ShowHand, Report, Play, Pass)
#: What a player may send (its decisions, and taking its seat back); the hand record's
#: actions add ``disconnect``.
PLAYER_ACTIONS: tuple[str, ...] = (*(c.name for c in DECISIONS), Resume.name)
_SEAT_COMMANDS: tuple[type[SeatCommand], ...] = (*DECISIONS, Disconnect, Resume)
COMMANDS: dict[str, type[SeatCommand]] = {c.name: c for c in _SEAT_COMMANDS}

#: Each decision's candidate values in the phase it belongs to (``None``: the action takes
#: no value). The first value is one the decider always accepts when the decision is due:
#: what a system player takes where its policy has no rule of its own (:func:`by_default`).
CANDIDATES: dict[type[SeatCommand], tuple[str, tuple[Any, ...] | None]] = {
    Bid: (BIDDING, BIDS),
    ShowHand: (SHOW_HAND, (True, False)),
    Report: (REPORT, tuple(choice.value for choice in ReportChoice)),
    Play: (PLAYING, None),
    Pass: (PLAYING, None),
}
#: What each value-taking action's ``value`` is, for the error that says so and for the
#: API's schema of a command body.
VALUES: dict[type[SeatCommand], tuple[type, str]] = {
    Bid: (int, "0 (pass), 1, 2 or 3"),
    ShowHand: (bool, "true or false"),
    Report: (str, "{}, {} or {}".format(*ReportChoice)),
}


def by_default(phase: str, seat: int, by: str) -> SeatCommand:
    """The decision due in ``phase``, taken with its first candidate value: how the system
    plays a seat in a phase its policy has no rule for (a decision new to it)."""
    for cls, (due, values) in CANDIDATES.items():
        if due != phase:
            continue
        if values is not None:
            return cls(seat, values[0], by)  # type: ignore[call-arg]
        if cls is not Play:  # a decision that takes nothing but the seat
            return cls(seat, by)  # type: ignore[call-arg]
    raise ValueError(f"nothing to decide in phase {phase!r}")


def command_of(action: Mapping[str, Any], seat: int, by: str = PLAYER) -> SeatCommand:
    """The command an action document asks for; a :class:`GameError` (``invalid_command``)
    when it is malformed."""
    name, value = action["action"], action.get("value")
    cls = COMMANDS.get(name)
    if cls is None:
        raise GameError(f"unknown action {name!r}", "invalid_command")
    if cls is not Play and "cards" in action:
        raise GameError("'cards' goes only with play", "invalid_command")
    if cls in VALUES:
        kind, description = VALUES[cls]
        # A bool is an int to Python, not a bid; a ReportChoice is a str.
        if not isinstance(value, kind) or (kind is int and type(value) is bool):
            raise GameError(f"{name} needs 'value': {description}", "invalid_command")
        return cls(seat, value, by)  # type: ignore[call-arg]
    if "value" in action:
        raise GameError(f"{name} takes no 'value'", "invalid_command")
    if cls is Play:
        if "cards" not in action:
            raise GameError("play needs 'cards'", "invalid_command")
        try:
            return Play(seat, parse_cards(action["cards"]), by)
        except InvalidNotation as exc:
            raise GameError(str(exc), "invalid_command") from None
    if cls is Disconnect:
        return Disconnect(seat, action.get("reason", "left"))
    if cls is Resume:
        return Resume(seat)
    # A decision that takes nothing but the seat: pass, and any like it.
    return cls(seat, by)  # type: ignore[call-arg]


def action_of(command: SeatCommand) -> dict[str, Any]:
    """The hand record's action entry of a seat's command: ``seat``, ``action``, then the
    command's own fields (cards by their codes)."""
    entry: dict[str, Any] = {"seat": command.seat, "action": command.name}
    for field in fields(command):
        if field.name != "seat":
            value = getattr(command, field.name)
            entry[field.name] = [card.code for card in value] if field.name == "cards" else value
    return entry


def command_of_event(event: Event) -> SeatCommand | None:
    """The seat's command that caused ``event``; ``None`` for events that are no seat's action."""
    cls = COMMANDS.get(event.type)
    if cls is None:
        return None
    return cls(**{field.name: getattr(event, field.name) for field in fields(cls)})


def offered(state: State, seat: int | None, by: str = PLAYER) -> list[dict[str, Any]]:
    """What ``seat`` may do now, as the API offers it: each action the decider would accept,
    with its ``choices`` where it takes a value."""
    if seat is None or state.seats[seat] is None:
        return []
    if can(state, Resume(seat)):
        return [{"action": "resume"}]
    if state.turn != seat:
        return []
    actions: list[dict[str, Any]] = []
    for cls, (phase, values) in CANDIDATES.items():
        if phase != state.phase:
            continue
        if values is not None:
            choices = [v for v in values if can(state, cls(seat, v, by))]  # type: ignore[call-arg]
            if choices:
                actions.append({"action": cls.name, "choices": choices})
        elif any(can(state, command) for command in _candidates(state, cls, seat, by)):
            actions.append({"action": cls.name})
    return actions


def _candidates(state: State, cls: type[SeatCommand], seat: int, by: str) -> Iterator[SeatCommand]:
    if cls is Play:
        # A seat that can beat nothing may only pass; the first legal play found is enough.
        for combination in state.plays(seat):
            yield Play(seat, pick_cards(state.hands[seat], combination.counts), by)
            return
    else:
        # A decision that takes nothing but the seat (pass, and any like it).
        yield cls(seat, by)  # type: ignore[call-arg]
