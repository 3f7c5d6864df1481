#!/usr/bin/env python3
"""An example engine for ddz (docs/bot-protocol.md): the smallest thing that plays.

It reads one JSON message per line on stdin and answers on stdout. It never bids (unless
it must), never plays face up, declines 报到, leads its lowest card as a single, beats a
single with its lowest higher single, and passes everything else. It needs nothing but
Python: run it with `ddz arena --engine "python3 examples/engine.py"` or
`ddz bridge --engine "python3 examples/engine.py" --token ...`.
"""

import json
import sys

#: Card ranks from low to high; a card code is its suit then its rank (S3, HT, …) or a joker.
ORDER = ["3", "4", "5", "6", "7", "8", "9", "T", "J", "Q", "K", "A", "2", "BJ", "RJ"]


def rank(card):
    return ORDER.index(card if card in ("BJ", "RJ") else card[1:])


def choose(view, actions):
    """The command body for this turn, from the view and the actions it offers."""
    offered = {action["action"]: action for action in actions}
    for name, action in offered.items():
        # Bid, 摊打, 报到 or any other decision: its least choice (0, no 摊打, decline).
        if name not in ("play", "pass"):
            return {
                "action": name,
                **({"value": min(action["choices"])} if "choices" in action else {}),
            }
    hand = sorted(view["hand"], key=rank)
    lead = view["lead"]
    if lead is None:  # we lead: the lowest card
        return {"action": "play", "cards": hand[:1]}
    if len(lead["cards"]) == 1 and "play" in offered:
        higher = [card for card in hand if rank(card) > rank(lead["cards"][0])]
        if higher:
            return {"action": "play", "cards": higher[:1]}
    return {"action": "pass"}


def main():
    for line in sys.stdin:
        message = json.loads(line)
        kind = message["type"]
        if kind == "hello":
            answer = {"type": "hello", "protocol": 1, "name": "lowest-single", "author": "ddz"}
        elif kind == "decide":
            answer = {"type": "action", "action": choose(message["view"], message["actions"])}
        elif kind == "quit":
            return
        else:  # options, new_hand, hand_over: nothing to say
            continue
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
