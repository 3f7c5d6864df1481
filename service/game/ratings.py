"""Ratings (docs/ratings.md): a measure of each player's strength per ruleset, from the
hands it played, by the Weng-Lin Bayesian model with Plackett-Luce (the ``openskill``
library): each rating is a belief, a mean ``mu`` and a deviation ``sigma``; the
conservative rating ``mu - 3 sigma`` orders the leaderboards.

A hand is a game of two teams: the landlord against the farmers. The landlord plays alone
against three and wins or loses three times a farmer's stake (docs/rules.md §5), so it
stands in its team three times (one for each farmer it plays against): the two teams are
of equal strength when the four players are, and the landlord's mean moves by the change
of its team, each farmer's by a third of its own. A seat the system played after its
player disconnected (a missed deadline, or a leave) counts as that player's loss whatever
its team did. System bot seats are no rated players: they play at the model's prior
rating, and nothing of theirs is kept.

Fair play (:func:`fairly_rated`): a hand rates only those whose opponents nobody chose, at
a table the lobby made: the people at its quick match, the bot accounts on its ladder.
Anyone else plays at the prior, as a system bot's seat does, and keeps nothing; so does
everyone in a hand whose rating an operator voided.

Pure: the store keeps the ratings, the application applies each settled hand once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from openskill.models import PlackettLuce, PlackettLuceRating

from .events import Disconnected, Event, HandEnded, MatchCreated, SeatTaken
from .settlement import LANDLORD

#: The model and its parameters: openskill's defaults (mu 25, sigma 25/3, beta 25/6, tau
#: 25/300, kappa 0.0001), written out so that a new version of the library cannot change
#: them unseen.
MODEL = PlackettLuce(mu=25.0, sigma=25.0 / 3.0, beta=25.0 / 6.0, kappa=0.0001, tau=25.0 / 300.0)
#: How many times the landlord stands in its team.
LANDLORD_WEIGHT = 3
#: A rating is provisional until its player has played this many rated hands.
PROVISIONAL_HANDS = 20
#: How many deviations below the mean the conservative rating is.
CONSERVATIVE_Z = 3.0


@dataclass(frozen=True)
class Rating:
    """A player's rating in one ruleset: the model's belief and the hands it comes from."""

    mu: float = MODEL.mu
    sigma: float = MODEL.sigma
    hands: int = 0

    @property
    def conservative(self) -> float:
        """The rating the leaderboards order by: the player is this strong or stronger
        with a probability of about 99.9 %."""
        return self.mu - CONSERVATIVE_Z * self.sigma

    @property
    def provisional(self) -> bool:
        return self.hands < PROVISIONAL_HANDS


@dataclass(frozen=True)
class RatedHand:
    """What a rating needs of an ended hand: its ruleset, each seat's player (None: a
    system bot), the landlord, who won, and the seats the system played after their
    player disconnected."""

    ruleset: str
    players: tuple[str | None, ...]
    landlord: int
    landlord_won: bool
    disconnected: frozenset[int]

    @property
    def rated(self) -> list[str]:
        """The rated players (no system bot), in seat order."""
        return [p for p in self.players if p is not None]


@dataclass(frozen=True)
class Change:
    """One player's rating before and after a hand, and whether the hand counted as won."""

    player: str
    before: Rating
    after: Rating
    won: bool


#: The lobby's tables (see :class:`Terms`): a quick match's, which rates people, and the
#: ladder's, which rates bot accounts.
QUICK_MATCH, LADDER = "quick_match", "ladder"


@dataclass(frozen=True)
class Terms:
    """What decides whom a settled hand rates: the kind of lobby table that dealt it
    (:data:`QUICK_MATCH`, :data:`LADDER`; None: a table players made, or a match no table
    dealt), whether an operator voided its rating, and which of its players are bot
    accounts."""

    lobby: str | None
    voided: bool
    bot_accounts: frozenset[str]

    def rates(self, player: str) -> bool:
        if self.voided or self.lobby is None:
            return False
        return (player in self.bot_accounts) == (self.lobby == LADDER)


def fairly_rated(hand: RatedHand, terms: Terms) -> RatedHand:
    """The hand with only the players it rates under ``terms``; the others' seats are as
    a system bot's (the prior, nothing kept, no loss for a disconnect)."""
    players = tuple(p if p is not None and terms.rates(p) else None for p in hand.players)
    kept = frozenset(s for s in hand.disconnected if players[s] is not None)
    return replace(hand, players=players, disconnected=kept)


def rated_hand(events: Iterable[Event]) -> RatedHand | None:
    """The hand of a match's events, once it has ended (None before)."""
    ruleset = ""
    players: list[str | None] = [None, None, None, None]
    disconnected: set[int] = set()
    for event in events:
        if isinstance(event, MatchCreated):
            ruleset = event.table.ruleset.name
        elif isinstance(event, SeatTaken):
            players[event.seat] = event.player
        elif isinstance(event, Disconnected):
            disconnected.add(event.seat)
        elif isinstance(event, HandEnded):
            outcome = event.result.outcome
            return RatedHand(
                ruleset,
                tuple(players),
                outcome.landlord,
                outcome.winner == LANDLORD,
                frozenset(s for s in disconnected if players[s] is not None),
            )
    return None


def rate(hand: RatedHand, before: Mapping[str, Rating]) -> list[Change]:
    """Each rated player's change for the hand, from the ratings ``before`` it (a player
    missing there has the prior)."""
    ratings = [
        Rating() if player is None else before.get(player, Rating()) for player in hand.players
    ]
    outcome = _rated(hand, ratings, hand.landlord_won)
    # A disconnected seat of the winning side lost: its change is its team's in a loss.
    if any(_won(hand, seat, hand.landlord_won) for seat in hand.disconnected):
        flipped = _rated(hand, ratings, not hand.landlord_won)
        outcome = {
            seat: flipped[seat] if seat in hand.disconnected else new
            for seat, new in outcome.items()
        }
    changes = []
    for seat, player in enumerate(hand.players):
        if player is None:
            continue
        mu, sigma = outcome[seat]
        old = ratings[seat]
        won = _won(hand, seat, hand.landlord_won) and seat not in hand.disconnected
        changes.append(Change(player, old, Rating(mu, sigma, old.hands + 1), won))
    return changes


def _won(hand: RatedHand, seat: int, landlord_won: bool) -> bool:
    return (seat == hand.landlord) == landlord_won


def _rated(
    hand: RatedHand, ratings: list[Rating], landlord_won: bool
) -> dict[int, tuple[float, float]]:
    """Each seat's (mu, sigma) after the hand with that outcome."""
    farmers = [s for s in range(len(ratings)) if s != hand.landlord]
    landlord = ratings[hand.landlord]
    teams = [
        [_model(landlord) for _ in range(LANDLORD_WEIGHT)],
        [_model(ratings[s]) for s in farmers],
    ]
    new_landlord, new_farmers = MODEL.rate(teams, ranks=[0, 1] if landlord_won else [1, 0])
    # The landlord's copies moved alike: its mean by all of them, its deviation as one's.
    copy = new_landlord[0]
    after = {hand.landlord: (landlord.mu + LANDLORD_WEIGHT * (copy.mu - landlord.mu), copy.sigma)}
    for seat, new in zip(farmers, new_farmers, strict=True):
        after[seat] = (new.mu, new.sigma)
    return after


def _model(rating: Rating) -> PlackettLuceRating:
    return MODEL.rating(mu=rating.mu, sigma=rating.sigma)
