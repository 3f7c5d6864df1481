"""A Python client for the ddz-server API: register a player (or a bot account), ask the
lobby for a game, follow the player's own stream and answer each ``your_turn`` with a
command. See clients/python/README.md."""

from httpx import TransportError

from .client import Client, FeedItem, Page, Retry, __version__
from .problems import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    ProblemError,
    RateLimited,
    Unauthorized,
    Unavailable,
    Unprocessable,
)

__all__ = [
    "BadRequest",
    "Client",
    "Conflict",
    "FeedItem",
    "Forbidden",
    "NotFound",
    "Page",
    "ProblemError",
    "RateLimited",
    "Retry",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "Unprocessable",
    "__version__",
]
