"""What each seat may see (docs/rules.md §6): its own hand; every seat's card count; the marked
card and its holder; every bid, pass and play; the bottom only as landlord; the
landlord's hand after 摊打; the reported cards after 报到. Operators see everything.
Every play is public, so the view carries the hand's ``history`` of plays and passes and
what follows from it: the cards each seat has not seen (``unseen``, by rank) and the
bombs each seat may still play.
Views show each set of cards sorted, by rank then suit; events keep them as they came.

:func:`seat_view` is the one place that decides what a seat sees of the state (bots get
exactly this), and :func:`visible` what it sees of each event.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from types import UnionType
from typing import Any, NoReturn, Union, get_args, get_origin, get_type_hints

from ..rules import Card, Combination, legal_plays
from ..rules.cards import COPIES, NUM_RANKS, ONE_DECK, RANKS, Counts, counts_of
from .actions import offered
from .events import Event, HandDealt, LandlordChosen, MatchCreated
from .settings import MatchSettings
from .settlement import HandResult
from .state import ENDED, State, Turn, built, handed, open_bids, replay

#: Pass as ``seat`` to see everything, as an operator does.
OPERATOR = "operator"


@dataclass(frozen=True)
class SeatInfo:
    player: str | None
    bot: bool
    disconnected: bool
    cards: int  # how many cards the seat holds
    bombs_played: int
    #: How many more bombs it may play (None: no limit, or no landlord yet).
    bombs_left: int | None = None


@dataclass(frozen=True)
class SeatView:
    """A seat's view of a match: everything a player (or a bot) of that seat may know.

    Not slotted: :func:`seat_view` builds each view (one a simulated turn) by handing it
    its dictionary, for a frozen ``__init__`` sets its 31 fields one call at a time and
    took a sixth of a turn; that dictionary's keys are checked as the module loads.
    """

    match_id: str
    phase: str
    version: int
    seat: int | None
    table: MatchSettings
    seats: tuple[SeatInfo | None, ...]
    commitment: str | None
    marked_card: Card | None
    marked_seat: int | None
    hand: tuple[Card, ...]
    bids: tuple[int | None, ...]
    landlord: int | None
    bid: int | None
    bottom: tuple[Card, ...] | None  # the landlord's own bottom cards; None for others
    first_bid_three: bool
    show_hand: bool | None
    landlord_hand: tuple[Card, ...] | None  # after 摊打
    report: str | None
    reported_cards: tuple[Card, ...]
    locked: frozenset[int]  # the reported ranks that bind the viewing seat
    turn: int | None
    lead: Combination | None  # the play to beat; None when the seat to act leads
    lead_seat: int | None
    lead_cards: tuple[Card, ...]
    passes: int
    bombs: int
    bombs_left: int | None
    result: HandResult | None
    seed: str | None  # revealed when the hand has ended
    history: tuple[Turn, ...] = ()  # every play and pass of the hand, in order
    played: Counts = (0,) * NUM_RANKS  # the cards of the history, by rank

    @property
    def role(self) -> str | None:
        if self.landlord is None or self.seat is None:
            return None
        return "landlord" if self.seat == self.landlord else "farmer"

    @property
    def unseen(self) -> Counts:
        """By rank, the cards the viewing seat has neither in its hand nor seen played:
        those the other seats hold (and the bottom, until the landlord takes it)."""
        held = counts_of(self.hand)
        return tuple(COPIES[r] - held[r] - self.played[r] for r in range(NUM_RANKS))

    def bid_choices(self) -> list[int]:
        """The bids open now: a pass (0), or any value above the highest bid so far."""
        return list(open_bids(max((b or 0) for b in self.bids)))

    def plays(self) -> Iterator[Combination]:
        """Every legal play of the viewing seat now, by ranks (it leads when ``lead`` is
        None); :func:`~service.rules.pick_cards` gives the cards of the chosen one."""
        return legal_plays(
            self.hand,
            self.lead,
            ruleset=self.table.ruleset,
            bombs_left=self.bombs_left,
            locked=self.locked,
        )

    def to_json(self, actions: list[dict[str, Any]]) -> dict[str, Any]:
        """The view as the API shows it, with the ``actions`` the seat is offered: each
        field by its type (:data:`SHOWN_BY_TYPE`), then the others their own way."""
        values = self.__dict__
        document = {name: values[name] for name in _AS_THEY_ARE}
        for name, show in _CONVERTED:
            document[name] = show(values[name])
        landlord = self.landlord
        document.update(self.table.settings())
        document["role"] = self.role
        document["seats"] = [
            None
            if info is None
            else {
                "seat": i,
                "player": info.player,
                "bot": info.bot,
                "disconnected": info.disconnected,
                "cards": info.cards,
                "bombs_played": info.bombs_played,
                "bombs_left": info.bombs_left,
                "role": None if landlord is None else ("landlord" if i == landlord else "farmer"),
            }
            for i, info in enumerate(self.seats)
        ]
        document["lead"] = (
            None
            if self.lead is None
            else {
                "seat": self.lead_seat,
                "cards": codes_in_order(self.lead_cards),
                "type": self.lead.type.value,
                "rank": self.lead.rank,
            }
        )
        document["history"] = _history_documents(self.history)
        document["unseen"] = {RANKS[r]: n for r, n in enumerate(self.unseen)}
        document["actions"] = actions
        document["result"] = None if self.result is None else self.result.to_json()
        return document


_VIEW_FIELDS = frozenset(field.name for field in fields(SeatView))


def _code(card: Card | None) -> str | None:
    return None if card is None else card.code


#: Cards are shown in the deck's order: by rank, then suit (S H C D).
_ORDER = {card: i for i, card in enumerate(ONE_DECK)}


def codes_in_order(cards: Iterable[Card] | None) -> list[str] | None:
    """The cards' codes in the order the seats see a hand (the console's replay too)."""
    return None if cards is None else [card.code for card in sorted(cards, key=_ORDER.__getitem__)]


def _listed(items: tuple[Any, ...] | None) -> list[Any] | None:
    return None if items is None else list(items)


#: The fields that :meth:`SeatView.to_json` shows its own way, or not at all (``locked``
#: binds the viewing seat's plays alone, and the reported cards show it; ``played`` is
#: shown as ``unseen``).
_SHOWN_OTHERWISE = frozenset(
    {"table", "seats", "locked", "lead", "lead_seat", "lead_cards", "result", "history", "played"}
)
#: Every other field of a view, with its type: the API shows each by its type alone (a
#: card by its code, cards by their codes in the deck's order, any other tuple as a list,
#: the rest as they are), and its schema of a view is derived from these types, so that a
#: new field of a view needs nothing more than its place in :func:`seat_view`.
SHOWN_BY_TYPE: dict[str, Any] = {
    name: hint for name, hint in get_type_hints(SeatView).items() if name not in _SHOWN_OTHERWISE
}


def _shown(hint: Any) -> Callable[[Any], Any] | None:
    """How a value of type ``hint`` is shown (None: as it is)."""
    inner = [arg for arg in get_args(hint) if arg is not type(None)]
    if get_origin(hint) in (Union, UnionType) and len(inner) == 1:
        hint = inner[0]
    if hint is Card:
        return _code
    if get_origin(hint) is tuple:
        return codes_in_order if get_args(hint)[0] is Card else _listed
    return None


_AS_THEY_ARE = tuple(name for name, hint in SHOWN_BY_TYPE.items() if _shown(hint) is None)
_CONVERTED = tuple(
    (name, show) for name, hint in SHOWN_BY_TYPE.items() if (show := _shown(hint)) is not None
)


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        "a view's history is shared with the other views of its hand: change a copy "
        "(dict(turn), list(cards))"
    )


class _SharedTurn(dict[str, Any]):
    """A turn of a hand's history as the views show it: the same object in every view that
    shows the turn, hence read-only. orjson and json write it as the dict it is; a copy,
    by ``dict()`` or the copy module, is a plain dict."""

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self),)


class _SharedCards(list[str]):
    """A shared turn's cards: read-only, as the turn is."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)


