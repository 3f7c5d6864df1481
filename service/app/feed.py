"""A player's own stream: what concerns the player across its tables and matches, one
ordered sequence with nothing missed on resumption. Each item comes from one stored event,
as the player's seat may see it (docs/rules.md §6): seated, leaving, left and table closed
(tables), hand started with the player's own hand, your turn (the match, its version, the
deadline and the actions allowed, as the seat's view offers them), hand ended (its result)
and settled (the player's net in the ledger); each about a hand names the table's hand
number.

An item's id is ``<xid>-<position>-<n>``: its event's place in the feed's order
(:mod:`service.store.feed`) and its index among that event's items."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any, Literal, NamedTuple, TypedDict

from ..game import State, deadline, decision, evolve, offered, replay, visible
from ..game.events import (
    Disconnected,
    HandDealt,
    HandEnded,
    PlayerJoined,
    PlayerLeft,
    SeatFreed,
    Settled,
    TableClosed,
)
from ..store import EventStore, Recent
from ..store.feed import Feed, FeedEvent

#: Events read per round trip.
BATCH = 200
#: How long a reader sleeps before reading again when committed events are held back
#: behind an older transaction that is still running.
HELD_SECONDS = 0.02
# The index -1 is the place before an event's first item: where a read that found nothing
# yet past its start resumes (a page's ``last_id`` may be one).
_ID = re.compile(r"^(\d{1,20})-(\d{1,20})-(-1|\d{1,3})$")


# The items, each kind with its fields: the one declaration of them, from which the API's
# schemas of the player's stream are derived (service/api/schemas.py). Each item also has
# its ``id`` and the ``at`` of its event (:meth:`PlayerFeed.items_of`).


class OfTable(TypedDict):
    table_id: str
    seat: int


class Seated(OfTable):
    type: Literal["seated"]
    ticket_id: str | None


class Leaving(OfTable):
    type: Literal["leaving"]
    hand_number: int | None


class LeftAnyTime(OfTable):
    type: Literal["left"]
    at_hand_end: bool


class Left(LeftAnyTime, total=False):
    """A seat left between hands, or freed at a hand's end (with its ``hand_number``;
    ``total=False`` rather than ``NotRequired``, which this module's string annotations
    hide from Python 3.11's TypedDict)."""

    hand_number: int


class Closed(OfTable):
    type: Literal["table_closed"]
    hands: int


class OfHand(TypedDict):
    match_id: str
    table_id: str | None
    hand_number: int | None
    version: int


class Dealt(OfHand):
    type: Literal["hand_started"]
    seat: int
    hand: list[str]


class YourTurn(OfHand):
    type: Literal["your_turn"]
    seat: int
    phase: str
    deadline: datetime
    actions: list[dict[str, Any]]


class TakenOver(OfHand):
    type: Literal["taken_over"]
    seat: int
    reason: str


class Ended(OfHand):
    type: Literal["hand_ended"]
    result: dict[str, Any]


class SettledItem(OfHand):
    type: Literal["settled"]
    net: str


Item = Seated | Leaving | Left | Closed | Dealt | YourTurn | TakenOver | Ended | SettledItem
#: Every kind of item, in the order a hand brings them.
ITEMS: tuple[type, ...] = (
    Seated,
    Dealt,
    YourTurn,
    TakenOver,
    Ended,
    SettledItem,
    Leaving,
    Left,
    Closed,
)


@dataclass(frozen=True, order=True)
class Cursor:
    """After the item ``index`` of the event at (xid, position)."""

    xid: int
    position: int
    index: int

    def __str__(self) -> str:
        return f"{self.xid}-{self.position}-{self.index}"

    @staticmethod
    def parse(text: str) -> Cursor | None:
        found = _ID.match(text)
        if found is None:
            return None
        return Cursor(int(found[1]), int(found[2]), int(found[3]))


class Step(NamedTuple):
    """A match's state before an event and after it."""

    before: State
    after: State


#: States after recent feed events kept by a process, for the next reads of those matches.
RECENT_STATES = 4096


