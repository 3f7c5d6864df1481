"""How fast a rating settles (docs/ratings.md): the house bot's levels play each other on
the pure engine, each hand at a seating drawn at random, rated after each hand by the
rating code of the service (``service/game/ratings.py``); prints after how many hands
``hard`` ranks above ``normal`` and ``normal`` above ``easy`` by conservative rating, and
stays so to the end of the run.

    python benchmarks/ratings_bench.py [--hands N] [--seed S] [--budget-ms MS] [--hard NAME]
        [--smoke]
    python benchmarks/ratings_bench.py --model RUNS [--hands N] [--landlord-wins NAME=P,...]

The four seats: ``easy``, ``normal``, ``hard`` and a second ``normal`` (the hands need
four players). ``hard`` searches ``--budget-ms`` of CPU time per decision; ``--hard``
seats a variant of it there instead (``ddz simulate --pit``'s names, docs/bot.md). It
prints, too, how often each won as landlord and as a farmer (a rating counts wins), and
how often each landlord won by its estimated chance from the 25 cards it was dealt (the
chance the bot bids by, docs/bot.md): what a bid could change.

With ``--model`` no hand is played: each hand's landlord is drawn among the players of
``--landlord-wins`` and wins with its chance there (as a run measured them), and it
prints in how many of ``RUNS`` runs ``hard`` ended above ``normal``: how far the ladder's
order at one hand is chance, for a given difference in wins.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from common import command_line, parse

from service.game import MatchSettings
from service.game.bot.evaluation import BAND, band_of, landlord_chance
from service.game.bot.levels import contestant
from service.game.ratings import RatedHand, Rating, rate
from service.game.settlement import LANDLORD
from service.game.simulate import dealt, hand_seed, play_hand, won_share
from service.rules.cards import counts_of

PLAYERS = ("easy", "normal", "hard", "normal-2")
#: The orders measured: each (higher, lower).
PAIRS = (("normal", "easy"), ("hard", "normal"))


#: One hand's result: the landlord's seat and whether it won.
Outcome = tuple[int, bool]


@dataclass
class Ladder:
    """A run's ratings in ``ruleset``, and for each pair since when it has been in order
    (None: not now) and in how many hands."""

    ruleset: str
    ratings: dict[str, Rating] = field(default_factory=dict)
    since: dict[tuple[str, str], int | None] = field(
        default_factory=lambda: dict.fromkeys(PAIRS, None)
    )
    above: dict[tuple[str, str], int] = field(default_factory=lambda: dict.fromkeys(PAIRS, 0))

    def rate(self, hand: int, seated: list[str], outcome: Outcome) -> None:
        landlord, landlord_won = outcome
        rated = RatedHand(self.ruleset, tuple(seated), landlord, landlord_won, frozenset())
        for change in rate(rated, self.ratings):
            self.ratings[change.player] = change.after
        c = self.conservative()
        for higher, lower in PAIRS:
            if c[higher] > c[lower]:
                self.above[higher, lower] += 1
                self.since[higher, lower] = self.since[higher, lower] or hand
            else:
                self.since[higher, lower] = None

    def conservative(self) -> dict[str, float]:
        return {p: self.ratings[p].conservative for p in PLAYERS}


def modelled(
    runs: int, hands: int, seed: str, landlord_wins: dict[str, float], ruleset: str
) -> None:
    """``runs`` ladders of ``hands`` hands whose results are drawn: the landlord one of
    the players of ``landlord_wins`` at random, winning with its chance there. It says
    how often a measured difference in wins puts ``hard`` above ``normal`` at the end."""
    draw = random.Random(seed)
    landlords = sorted(landlord_wins)
    ends = 0
    for _ in range(runs):
        ladder = Ladder(ruleset)
        for hand in range(1, hands + 1):
            seated = list(PLAYERS)
            draw.shuffle(seated)
            landlord = draw.choice(landlords)
            won = draw.random() < landlord_wins[landlord]
            ladder.rate(hand, seated, (seated.index(landlord), won))
        ends += ladder.since["hard", "normal"] is not None
    chances = ", ".join(f"{p} {landlord_wins[p]:.1%}" for p in landlords)
    print(
        f"landlords winning {chances}: hard above normal at hand {hands}"
        f" in {ends} of {runs} runs ({ends / runs:.1%})"
    )


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--hands", type=int, default=1500)
    parser.add_argument("--seed", default="ratings")
    parser.add_argument("--budget-ms", type=float, default=10.0)
    parser.add_argument("--hard", default="hard", help="the player at the hard seat")
    parser.add_argument(
        "--model",
        metavar="RUNS",
        type=int,
        default=0,
        help="draw the hands' results instead of playing them, RUNS runs",
    )
    parser.add_argument(
        "--landlord-wins",
        default="hard=0.875,normal=0.65,normal-2=0.65",
        help="--model: each landlord's chance of winning, NAME=P,...",
    )
    args = parse(parser, hands=4, budget_ms=1.0)
    table = MatchSettings.build()
    if args.model:
        chances = dict(item.split("=") for item in args.landlord_wins.split(","))
        wins = {p: float(v) for p, v in chances.items()}
        modelled(args.model, args.hands, args.seed, wins, table.ruleset.name)
        return
    players = {
        name: contestant(
            args.hard if name == "hard" else name.removesuffix("-2"),
            seed=f"{args.seed}:{name}",
            budget=args.budget_ms / 1000,
            clock=time.process_time,
        )
        for name in PLAYERS
    }
    # Each player's hands won and played, as landlord and as a farmer; and as landlord by
    # the band of its chance from the cards it was dealt.
    record = {name: [0, 0, 0, 0] for name in PLAYERS}
    by_chance: dict[str, dict[int, list[int]]] = {name: {} for name in PLAYERS}
    ladder = Ladder(table.ruleset.name)
    draw = random.Random(args.seed)
    started = time.perf_counter()
    for hand in range(1, args.hands + 1):
        seated = list(PLAYERS)
        draw.shuffle(seated)
        seed = hand_seed(args.seed, hand)
        _, state = play_hand(table, seed, [players[p] for p in seated])
        assert state.result is not None and state.landlord is not None
        landlord_won = state.result.outcome.winner == LANDLORD
        # The farmers bombing without limit, as after 头撂 (the first bidder's bid of 3).
        chance = landlord_chance(
            counts_of(dealt(table, seed, []).hands[state.landlord]),
            table.ruleset.joker_bomb,
            with_bottom=False,
            unlimited=1.0,
        )
        band = by_chance[seated[state.landlord]].setdefault(band_of(chance), [0, 0])
        band[0] += landlord_won
        band[1] += 1
        for seat, name in enumerate(seated):
            landlord = seat == state.landlord
            at = 0 if landlord else 2
            record[name][at] += landlord_won == landlord
            record[name][at + 1] += 1
        ladder.rate(hand, seated, (state.landlord, landlord_won))
        if hand % 100 == 0 or hand == args.hands:
            c = ladder.conservative()
            print(
                f"after {hand:5d} hands: "
                + "  ".join(
                    f"{p} {c[p]:6.2f} (mu {ladder.ratings[p].mu:5.2f},"
                    f" sigma {ladder.ratings[p].sigma:4.2f})"
                    for p in sorted(PLAYERS, key=lambda p: -c[p])
                ),
                flush=True,
            )
    seconds = time.perf_counter() - started
    print(
        f"{args.hands} hands in {seconds:.0f} s, {args.hard} searching {args.budget_ms:g} ms"
        " a decision"
    )
    for name in PLAYERS:
        won, led, farmed, farmer = record[name]
        print(
            f"{name} won {won_share(won, led)} as landlord, {won_share(farmed, farmer)} as a farmer"
        )
    print("won as landlord by the chance from the 25 cards dealt (farmers bombing freely):")
    for name in PLAYERS:
        bands = sorted(by_chance[name].items())
        shares = [f"{b * BAND:.2f}-{(b + 1) * BAND:.2f} {won} of {led}" for b, (won, led) in bands]
        print(f"  {name}: {', '.join(shares) or 'never landlord'}")
    for higher, lower in PAIRS:
        share = ladder.above[higher, lower] / args.hands
        settled = ladder.since[higher, lower]
        print(
            f"{higher} above {lower} by conservative rating: "
            + (
                f"from hand {settled} to the end of the run"
                if settled is not None
                else "not at the end of the run"
            )
            + f"; after {share:.0%} of the hands"
        )


if __name__ == "__main__":
    main()
