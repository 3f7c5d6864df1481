"""Errors of the match decider: each names the broken rule with a stable ``code``."""

from ..rules.errors import RulesError


class GameError(RulesError):
    """A command the match refuses. ``code`` is stable and machine-readable; the message
    is for people and never shows a card the commanding seat may not see."""

    code = "game_error"
