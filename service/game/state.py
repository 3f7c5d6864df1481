"""The state of a match, and ``evolve``: how each event changes it (no validation here;
:mod:`service.game.decider` only ever emits events that are legal)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from ..rules import (
    SEATS,
    Card,
    Combination,
    ReportChoice,
    Ruleset,
    counts_of,
    legal_plays,
    report_units,
)
from ..rules.cards import NUM_RANKS, Counts, take_out
from ..rules.combinations import readings
from .events import (
    BidMade,
    Disconnected,
    Event,
    HandDealt,
    HandEnded,
    HandShown,
    LandlordChosen,
    MatchCreated,
    Passed,
    Played,
    Reported,
    Resumed,
    SeatTaken,
    Settled,
)
from .settings import MatchSettings
from .settlement import MAX_BID, MIN_BID, HandResult

NEW, SEATING, DEALING, BIDDING, SHOW_HAND, REPORT, PLAYING, ENDED = (
    "new",
    "seating",
    "dealing",
    "bidding",
    "show_hand",
    "report",
    "playing",
    "ended",
)
#: The phases a match shows (``new`` is only the state before its first event).
PHASES = (SEATING, DEALING, BIDDING, SHOW_HAND, REPORT, PLAYING, ENDED)
#: Phases in which a dealt hand is under way and a seat has a decision to take.
DECISION_PHASES = (BIDDING, SHOW_HAND, REPORT, PLAYING)
#: The bids a seat may make, 0 being a pass.
BIDS = (0, *range(MIN_BID, MAX_BID + 1))


def open_bids(highest_bid: int) -> tuple[int, ...]:
    """The bids open after ``highest_bid``: a pass, or a value above it."""
    return tuple(value for value in BIDS if value == 0 or value > highest_bid)


class Seat(NamedTuple):
    player: str | None
    bot: bool


class Turn(NamedTuple):
    """One turn of the play, as every seat saw it: the cards played, none for a pass."""

    seat: int
    cards: tuple[Card, ...]

    @property
    def passed(self) -> bool:
        return not self.cards


def next_seat(seat: int) -> int:
    return (seat + 1) % SEATS


_T = TypeVar("_T")


def built(cls: type[_T], values: dict[str, Any], names: frozenset[str]) -> _T:
    """An instance of the frozen (not slotted) dataclass ``cls`` handed ``values`` as its
    dictionary, where ``__init__`` would set each field with a call. ``names`` are the
    class's fields: ``values`` must hold each of them and nothing else (a field left out
    would read as the class's default), else ``TypeError``."""
    if values.keys() != names:
        raise TypeError(_misfit(cls, values, names))
    return handed(cls, values)


def handed(cls: type[_T], values: dict[str, Any]) -> _T:
    """As :func:`built`, unchecked: for a dictionary known to hold the fields, such as one
    made by a literal whose keys :func:`built` has checked (the check of a view's 31 keys
    was a sixth of :func:`~service.game.views.seat_view`)."""
    new = object.__new__(cls)
    object.__setattr__(new, "__dict__", values)
    return new


def _misfit(cls: type, values: dict[str, Any], names: frozenset[str]) -> str:
    unknown, missing = sorted(values.keys() - names), sorted(names - values.keys())
    said = [f"no field {', '.join(unknown)}"] if unknown else []
    said += [f"missing {', '.join(missing)}"] if missing else []
    return f"{cls.__name__}: {'; '.join(said)}"


