"""Events: the facts of a match, appended to its stream and never changed.

Each event has a ``type`` name and a schema ``version``, and serialises to a JSON payload
and back. Events hold everything that happened, hidden cards included; what a seat may
see of each is :func:`service.game.views.visible`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from types import UnionType
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

from ..rules import Card, ReportChoice, parse_cards
from .errors import GameError
from .settings import MatchSettings
from .settlement import HandResult

#: Who took a decision: the seat's player, or the bot policy (a bot seat, or 系统代打 for a
#: disconnected player). The hand record writes the same values.
PLAYER, BOT = "player", "bot"


@dataclass(frozen=True, slots=True)
class Event:
    type: ClassVar[str]
    version: ClassVar[int] = 1

    def payload(self) -> dict[str, Any]:
        return {f.name: _dump(getattr(self, f.name)) for f in fields(self)}

    def to_json(self) -> dict[str, Any]:
        """The event with its envelope, as in exports: ``{"type", "version", ...payload}``."""
        return {"type": self.type, "version": self.version, **self.payload()}

    def summary(self) -> str:
        """What happened, in a line for people (the console's replay, the workers' log);
        never a card that a seat may not see. Each event of a match says its own
        (tests/test_registries.py); a table's events say nothing yet."""
        raise NotImplementedError(
            f"{type(self).__name__} has no summary() in service/game/events.py"
        )

    @staticmethod
    def from_payload(type: str, version: int, payload: dict[str, Any]) -> Event:
        cls = EVENT_TYPES.get(type)
        if cls is None:
            raise GameError(f"unknown event type {type!r}", "unknown_event")
        while (type, version) in UPCASTERS:
            payload = UPCASTERS[type, version](payload)
            version += 1
        if version != cls.version:
            raise GameError(
                f"event {type!r} has schema version {version}, expected {cls.version}",
                "unknown_event",
            )
        # A class is hashable, though mypy does not see it (python/mypy#11470).
        loaders = _loaders(cls)  # type: ignore[arg-type]
        return cls(**{name: load(payload[name]) for name, load in loaders})

    @staticmethod
    def from_json(data: dict[str, Any]) -> Event:
        payload = {k: v for k, v in data.items() if k not in ("type", "version")}
        return Event.from_payload(data["type"], data["version"], payload)


def _dump(value: object) -> Any:
    """The value as JSON holds it."""
    if isinstance(value, Card):
        return value.code
    if isinstance(value, tuple):
        return [_dump(v) for v in value]
    if isinstance(value, (MatchSettings, HandResult)):
        return value.to_json()
    return value


def _same(value: Any) -> Any:
    return value


def _loader(hint: Any) -> Callable[[Any], Any]:
    """How a payload value becomes a field of the type ``hint``: by the type, so that every
    event field of a type loads alike, whatever its name."""
    args = get_args(hint)
    if get_origin(hint) in (Union, UnionType) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        load = _loader(inner)
        return _same if load is _same else lambda v: None if v is None else load(v)
    if get_origin(hint) is tuple:
        if args == (Card, Ellipsis):
            return parse_cards
        item = _loader(args[0])
        return tuple if item is _same else lambda v: tuple(item(x) for x in v)
    if hint is Card:
        return Card.from_code
    if isinstance(hint, type) and issubclass(hint, (MatchSettings, HandResult, Enum)):
        return getattr(hint, "from_json", hint)
    return _same