def _turn_document(turn: Turn) -> _SharedTurn:
    cards = _SharedCards(codes_in_order(turn.cards) or ())
    return _SharedTurn(seat=turn.seat, action="pass" if turn.passed else "play", cards=cards)


#: Each history as shown, by the identity of its last turn: the history and its documents,
#: the least recently shown first. A hand's history grows by a turn a play, so its
#: documents are those of the longest history shown before that it extends, plus the turns
#: since (a hand is some 130 turns: rendered whole, a view's history took three times the
#: rest of it, mostly in the garbage collector's passes over the many new objects). Views
#: of a match share these documents, read-only; a view's list is its own. The entry holds
#: its history, so the id is not reused while it is there.
_HISTORIES: OrderedDict[int, tuple[tuple[Turn, ...], list[_SharedTurn]]] = OrderedDict()
#: Histories remembered at most, the least recently shown forgotten first: about two for
#: each match a process keeps in play (``DDZ_STATE_CACHE_SIZE``). A cache of 65,536 turns
#: beside it, forgotten all at once when full, held some 36 MiB of an API process at its
#: peak, and the process's memory followed its saw-tooth (docs/scaling.md).
_HISTORIES_REMEMBERED = 1 << 12
_HISTORIES_LOCK = threading.Lock()


def _history_documents(history: tuple[Turn, ...]) -> list[_SharedTurn]:
    if not history:
        return []
    known: list[_SharedTurn] = []
    with _HISTORIES_LOCK:
        # From the end back: equal histories are the same turns (compared by identity
        # first), and the one shown last of this hand is most often a turn or two back.
        for length in range(len(history), 0, -1):
            key = id(history[length - 1])
            shown = _HISTORIES.get(key)
            if shown is not None and len(shown[0]) == length and shown[0] == history[:length]:
                _HISTORIES.move_to_end(key)
                known = shown[1]
                break
    if len(known) == len(history):
        return list(known)
    documents = [*known, *map(_turn_document, history[len(known) :])]
    with _HISTORIES_LOCK:
        _HISTORIES[id(history[-1])] = (history, documents)
        while len(_HISTORIES) > _HISTORIES_REMEMBERED:
            _HISTORIES.popitem(last=False)
    return list(documents)