@dataclass(frozen=True)
class State:
    """One match (one hand); :func:`evolve` returns a new state.

    The deal's ``seed`` is secret until the end. ``bids`` per seat: ``None`` never had a
    turn, 0 passed, 1-3. ``lead`` is the combination to beat, ``None`` when the seat to act
    leads. ``history`` is every play and pass so far, in order, and ``played`` the cards
    they took out of the hands, by rank (both public). ``report`` is the landlord's 报到 choice and ``locked`` the ranks it reported
    (see :meth:`locks`). ``settled``: the result is in the ledger.

    The optional fields fill in as the match goes: ``match_id`` and ``table`` from its
    creation on, every seat once dealing begins, ``landlord`` and ``bid`` once bidding is
    over, ``result`` once it has ended. The methods below assert what their phase
    guarantees.
    """

    phase: str = NEW
    version: int = 0
    match_id: str | None = None
    table: MatchSettings | None = None
    seats: tuple[Seat | None, ...] = (None,) * SEATS
    commitment: str | None = None
    seed: str | None = None
    marked_card: Card | None = None
    marked_seat: int | None = None
    hands: tuple[tuple[Card, ...], ...] = ((),) * SEATS
    bottom: tuple[Card, ...] = ()
    bids: tuple[int | None, ...] = (None,) * SEATS
    highest_bid: int = 0
    highest_bidder: int | None = None
    first_bid_three: bool = False
    landlord: int | None = None
    bid: int | None = None
    show_hand: bool | None = None
    report: ReportChoice | None = None
    report_units: int = 0
    reported_cards: tuple[Card, ...] = ()
    locked: frozenset[int] = frozenset()
    turn: int | None = None
    lead: Combination | None = None
    lead_seat: int | None = None
    lead_cards: tuple[Card, ...] = ()
    passes: int = 0
    bombs_played: tuple[int, ...] = (0,) * SEATS
    #: How many more bombs each seat may play (None: no limit, as for the landlord, or no
    #: landlord yet): :meth:`bombs_left`, kept up to date as bombs are played.
    bomb_allowance: tuple[int | None, ...] = (None,) * SEATS
    bombs: int = 0
    history: tuple[Turn, ...] = ()
    played: Counts = (0,) * NUM_RANKS
    disconnected: tuple[bool, ...] = (False,) * SEATS
    first_disconnect: int | None = None
    winner: str | None = None
    result: HandResult | None = None
    settled: bool = False

    def replace(self, **changes: Any) -> State:
        """A copy with ``changes``; a name that is not a field raises ``TypeError``, as
        ``dataclasses.replace`` would."""
        return _state({**self.__dict__, **changes})

    def __repr__(self) -> str:
        return f"<State {self.match_id} {self.phase} v{self.version}>"

    # What the rules derive from the state.

    def awaits_decision(self) -> bool:
        """Whether a seat is to act (bid, 摊打, 报到 or play)."""
        return self.turn is not None and self.phase in DECISION_PHASES

    def is_system(self, seat: int) -> bool:
        """Whether the system acts for the seat: a bot seat, or a disconnected player."""
        taken = self.seats[seat]
        assert taken is not None, "asked of a seated seat only"
        return taken.bot or self.disconnected[seat]

    def bombs_left(self, seat: int) -> int | None:
        """How many more bombs the seat may play (``None``: no limit)."""
        assert self.landlord is not None, "asked once bidding is over"
        return self.bomb_allowance[seat]

    def reportable_units(self) -> list[frozenset[int]]:
        """The 报到 units the landlord may report now."""
        assert self.table is not None and self.landlord is not None
        return report_units(counts_of(self.hands[self.landlord]), self.table.ruleset)

    def locks(self, seat: int | None) -> frozenset[int]:
        """The reported ranks that bind ``seat``: they lock only the landlord's cards."""
        return self.locked if seat is not None and seat == self.landlord else frozenset()

    def plays(self, seat: int) -> Iterator[Combination]:
        """Every legal play of ``seat`` now, by ranks (it leads when ``lead`` is None)."""
        assert self.table is not None
        return legal_plays(
            self.hands[seat],
            self.lead,
            ruleset=self.table.ruleset,
            bombs_left=self.bombs_left(seat),
            locked=self.locks(seat),
        )

    def role(self, seat: int) -> str | None:
        if self.landlord is None:
            return None
        return "landlord" if seat == self.landlord else "farmer"


initial_state = State()
#: A state's fields: its dictionary holds each of them and nothing else.
_STATE_FIELDS = frozenset(field.name for field in fields(State))


def _state(values: dict[str, Any]) -> State:
    # A state's dictionary made whole, and handed over: evolve makes one for every event,
    # and it is many times as fast as dataclasses.replace (which calls __init__, a call per
    # field) or a copy of a slotted instance. Built from a state's own, which holds every
    # field, it has a name more than a state's exactly when a change names no field.
    if len(values) != len(_STATE_FIELDS):
        raise TypeError(_misfit(State, values, _STATE_FIELDS))
    return handed(State, values)