@functools.cache
def _loaders(cls: type[Event]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    hints = get_type_hints(cls)
    return tuple((f.name, _loader(hints[f.name])) for f in fields(cls))


@dataclass(frozen=True, slots=True)
class MatchCreated(Event):
    type = "match_created"
    match_id: str
    table: MatchSettings

    def summary(self) -> str:
        return f"the match was created: {self.table.ruleset.name}, unit {self.table.unit}"


@dataclass(frozen=True, slots=True)
class SeatTaken(Event):
    type = "seat_taken"
    seat: int
    player: str | None
    bot: bool

    def summary(self) -> str:
        return f"seat {self.seat} was taken by {'a bot' if self.bot else 'a player'}"


@dataclass(frozen=True, slots=True)
class HandDealt(Event):
    """The deal. ``seed`` stays secret until the hand ends; ``commitment`` is public."""

    type = "hand_dealt"
    commitment: str
    seed: str
    hands: tuple[tuple[Card, ...], ...]
    bottom: tuple[Card, ...]
    marked_card: Card
    marked_seat: int

    def summary(self) -> str:
        return f"dealt; the marked card {self.marked_card} is with seat {self.marked_seat}"


@dataclass(frozen=True, slots=True)
class BidMade(Event):
    """A bid of 1, 2 or 3, or a pass in bidding (value 0)."""

    type = "bid"
    seat: int
    value: int
    by: str = PLAYER

    def summary(self) -> str:
        return f"seat {self.seat} " + (f"bid {self.value}" if self.value else "passed the bid")


@dataclass(frozen=True, slots=True)
class LandlordChosen(Event):
    """Bidding is over; the landlord takes the bottom (which farmers never see)."""

    type = "landlord_chosen"
    seat: int
    bid: int
    bottom: tuple[Card, ...]

    def summary(self) -> str:
        return f"seat {self.seat} is the landlord at {self.bid}, and takes the bottom"


@dataclass(frozen=True, slots=True)
class HandShown(Event):
    """摊打: ``value`` true shows the landlord's whole hand (``cards``) to every seat."""

    type = "show_hand"
    seat: int
    value: bool
    cards: tuple[Card, ...]
    by: str = PLAYER

    def summary(self) -> str:
        shown = "showed the hand (摊打)" if self.value else "did not show the hand"
        return f"seat {self.seat} {shown}"


@dataclass(frozen=True, slots=True)
class Reported(Event):
    """报到: ``value`` is ``play`` (打), ``no_play`` (不打) or ``decline`` (no 报到);
    ``cards`` are the reported cards, shown to every seat, and ``locked`` their ranks."""

    type = "report"
    seat: int
    value: ReportChoice
    units: int
    cards: tuple[Card, ...]
    locked: tuple[int, ...]
    by: str = PLAYER

    def summary(self) -> str:
        return f"seat {self.seat} answered 报到 with {self.value}"


@dataclass(frozen=True, slots=True)
class Played(Event):
    type = "play"
    seat: int
    cards: tuple[Card, ...]
    combination: str
    rank: str | None
    by: str = PLAYER

    def summary(self) -> str:
        count = len(self.cards)
        return (
            f"seat {self.seat} played {self.combination} ({count} card{'s' if count > 1 else ''})"
        )


@dataclass(frozen=True, slots=True)
class Passed(Event):
    type = "pass"
    seat: int
    by: str = PLAYER

    def summary(self) -> str:
        return f"seat {self.seat} passed"


@dataclass(frozen=True, slots=True)
class Disconnected(Event):
    """The system plays the seat from now on (系统代打); ``reason`` is ``deadline`` or ``left``."""

    type = "disconnect"
    seat: int
    reason: str

    def summary(self) -> str:
        why = "missed its deadline: taken over" if self.reason == "deadline" else "left"
        return f"seat {self.seat} {why}, the system plays the seat from now on (系统代打)"


@dataclass(frozen=True, slots=True)
class Resumed(Event):
    type = "resume"
    seat: int

    def summary(self) -> str:
        return f"seat {self.seat} took the seat back"


@dataclass(frozen=True, slots=True)
class HandEnded(Event):
    """The end of the hand: the revealed seed, and the result block of the hand record
    (winner, factors, multiplier and settlement; docs/hand-record.md)."""

    type = "hand_ended"
    #: 2: ``result.factors.report`` is null when no 报到 was declared, a decline included
    #: (version 1 wrote "decline" there).
    version = 2
    seed: str
    result: HandResult

    def summary(self) -> str:
        return f"the hand ended: the {self.result.outcome.winner} won"


@dataclass(frozen=True, slots=True)
class Settled(Event):
    """The settlement of the ended hand is in the ledger (``net`` per seat and ``house``,
    as in the hand record's result)."""

    type = "settled"
    net: tuple[str, ...]
    house: str

    def summary(self) -> str:
        return "settled in the ledger"


# A table's stream (service.game.table_play): the seats of a table that plays hand after
# hand, each hand a match of its own.


@dataclass(frozen=True, slots=True)
class TableCreated(Event):
    """A table: its settings, whether it is ``private`` (joined only with ``invite``),
    after how many seconds of waiting its empty seats go to system bots (``bots_after``,
    ``None``: never), how long it rests after a hand before dealing the next, and how long
    a table of people only that lost one between hands waits for another before it closes
    (``close_after``)."""

    type = "table_created"
    #: 2: ``close_after`` (version 1 tables waited for people for ever; they get the
    #: default wait, :data:`DEFAULT_CLOSE_SECONDS`).
    version = 2
    table_id: str
    table: MatchSettings
    private: bool
    invite: str | None
    bots_after: int | None
    next_hand_seconds: int
    close_after: int


@dataclass(frozen=True, slots=True)
class PlayerJoined(Event):
    type = "player_joined"
    seat: int
    player: str | None
    bot: bool


@dataclass(frozen=True, slots=True)
class PlayerLeft(Event):
    """The seat's player left; during hand ``number`` (``at_hand_end``) the system plays the
    seat to the end and the seat is freed once the hand is settled (:class:`SeatFreed`)."""

    type = "player_left"
    #: 2: ``number``, the hand under way (null between hands, and in version 1).
    version = 2
    seat: int
    player: str | None
    at_hand_end: bool
    number: int | None


@dataclass(frozen=True, slots=True)
class SeatFreed(Event):
    """Hand ``number`` is settled and the seat of its player, who left during it or did
    nothing in it, is free (appended just before :class:`HandSettled`)."""

    type = "seat_freed"
    seat: int
    player: str | None
    number: int


@dataclass(frozen=True, slots=True)
class HandStarted(Event):
    """Hand ``number`` of the table is the match ``match_id``, dealt to these seats."""

    type = "hand_started"
    number: int
    match_id: str


@dataclass(frozen=True, slots=True)
class HandSettled(Event):
    """The hand's match is settled: ``net`` per seat, as its ``settled`` event says."""

    type = "hand_settled"
    number: int
    match_id: str
    net: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TableClosed(Event):
    """The table closed after ``hands`` hands: a table of people only waited
    ``close_after`` seconds for someone to take a seat freed between hands. ``players``:
    who was seated, by seat (their seats are free)."""

    type = "table_closed"
    hands: int
    players: tuple[str | None, ...]


def _report_declined_is_no_report(payload: dict[str, Any]) -> dict[str, Any]:
    factors = payload["result"]["factors"]
    if factors["report"] != "decline":
        return payload
    result = {**payload["result"], "factors": {**factors, "report": None}}
    return {**payload, "result": result}


#: The wait of a table that lost a person between hands before it closes, for tables made
#: before there was one (the server's own default, ``DDZ_TABLE_CLOSE_SECONDS``, is the same).
DEFAULT_CLOSE_SECONDS = 120


#: How a stored event of an older schema version becomes the next version: events are never
#: rewritten, so each is brought up to date as it is read, one version at a time.
UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("hand_ended", 1): _report_declined_is_no_report,
    ("table_created", 1): lambda payload: {**payload, "close_after": DEFAULT_CLOSE_SECONDS},
    ("player_left", 1): lambda payload: {**payload, "number": None},
}


#: The events of a table's stream (the others are a match's).
TABLE_EVENTS: tuple[type[Event], ...] = (
    TableCreated,
    PlayerJoined,
    PlayerLeft,
    SeatFreed,
    HandStarted,
    HandSettled,
    TableClosed,
)

#: The events of a match's stream.
MATCH_EVENTS: tuple[type[Event], ...] = (
    MatchCreated,
    SeatTaken,
    HandDealt,
    BidMade,
    LandlordChosen,
    HandShown,
    Reported,
    Played,
    Passed,
    Disconnected,
    Resumed,
    HandEnded,
    Settled,
)

EVENT_TYPES: dict[str, type[Event]] = {cls.type: cls for cls in (*MATCH_EVENTS, *TABLE_EVENTS)}