#: Each seat's info as last shown, by what it holds (the seat, whether it is disconnected,
#: its cards, bombs played and bombs left): a seat's info changes only when it plays, and
#: most views show the same four again.
_INFOS: dict[tuple[Any, ...], SeatInfo] = {}
#: Infos remembered at most; then the cache starts again.
_INFOS_REMEMBERED = 1 << 14


#: The last infos made, with the state's tuples they were made of (compared by identity:
#: a state after a pass, or another seat's view of the same state, shares them).
_LAST_INFOS: tuple[object, ...] = ()


def _seat_infos(state: State) -> tuple[SeatInfo | None, ...]:
    global _LAST_INFOS
    seats, disconnected, hands = state.seats, state.disconnected, state.hands
    bombs_played, bomb_allowance = state.bombs_played, state.bomb_allowance
    last = _LAST_INFOS
    if (
        last
        and last[2] is hands
        and last[0] is seats
        and last[1] is disconnected
        and last[3] is bombs_played
        and last[4] is bomb_allowance
    ):
        return last[5]  # type: ignore[return-value]
    infos = _infos(state)
    _LAST_INFOS = (seats, disconnected, hands, bombs_played, bomb_allowance, infos)
    return infos


def _infos(state: State) -> tuple[SeatInfo | None, ...]:
    # The keys are made and looked up without a call of Python's per seat: a view a turn
    # made the four infos a tenth of a simulated turn.
    keys = tuple(
        zip(
            state.seats,
            state.disconnected,
            map(len, state.hands),
            state.bombs_played,
            state.bomb_allowance,
        )
    )
    infos = tuple(map(_INFOS.get, keys))
    if all(infos):  # not ``None in``: that asks each info's __eq__
        return infos
    if len(_INFOS) >= _INFOS_REMEMBERED:
        _INFOS.clear()
    made = []
    # Only what this call made or found is returned: another thread may clear the cache
    # between any two lines (a SeatInfo is frozen, so sharing one is safe).
    for key, info in zip(keys, infos):
        seat, disconnected, cards, bombs_played, bombs_left = key
        if info is None and seat is not None:
            info = SeatInfo(seat.player, seat.bot, disconnected, cards, bombs_played, bombs_left)
            _INFOS[key] = info
        made.append(info)
    return tuple(made)