def _set(items: tuple[_T, ...], index: int, value: _T) -> tuple[_T, ...]:
    return items[:index] + (value,) + items[index + 1 :]


def _remove(hand: tuple[Card, ...], cards: tuple[Card, ...]) -> tuple[Card, ...]:
    return take_out(hand, cards)[0]


def recorded_combination(event: Played, state: State) -> Combination:
    """The reading a play was recorded as."""
    assert state.table is not None
    return _reading(counts_of(event.cards), state.table.ruleset, event.combination, event.rank)


@lru_cache(maxsize=8192)
def _reading(counts: Counts, ruleset: Ruleset, kind: str, rank: str | None) -> Combination:
    # Every replay and every simulated turn reads plays again; the same few thousand
    # plays come back all the time.
    for reading in readings(counts, ruleset):
        if reading.type.value == kind and reading.rank == rank:
            return reading
    raise ValueError(f"play of {counts} does not read as {kind} {rank}")


#: What an event changes of a state, by field: each handler below returns a new one, and
#: :func:`evolve` alone makes the new state of it, so no handler can alter the state it is
#: given (nor hand it back to be altered).
Changes = dict[str, Any]


def _after_landlord_decision(state: State, changes: Changes) -> Changes:
    """Once 摊打 (if any) is decided: 报到 when the landlord may, else play begins."""
    landlord = changes.get("landlord", state.landlord)
    assert state.table is not None and landlord is not None
    hand = changes.get("hands", state.hands)[landlord]
    reportable = report_units(counts_of(hand), state.table.ruleset)
    return {**changes, "phase": REPORT if reportable else PLAYING}


def _match_created(state: State, e: MatchCreated) -> Changes:
    return {"phase": SEATING, "match_id": e.match_id, "table": e.table}


def _seat_taken(state: State, e: SeatTaken) -> Changes:
    seats = _set(state.seats, e.seat, Seat(e.player, e.bot))
    return {"seats": seats, "phase": DEALING if all(seats) else SEATING}


def _hand_dealt(state: State, e: HandDealt) -> Changes:
    return {
        "phase": BIDDING,
        "commitment": e.commitment,
        "seed": e.seed,
        "hands": e.hands,
        "bottom": e.bottom,
        "marked_card": e.marked_card,
        "marked_seat": e.marked_seat,
        "turn": e.marked_seat,
    }


def _bid(state: State, e: BidMade) -> Changes:
    changes: Changes = {"bids": _set(state.bids, e.seat, e.value), "turn": next_seat(e.seat)}
    if e.value > state.highest_bid:
        changes.update(highest_bid=e.value, highest_bidder=e.seat)
    if e.value == MAX_BID and e.seat == state.marked_seat:
        changes["first_bid_three"] = True
    return changes


def _landlord_chosen(state: State, e: LandlordChosen) -> Changes:
    assert state.table is not None
    hands = _set(state.hands, e.seat, state.hands[e.seat] + e.bottom)
    # Worked out once, then counted down: every view shows each seat's bombs left.
    limit = state.table.ruleset.bomb_limit
    allowance = tuple(
        None if seat == e.seat else limit.for_farmer(own, e.bid)
        for seat, own in enumerate(state.bids)
    )
    changes: Changes = {
        "landlord": e.seat,
        "bid": e.bid,
        "hands": hands,
        "turn": e.seat,
        "lead": None,
        "lead_seat": e.seat,
        "bomb_allowance": allowance,
    }
    if state.first_bid_three:
        return {**changes, "phase": SHOW_HAND}
    return _after_landlord_decision(state, changes)


def _hand_shown(state: State, e: HandShown) -> Changes:
    return _after_landlord_decision(state, {"show_hand": e.value})


def _reported(state: State, e: Reported) -> Changes:
    return {
        "phase": PLAYING,
        "report": e.value,
        "report_units": e.units,
        "reported_cards": e.cards,
        "locked": frozenset(e.locked) if e.value == ReportChoice.PLAY else frozenset(),
    }