class PlayerFeed:
    def __init__(self, store: EventStore, feed: Feed):
        self.store = store
        self.feed = feed
        #: (match, version) -> the match's state at that version, as :meth:`step_at` made
        #: it, the least recently used first: a poll reads on from where the last one
        #: stopped (its own or another seat's), and a match read from its start and
        #: replayed for each poll was most of what a read of the feed cost.
        self._recent: Recent[tuple[uuid.UUID, int], State] = Recent(RECENT_STATES)
        #: A transaction id the database has reached (a read's horizon, or the next
        #: transaction's id): a cursor at or below it is not from the future. Transaction
        #: ids only grow, so it needs no lock: a stale value only costs a query.
        self._reached = 0

    def from_future(self, cursor: Cursor) -> bool:
        """Whether the cursor is past anything that exists (no stream gave it): read after
        it, a stream would skip whatever commits until the database gets that far. Asked
        of the database only for a cursor past what this process's reads have reached
        (a poll's cursor rarely is: asking was a round trip of every poll)."""
        if cursor.xid <= self._reached:
            return False
        reached = self.feed.next_xid()
        self._reached = max(self._reached, reached)
        return cursor.xid > reached

    def now(self) -> Cursor:
        """A cursor before everything that commits from now on."""
        return Cursor(self.feed.horizon(), 0, 0)

    def items(
        self,
        player: str,
        after: Cursor | None,
        states: dict[uuid.UUID, State],
        until: int | None = None,
    ) -> tuple[list[dict[str, Any]], bool, Cursor | None]:
        """The items after ``after`` (from the start without it); whether more may be
        held back behind a running transaction; and where the next read may start (past
        the last item, and past the events already read that had none for the player).
        ``states`` keeps the matches' states from one call to the next (a stream's).
        ``until``: a horizon to read below instead of the present one."""
        if after is None:
            first = self.feed.first(player)
            if first is None:
                return [], False, None
            after = Cursor(*first, -1)
        # From the cursor's own event, whose items after its index are still to come.
        found, held, horizon = self.feed.read(player, after.xid, after.position, BATCH, until)
        self._reached = max(self._reached, horizon)
        items: list[dict[str, Any]] = []
        mine: list[dict[str, Any]] = []
        start = 0
        for fe in found:
            start, mine = self.items_after(player, after, fe, states)
            items += mine
        full = len(found) == BATCH
        if full:
            # After the last event read (an event with no item for the player: after its
            # item 0, which it does not have).
            last = found[-1]
            resume = max(
                after, Cursor(last.xid, last.stored.position, max(start + len(mine) - 1, 0))
            )
        else:
            # Everything of the player's below the horizon has been read.
            resume = max(after, Cursor(horizon, 0, 0), key=lambda c: (c.xid, c.position))
        return items, held or full, resume

    def items_after(
        self, player: str, after: Cursor, fe: FeedEvent, states: dict[uuid.UUID, State]
    ) -> tuple[int, list[dict[str, Any]]]:
        """The player's items from the event, an event from ``after``'s own on: of the
        cursor's own event only those after its index (those up to it were sent: a poll
        reads its cursor's event again, often a your_turn, whose actions are not derived
        again for nothing); and the index of the first."""
        same = (fe.xid, fe.stored.position) == (after.xid, after.position)
        start = after.index + 1 if same else 0
        return start, self.items_of(player, fe, self.step_at(fe, states), start)

    def step_at(self, fe: FeedEvent, states: dict[uuid.UUID, State]) -> Step | None:
        """The match's state before the event and after it (None for a table's event), from
        the state before it in ``states`` (else from the store); kept there for the next.
        The state after it is the one folded already when a read of any seat did (a match's
        events are read by each of its seats' readers)."""
        if fe.of_table:
            return None
        match_id = fe.stream_id
        known = states.get(match_id)
        version = fe.stored.version
        if known is None or known.version != version - 1:
            known = self._recent.get((match_id, version - 1))
        if known is None:
            stored = self.store.read(match_id, 0)
            known = replay(s.event for s in stored if s.version < version)
            self._recent.put((match_id, known.version), known)
        state = self._recent.get((match_id, version))
        if state is None:
            state = evolve(known, fe.stored.event)
            self._recent.put((match_id, version), state)
        states[match_id] = state
        return Step(known, state)

    def items_of(
        self, player: str, fe: FeedEvent, step: Step | None, start: int = 0
    ) -> list[dict[str, Any]]:
        """The player's items from the event, with their ids, from its item ``start`` on
        (those before it are not made); ``step``: the match's states around it
        (:meth:`step_at`)."""
        return [
            {**item, "id": str(Cursor(fe.xid, fe.stored.position, n)), "at": fe.stored.recorded_at}
            for n, item in enumerate(self._items_of(player, fe, step, start), start)
        ]

    def _items_of(
        self, player: str, fe: FeedEvent, step: Step | None, start: int
    ) -> Iterator[Item]:
        event = fe.stored.event
        if fe.of_table:
            yield from islice(
                _table_items(player, str(fe.stream_id), event, fe.ticket_id), start, None
            )
            return
        assert step is not None
        state = step.after
        match_id = fe.stream_id
        seat = next(
            (i for i, s in enumerate(state.seats) if s is not None and s.player == player), None
        )
        if seat is None:
            return
        where: OfHand = {
            "match_id": str(match_id),
            "table_id": None if fe.table_id is None else str(fe.table_id),
            "hand_number": fe.hand_number,
            "version": fe.stored.version,
        }
        # At most one item of the event itself, then at most a your_turn.
        told: Item | None = None
        if isinstance(event, HandDealt):
            shown = visible(event, seat)
            told = {"type": "hand_started", **where, "seat": seat, "hand": shown["hand"]}
        elif isinstance(event, HandEnded):
            told = {"type": "hand_ended", **where, "result": event.result.to_json()}
        elif isinstance(event, Settled):
            told = {"type": "settled", **where, "net": event.net[seat]}
        elif isinstance(event, Disconnected) and event.seat == seat:
            # The system plays the seat from now on (系统代打): the app offers resume.
            told = {"type": "taken_over", **where, "seat": seat, "reason": event.reason}
        if told is not None:
            if start == 0:
                yield told
            start -= 1
        # Once per decision: an event that leaves the seat's decision as it was (another seat
        # disconnected, or took its seat back) tells it nothing new.
        given = decision(state)
        if (
            start <= 0
            and fe.last_of_command
            and given is not None
            and given[0] == seat
            and given != decision(step.before)
        ):
            due = deadline(state, fe.stored.recorded_at)
            assert due is not None  # a decision is due: its seat has until then
            yield {
                "type": "your_turn",
                **where,
                "seat": seat,
                "phase": state.phase,
                "deadline": due,
                "actions": offered(state, seat),
            }


def _table_items(
    player: str, table_id: str, event: object, ticket_id: uuid.UUID | None
) -> Iterator[Item]:
    """The player's items from an event of its table."""
    if isinstance(event, PlayerJoined) and event.player == player:
        ticket = None if ticket_id is None else str(ticket_id)
        yield {"type": "seated", "table_id": table_id, "seat": event.seat, "ticket_id": ticket}
    elif isinstance(event, PlayerLeft) and event.player == player:
        if event.at_hand_end:
            # The seat is the player's until the hand is settled: "left" comes then.
            yield {
                "type": "leaving",
                "table_id": table_id,
                "seat": event.seat,
                "hand_number": event.number,
            }
        else:
            yield {"type": "left", "table_id": table_id, "seat": event.seat, "at_hand_end": False}
    elif isinstance(event, SeatFreed) and event.player == player:
        yield {
            "type": "left",
            "table_id": table_id,
            "seat": event.seat,
            "at_hand_end": True,
            "hand_number": event.number,
        }
    elif isinstance(event, TableClosed) and player in event.players:
        seat = event.players.index(player)
        yield {"type": "table_closed", "table_id": table_id, "seat": seat, "hands": event.hands}
