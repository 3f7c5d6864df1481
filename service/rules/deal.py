"""The verifiable deal of docs/hand-record.md: a fixed function of a 32-byte seed.

The commitment (SHA-256 of the seed) is published when the hand is dealt and the seed
when it ends, so anyone can re-derive the deal and check it.
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from .cards import DECK, Card
from .errors import InvalidNotation

SEED_BYTES = 32
SEATS = 4
HAND_SIZE = 25
BOTTOM_SIZE = 8
DEALT = SEATS * HAND_SIZE


def new_seed() -> bytes:
    """A seed from a cryptographically secure source."""
    return secrets.token_bytes(SEED_BYTES)


def parse_seed(text: str) -> bytes:
    """A seed from its 64 hex characters."""
    try:
        seed = bytes.fromhex(text)
    except (ValueError, TypeError):
        raise InvalidNotation("a seed is 64 hex characters (32 bytes)") from None
    if len(seed) != SEED_BYTES:
        raise InvalidNotation(f"a seed is 32 bytes (64 hex characters), not {len(seed)}")
    return seed


def commitment(seed: bytes) -> str:
    return hashlib.sha256(seed).hexdigest()


#: A SHA-256 block as eight big-endian unsigned 32-bit words.
_WORDS = struct.Struct(">8I")


class RandomStream:
    """The random stream: blocks SHA-256(seed ‖ k as 8 bytes big-endian), read as
    big-endian unsigned 32-bit integers."""

    def __init__(self, seed: bytes):
        self._words = self._generate(seed)

    @staticmethod
    def _generate(seed: bytes) -> Iterator[int]:
        k = 0
        while True:
            yield from _WORDS.unpack(hashlib.sha256(seed + k.to_bytes(8, "big")).digest())
            k += 1

    def uniform(self, n: int) -> int:
        """An integer in [0, n), by rejection so that every value is equally likely."""
        limit = 2**32 - (2**32 % n)
        while True:
            u = next(self._words)
            if u < limit:
                return u % n


@dataclass(frozen=True)
class Deal:
    seed: bytes
    hands: tuple[tuple[Card, ...], ...]
    bottom: tuple[Card, ...]
    marked_card: Card
    marked_seat: int

    @property
    def commitment(self) -> str:
        return commitment(self.seed)

    @property
    def seed_hex(self) -> str:
        return self.seed.hex()


def deal(seed: bytes) -> Deal:
    """Shuffles the 108 cards with the seed and deals 25 to each seat, 8 to the bottom."""
    if len(seed) != SEED_BYTES:
        raise InvalidNotation(f"a seed is 32 bytes, not {len(seed)}")
    stream = RandomStream(seed)
    deck = list(DECK)
    for i in range(len(deck) - 1, 0, -1):
        j = stream.uniform(i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    hands = tuple(tuple(deck[seat:DEALT:SEATS]) for seat in range(SEATS))
    m = stream.uniform(DEALT)
    return Deal(seed, hands, tuple(deck[DEALT:]), deck[m], m % SEATS)