def _played(state: State, e: Played) -> Changes:
    combination = recorded_combination(e, state)
    seat = e.seat
    changes: Changes = {
        "history": state.history + (Turn(seat, e.cards),),
        "played": tuple(map(operator.add, state.played, counts_of(e.cards))),
        "hands": _set(state.hands, seat, _remove(state.hands[seat], e.cards)),
        "lead": combination,
        "lead_seat": seat,
        "lead_cards": e.cards,
        "passes": 0,
        "turn": next_seat(seat),
    }
    if combination.type.is_bomb:
        left = state.bomb_allowance[seat]
        changes["bombs_played"] = _set(state.bombs_played, seat, state.bombs_played[seat] + 1)
        changes["bombs"] = state.bombs + 1
        if left is not None:
            changes["bomb_allowance"] = _set(state.bomb_allowance, seat, max(0, left - 1))
    return changes


def _passed(state: State, e: Passed) -> Changes:
    passes = state.passes + 1
    history = state.history + (Turn(e.seat, ()),)
    if passes == SEATS - 1:
        # Three passes in a row: the seat that played last leads again, with anything.
        return {
            "passes": 0,
            "lead": None,
            "lead_cards": (),
            "turn": state.lead_seat,
            "history": history,
        }
    return {"passes": passes, "turn": next_seat(e.seat), "history": history}


def _disconnected(state: State, e: Disconnected) -> Changes:
    first = e.seat if state.first_disconnect is None else state.first_disconnect
    return {
        "disconnected": _set(state.disconnected, e.seat, True),
        "first_disconnect": first,
    }


def _resumed(state: State, e: Resumed) -> Changes:
    return {"disconnected": _set(state.disconnected, e.seat, False)}


def _hand_ended(state: State, e: HandEnded) -> Changes:
    return {
        "phase": ENDED,
        "seed": e.seed,
        "result": e.result,
        "winner": e.result.outcome.winner,
        "turn": None,
    }


def _settled(state: State, e: Settled) -> Changes:
    return {"settled": True}


_EVOLVE: dict[type[Event], Callable[[State, Any], Changes]] = {
    MatchCreated: _match_created,
    SeatTaken: _seat_taken,
    HandDealt: _hand_dealt,
    BidMade: _bid,
    LandlordChosen: _landlord_chosen,
    HandShown: _hand_shown,
    Reported: _reported,
    Played: _played,
    Passed: _passed,
    Disconnected: _disconnected,
    Resumed: _resumed,
    HandEnded: _hand_ended,
    Settled: _settled,
}


def evolve(state: State, event: Event) -> State:
    """The state after ``event``. Pure: ``state`` is left as it was."""
    changes = _EVOLVE[type(event)](state, event)
    return _state({**state.__dict__, **changes, "version": state.version + 1})


def replay(events: Iterable[Event], state: State = initial_state) -> State:
    """Folds events into a state: ``evolve`` over the whole stream."""
    for event in events:
        state = evolve(state, event)
    return state


def time_to_act(state: State) -> timedelta | None:
    """How long the seat to act has to decide, counted from the last event (then the system
    acts for it): ``turn_seconds`` while a seat is to decide, None otherwise."""
    if not state.awaits_decision():
        return None
    assert state.table is not None
    return timedelta(seconds=state.table.turn_seconds)


def decision(state: State) -> tuple[int, str] | None:
    """The decision a seat's player is to take now, as (seat, phase); None when no seat is
    to act, or when the system acts for the seat to act."""
    turn = state.turn
    if turn is None or not state.awaits_decision() or state.is_system(turn):
        return None
    return turn, state.phase


def decision_kept(state: State, events: Iterable[Event]) -> bool:
    """Whether each of ``events``, from ``state`` on, leaves its pending decision as it is
    (another seat disconnected, or took its seat back): a seat told of its turn at
    ``state`` may still answer it, and is told nothing new."""
    pending = decision(state)
    for event in events:
        state = evolve(state, event)
        if pending is None or decision(state) != pending:
            return False
    return True


def deadline(state: State, last_recorded_at: datetime | None) -> datetime | None:
    """When the seat to act loses its turn to the system (see :func:`time_to_act`); None when
    no seat is to act or nothing is recorded yet. The store's append writes the same instant
    to the ``matches`` table, for the deadline scan, adding :func:`time_to_act` to the time
    PostgreSQL records."""
    allowed = time_to_act(state)
    if allowed is None or last_recorded_at is None:
        return None
    return last_recorded_at + allowed