def seat_view(state: State, seat: int | str | None) -> SeatView:
    """The state as ``seat`` may see it; ``None`` is an onlooker with no seat,
    :data:`OPERATOR` sees everything."""
    return handed(SeatView, _seen(state, seat))


def _seen(state: State, seat: int | str | None) -> dict[str, Any]:
    """The fields of ``seat``'s view of ``state``: one literal, whose keys are the same
    for every state and seat, checked once below."""
    operator = seat == OPERATOR
    ended = state.phase == ENDED
    own = seat if isinstance(seat, int) else None  # the viewing seat, if it has one
    landlord = state.landlord
    hand = state.hands[own] if own is not None else ()
    lead = state.lead
    assert state.match_id is not None and state.table is not None, "a match is seen once created"
    return {
        "match_id": state.match_id,
        "phase": state.phase,
        "version": state.version,
        "seat": own,
        "table": state.table,
        "seats": _seat_infos(state),
        "commitment": state.commitment,
        "marked_card": state.marked_card,
        "marked_seat": state.marked_seat,
        "hand": hand,
        "bids": state.bids,
        "landlord": landlord,
        "bid": state.bid,
        "bottom": state.bottom if operator or (landlord is not None and seat == landlord) else None,
        "first_bid_three": state.first_bid_three,
        "show_hand": state.show_hand,
        "landlord_hand": state.hands[landlord]
        if landlord is not None and (state.show_hand or operator)
        else None,
        "report": state.report,
        "reported_cards": state.reported_cards,
        "locked": state.locks(own),
        "turn": state.turn,
        "lead": lead,
        "lead_seat": state.lead_seat if lead is not None else None,
        "lead_cards": state.lead_cards if lead is not None else (),
        "passes": state.passes,
        "bombs": state.bombs,
        "bombs_left": state.bomb_allowance[own] if own is not None else None,
        "result": state.result,
        "seed": state.seed if ended or operator else None,
        "history": state.history,
        "played": state.played,
    }


# A view with a field left out, or one it does not have, fails here, as the module loads.
built(
    SeatView,
    _seen(replay([MatchCreated("checked", MatchSettings.build())]), OPERATOR),
    _VIEW_FIELDS,
)


def view(state: State, seat: int | str | None) -> dict[str, Any]:
    """The JSON view of ``seat`` (see :func:`seat_view`); the operator's adds every hand."""
    document = seat_view(state, seat).to_json(
        offered(state, seat if isinstance(seat, int) else None)
    )
    if seat == OPERATOR:
        document["hands"] = [codes_in_order(hand) for hand in state.hands]
    return document


#: What a seat sees of an event in place of what it may not see (an operator sees every
#: event whole), by event: the fields taken out, and those put in with their types. The
#: API's schema of each event's payload is derived from the event's fields and these.
HIDDEN: dict[type[Event], tuple[str, ...]] = {HandDealt: ("seed", "hands", "bottom")}
SHOWN_INSTEAD: dict[type[Event], dict[str, Any]] = {
    # The seat's own hand (None for an onlooker), and every seat's count of cards.
    HandDealt: {"hand": tuple[Card, ...] | None, "cards": tuple[int, ...]},
}
#: Fields that only the seat the event names sees; the other seats see them as None.
OWN: dict[type[Event], tuple[str, ...]] = {LandlordChosen: ("bottom",)}


def visible(event: Event, seat: int | str | None) -> dict[str, Any]:
    """The event as ``seat`` may see it, with its envelope (``type``, ``version``)."""
    document = event.to_json()
    if seat == OPERATOR:
        return document
    kind = type(event)
    for name in HIDDEN.get(kind, ()):
        del document[name]
    if isinstance(event, HandDealt):
        document["hand"] = [c.code for c in event.hands[seat]] if isinstance(seat, int) else None
        document["cards"] = [len(hand) for hand in event.hands]
    if seat != getattr(event, "seat", None):
        for name in OWN.get(kind, ()):
            document[name] = None
    return document
