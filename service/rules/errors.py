"""Errors of the rules core. Each is a ``ValueError`` with a stable machine-readable ``code``
(what the API returns) and a message that says which rule was broken."""


class RulesError(ValueError):
    code = "rules_error"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class InvalidNotation(RulesError):
    """A card code, rank string or seed that cannot be parsed."""

    code = "invalid_notation"


class InvalidCombination(RulesError):
    """A set of cards that is none of the ten combinations of docs/rules.md §2."""

    code = "invalid_combination"


class UnknownRuleset(RulesError):
    code = "unknown_ruleset"
