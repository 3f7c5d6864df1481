"""Request and response bodies. Requests refuse unknown fields; responses are dumped
through these schemas, so the OpenAPI document generated from them is what is served."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate
from marshmallow_oneofschema.one_of_schema import OneOfSchema

from ..app.feed import ITEMS
from ..game import state as game_state
from ..game import views
from ..game.actions import CANDIDATES, COMMANDS, PLAYER_ACTIONS, VALUES
from ..game.events import BOT, MATCH_EVENTS, PLAYER, Event
from ..game.settings import (
    BOT_LEVELS,
    DEFAULT_BOT_LEVEL,
    DEFAULT_TURN_SECONDS,
    MAX_TURN_SECONDS,
    MatchSettings,
)
from ..game.settlement import Factors, HandResult
from ..game.views import SHOWN_BY_TYPE
from ..rules import DEFAULT_RULESET, RULESETS, Card, CombinationType
from ..store import STATUSES

#: The events of a match's stream (a table's are not shown as such).
MATCH_EVENT_TYPES = [cls.type for cls in MATCH_EVENTS]
SEAT = validate.Range(0, 3)


class Pattern(validate.Regexp):
    """A string that matches ``regex`` as the contract's ``pattern`` (JSON Schema's,
    ECMA-262's reading) means it: ``\\d`` an ASCII digit, ``$`` the very end. Python's
    ``\\d`` takes any script's digits ("٣" and "３" became amounts) and its ``$`` a final
    newline ("1.00\\n" passed), so the whole string must match, in ASCII."""

    def __init__(self, regex: str, error: str | None = None):
        super().__init__(regex, re.ASCII, error=error)

    def __call__(self, value: Any) -> Any:
        if self.regex.fullmatch(value) is None:
            raise ma.ValidationError(self._format_error(value))
        return value


CARD_CODE = Pattern(
    r"^([SHCD][3-9TJQKA2]|[BR]J)$",
    error="not a card code: a suit letter (S H C D) then a rank (3-9 T J Q K A 2), or a joker (B or R, then J)",
)
#: A stake (``unit``) or a cap: more than zero (a hand at stake zero would move nothing, its
#: penalty neither; service/game/settings.py refuses it too).
POSITIVE = Pattern(
    r"^(?!0+(\.0+)?$)\d{1,9}(\.\d{1,2})?$",
    error="a decimal amount above zero with at most two places, as a string",
)
SHARE = Pattern(r"^(0(\.\d{1,4})?|1(\.0{1,4})?)$", error="a share from 0 to 1, as a string")
#: Text that PostgreSQL can store: no NUL character, no unpaired UTF-16 surrogate.
STORABLE_TEXT = Pattern(
    r"^[^\x00\ud800-\udfff]*$", error="may not contain NUL or unpaired surrogates"
)
PHASES = list(game_state.PHASES)
COMBINATION_TYPES = [kind.value for kind in CombinationType]


def shown_by_type(hint: Any, **options: Any) -> f.Field:
    """The schema of a value the game shows by its type alone (a card by its code, cards
    by theirs, a tuple as a list, an enumeration or a literal by its values; see
    ``SHOWN_BY_TYPE`` of :mod:`service.game.views`)."""
    inner = [arg for arg in get_args(hint) if arg is not type(None)]
    if get_origin(hint) in (Union, UnionType) and len(inner) == 1:
        return shown_by_type(inner[0], **{**options, "allow_none": True})
    if get_origin(hint) in (tuple, list):
        return f.List(shown_by_type(get_args(hint)[0]), **options)
    if get_origin(hint) is Literal:
        return f.String(validate=validate.OneOf(get_args(hint)), **options)
    if isinstance(hint, type) and issubclass(hint, enum.StrEnum):
        return f.String(validate=validate.OneOf([member.value for member in hint]), **options)
    field = {
        Card: f.String,
        bool: f.Boolean,
        int: f.Integer,
        str: f.String,
        dt.datetime: f.DateTime,
    }[hint]
    return field(**options)


def by_type(hints: dict[str, Any]) -> type[ma.Schema]:
    """A schema of these fields, each shown by its type alone (:func:`shown_by_type`): the
    base of a schema that adds what the game shows its own way (mypy cannot follow a
    base class made by a call, hence the ``ignore`` where one is)."""
    return ma.Schema.from_dict(
        {name: shown_by_type(hint, required=True) for name, hint in hints.items()}
    )


class Strict(ma.Schema):
    class Meta:
        unknown = ma.RAISE


class Kinds(OneOfSchema):
    """A document of one of several kinds, told apart by its ``type_field``, which each
    kind's schema has with its one value: in the contract, ``oneOf`` the kinds' schemas
    with a ``discriminator`` (the apispec-oneofschema plugin, see ``Api``), so that a
    generated client knows each kind's fields; a request is loaded, and an answer dumped,
    by its kind's schema."""

    type_field_remove = False

    def get_obj_type(self, obj):
        return obj[self.type_field]


def kinds(name: str, key: str, schemas: dict[str, type[ma.Schema]]) -> type[Kinds]:
    """The schema of the documents told apart by ``key``, of these kinds."""
    return type(
        name, (Kinds,), {"type_field": key, "type_schemas": {k: v() for k, v in schemas.items()}}
    )


def kind(key: str, value: str, fields: dict[str, f.Field], name: str, base=ma.Schema):
    """The schema of one kind of document: ``key`` with its one ``value``, then ``fields``."""
    own = {key: f.String(required=True, validate=validate.OneOf([value]))}
    return base.from_dict({**own, **fields}, name=name)


class AsShaped(f.Nested):
    """A document the game writes in its schema's shape already (the contract tests hold
    it there): documented by the schema, dumped as it is, at no cost (the streams dump
    every event they send)."""

    # marshmallow's Field and Nested name the value differently: no name pleases both.
    def _serialize(self, nested_obj, attr, obj, **kwargs):  # type: ignore[override]
        return nested_obj


def camel(name: str) -> str:
    """``show_hand`` → ``ShowHand``: a kind's name in the names of its schemas."""
    return "".join(part.capitalize() for part in name.split("_"))


class JsonInteger(f.Integer):
    """A JSON integer in a request body, as the document says: not a string such as "3",
    nor ``true`` (which Python counts as 1), nor 2.5 (which marshmallow would cut to 2);
    2.0 is the integer 2, as JSON Schema has it."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.make_error("invalid")
        if isinstance(value, float) and not value.is_integer():
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


#: A number of the query string as the contract writes one: ASCII digits (Python's own
#: parsing took "٣", " 3" and "1_0").
QUERY_INTEGER = re.compile(r"-?[0-9]{1,18}", re.ASCII)
QUERY_NUMBER = re.compile(r"-?[0-9]{1,18}(\.[0-9]{1,18})?([eE][-+]?[0-9]{1,3})?", re.ASCII)
#: The largest version a match can reach (the store keeps it as PostgreSQL's integer).
MAX_VERSION = 2**31 - 1


class QueryInteger(f.Integer):
    """An integer in the query string, in ASCII digits."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or QUERY_INTEGER.fullmatch(value) is None:
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class QueryNumber(f.Float):
    """A number in the query string, in ASCII digits (no ``nan``, no ``inf``)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or QUERY_NUMBER.fullmatch(value) is None:
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class JsonBoolean(f.Boolean):
    """A JSON boolean in a request body: ``true`` or ``false``, not 1, "yes" or "on"."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


# Players


#: What marks a bot account wherever a player is shown (not ``bot``: a system bot's seat).
BOT_ACCOUNT = (
    "A bot account: an author's program playing through the API (not a system bot, whose "
    "seat has `bot` true and no player)"
)


#: What the owner of a bot account is, wherever one is shown.
OWNER = (
    "A bot account's owner: the person whose token registered it (null for a person, and "
    "for a bot account registered before owners were kept)"
)


class PlayerCreate(Strict):
    name = f.String(load_default="player", validate=[validate.Length(1, 64), STORABLE_TEXT])
    bot_account = JsonBoolean(
        load_default=False,
        metadata={
            "description": "Register a bot account (an author's program): its seats are "
            "marked as such to every other player; set now, never changed. Send your own "
            "token (a person's): the bot account is yours (it never sits at a rated table "
            "with you or your other bot accounts, and is suspended and banned with you)"
        },
    )


class PlayerCreated(ma.Schema):
    player_id = f.UUID(required=True)
    name = f.String(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": BOT_ACCOUNT})
    owner_id = f.UUID(required=True, allow_none=True, metadata={"description": OWNER})
    token = f.String(
        required=True, metadata={"description": "Bearer token; shown once, stored only as a hash"}
    )


class PageQuery(ma.Schema):
    """A page of a list that is newest first."""

    cursor = f.String(
        load_default=None,
        validate=Pattern(r"^[A-Za-z0-9_=-]{1,200}$"),
        metadata={"description": "The `next_cursor` of the previous page; none: the newest"},
    )
    limit = QueryInteger(load_default=20, validate=validate.Range(1, 100))


class PlayersQuery(PageQuery):
    bot_account = f.Boolean(
        load_default=None,
        allow_none=True,
        metadata={"description": "true: only bot accounts; false: only people; none: all"},
    )


class RegisteredPlayer(ma.Schema):
    player_id = f.UUID(required=True)
    name = f.String(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": BOT_ACCOUNT})
    created_at = f.DateTime(required=True)
    owner_id = f.UUID(required=True, allow_none=True, metadata={"description": OWNER})


class PlayerList(ma.Schema):
    players = f.List(
        f.Nested(RegisteredPlayer), required=True, metadata={"description": "Newest first"}
    )
    next_cursor = f.String(
        required=True, allow_none=True, metadata={"description": "The next page; null: no more"}
    )


# Matches


class MatchCreate(Strict):
    ruleset = f.String(load_default=DEFAULT_RULESET.name, validate=validate.OneOf(sorted(RULESETS)))
    unit = f.String(
        load_default="1.00",
        validate=POSITIVE,
        metadata={
            "description": "Base stake (底分), above zero and at most the server's bound, "
            "`DDZ_MAX_UNIT` (10000.00 unless the operators set another; above it: 422 "
            "`stake_out_of_bounds`)"
        },
    )
    cap = f.String(
        load_default=None,
        allow_none=True,
        validate=POSITIVE,
        metadata={"description": "Per-hand cap (单局封顶); null: none"},
    )
    rake = f.String(
        load_default="0.00",
        validate=SHARE,
        metadata={
            "description": "System cut (系统得分) as a share of each winner's gain: at most "
            "the server's bound, `DDZ_MAX_RAKE` (0.10 unless the operators set another)"
        },
    )
    bombs_double = JsonBoolean(load_default=True)
    turn_seconds = JsonInteger(
        load_default=DEFAULT_TURN_SECONDS, validate=validate.Range(1, MAX_TURN_SECONDS)
    )
    bot_level = f.String(
        load_default=DEFAULT_BOT_LEVEL,
        validate=validate.OneOf(BOT_LEVELS),
        metadata={
            "description": "How well the system plays its seats: easy (casual, with mistakes),"
            " normal, hard (searches); a disconnected player's seat plays at least normal"
        },
    )


class Options(ma.Schema):
    unit = f.String(required=True)
    cap = f.String(required=True, allow_none=True)
    rake = f.String(required=True)
    bombs_double = f.Boolean(required=True)
    turn_seconds = f.Integer(required=True)
    bot_level = f.String(required=True, validate=validate.OneOf(BOT_LEVELS))


class SeatSummary(ma.Schema):
    player = f.String(required=True, allow_none=True)
    bot = f.Boolean(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": BOT_ACCOUNT})


class Match(ma.Schema):
    match_id = f.UUID(required=True)
    status = f.String(required=True, validate=validate.OneOf(STATUSES))
    phase = f.String(required=True, validate=validate.OneOf(PHASES))
    version = f.Integer(required=True)
    ruleset = f.String(required=True)
    options = f.Nested(Options, required=True)
    seats = f.List(f.Nested(SeatSummary, allow_none=True), required=True)
    created_at = f.DateTime(required=True)
    updated_at = f.DateTime(required=True)


class MatchQuery(ma.Schema):
    status = f.String(validate=validate.OneOf(STATUSES))
    limit = QueryInteger(load_default=50, validate=validate.Range(1, 200))


class MatchList(ma.Schema):
    matches = f.List(f.Nested(Match), required=True)


class SeatRequest(Strict):
    seat = JsonInteger(
        load_default=None,
        allow_none=True,
        validate=SEAT,
        metadata={"description": "A given seat; null or absent: any free one"},
    )
    bot = JsonBoolean(
        load_default=False,
        metadata={"description": "Fill the seat with a system bot instead of the caller"},
    )


# Views


class SeatState(ma.Schema):
    seat = f.Integer(required=True)
    player = f.String(required=True, allow_none=True)
    bot = f.Boolean(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": BOT_ACCOUNT})
    disconnected = f.Boolean(required=True)
    cards = f.Integer(required=True, metadata={"description": "How many cards the seat holds"})
    bombs_played = f.Integer(required=True)
    bombs_left = f.Integer(
        required=True,
        allow_none=True,
        metadata={
            "description": "How many more bombs the seat may play; null: no limit, or no landlord yet"
        },
    )
    role = f.String(required=True, allow_none=True, validate=validate.OneOf(["landlord", "farmer"]))


class Turn(ma.Schema):
    seat = f.Integer(required=True)
    action = f.String(required=True, validate=validate.OneOf(["play", "pass"]))
    cards = f.List(f.String(), required=True, metadata={"description": "Empty for a pass"})


class Lead(ma.Schema):
    seat = f.Integer(required=True)
    cards = f.List(f.String(), required=True)
    type = f.String(required=True, validate=validate.OneOf(COMBINATION_TYPES))
    rank = f.String(required=True, allow_none=True)


def action_fields(action: str) -> dict[str, f.Field]:
    """What a view offers of ``action`` (an action of ``PLAYER_ACTIONS``) besides its name:
    the values it may take now (some of its ``CANDIDATES``), where it takes one."""
    cls = COMMANDS[action]
    if cls not in VALUES:
        return {}
    kind, said = VALUES[cls]
    return {
        "choices": f.List(
            shown_by_type(kind, validate=validate.OneOf(CANDIDATES[cls][1] or ())),
            required=True,
            validate=validate.Length(min=1),
            metadata={"description": f"The values it may take now, among {said}"},
        )
    }


#: An action a view offers, by its ``action``: those that take a value with the values
#: they may take now, typed as the command's ``value`` is.
Action = kinds(
    "Action",
    "action",
    {
        action: kind("action", action, action_fields(action), f"{camel(action)}Action")
        for action in PLAYER_ACTIONS
    },
)


class FactorsSchema(by_type(get_type_hints(Factors))):  # type: ignore[misc]
    """Each factor by its type (the game's), ``report`` told more exactly."""

    report = f.String(
        required=True,
        allow_none=True,
        validate=validate.OneOf(["play", "no_play"]),
        metadata={
            "description": "报到 then 打 (play) or 不打 (no_play); null when no 报到 was declared, a decline included"
        },
    )


class SettlementAmounts(ma.Schema):
    gross = f.List(f.String(), required=True)
    after_cap = f.List(f.String(), required=True)
    rake = f.List(f.String(), required=True)
    penalty = f.List(f.String(), required=True)
    net = f.List(f.String(), required=True)
    house = f.String(required=True)


class Result(ma.Schema):
    landlord = f.Integer(required=True)
    bid = f.Integer(required=True)
    winner = f.String(required=True, validate=validate.OneOf(["landlord", "farmers"]))
    factors = f.Nested(FactorsSchema, required=True)
    multiplier = f.String(required=True)
    first_disconnect = f.Integer(required=True, allow_none=True)
    settlement = f.Nested(SettlementAmounts, required=True)


class View(by_type(SHOWN_BY_TYPE)):  # type: ignore[misc]
    """A seat's view of the match (docs/rules.md §6): its fields shown by their type alone
    (the game's), then the others."""

    phase = f.String(required=True, validate=validate.OneOf(PHASES))
    role = f.String(required=True, allow_none=True, validate=validate.OneOf(["landlord", "farmer"]))
    ruleset = f.String(required=True)
    options = f.Nested(Options, required=True)
    seats = f.List(f.Nested(SeatState, allow_none=True), required=True)
    deadline = f.DateTime(
        required=True,
        allow_none=True,
        metadata={"description": "When the seat to act loses its turn to the system"},
    )
    lead = f.Nested(Lead, required=True, allow_none=True)
    history = f.List(
        f.Nested(Turn),
        required=True,
        metadata={"description": "Every play and pass of the hand so far, in order"},
    )
    unseen = f.Dict(
        keys=f.String(),
        values=f.Integer(),
        required=True,
        metadata={
            "description": "By rank (3…A 2 B R), how many cards the caller neither holds nor"
            " has seen played: those the other seats hold, and the bottom until it is taken"
        },
    )
    actions = f.List(
        AsShaped(Action),
        required=True,
        metadata={
            "description": "What the caller may do now. `play` only when the hand holds a legal play"
            " (`/legal` lists them); a seat that can beat nothing is offered `pass` alone."
        },
    )
    result = f.Nested(Result, required=True, allow_none=True)


class LegalPlay(ma.Schema):
    cards = f.List(f.String(), required=True)
    type = f.String(required=True, validate=validate.OneOf(COMBINATION_TYPES))
    rank = f.String(required=True, allow_none=True)


class Legal(ma.Schema):
    version = f.Integer(required=True)
    seat = f.Integer(required=True)
    plays = f.List(f.Nested(LegalPlay), required=True)
    can_pass = f.Boolean(required=True)


# Commands and events


EXPECTED_VERSION = {
    "description": "Refuse with 409 unless the match is at this version",
}
#: How a command body gives each of its command's fields (the seat is the caller's, and
#: ``by`` is the player).
JSON_FIELDS = {bool: JsonBoolean, int: JsonInteger, str: f.String}


def command_fields(action: str) -> dict[str, f.Field]:
    """The fields of the body of ``action`` (an action of ``PLAYER_ACTIONS``), from its
    command's: its ``value`` as ``VALUES`` says, with the values it may take, or its
    ``cards``."""
    cls = COMMANDS[action]
    fields: dict[str, f.Field] = {}
    for field in dataclasses.fields(cls):
        if field.name == "value":
            kind, said = VALUES[cls]
            fields["value"] = JSON_FIELDS[kind](
                required=True,
                validate=validate.OneOf(CANDIDATES[cls][1] or ()),
                metadata={"description": said},
            )
        elif field.name == "cards":
            fields["cards"] = f.List(
                f.String(validate=CARD_CODE),
                required=True,
                validate=validate.Length(1, 33),
                metadata={"description": "Card codes"},
            )
    fields["expected_version"] = JsonInteger(
        validate=validate.Range(0, MAX_VERSION), metadata=EXPECTED_VERSION
    )
    return fields


#: A command's body, by its ``action``: each action's own fields.
CommandRequestSchema = kinds(
    "CommandRequestSchema",
    "action",
    {
        action: kind("action", action, command_fields(action), f"{camel(action)}Command", Strict)
        for action in PLAYER_ACTIONS
    },
)


class IdempotencyHeader(ma.Schema):
    class Meta:
        unknown = ma.EXCLUDE

    key = f.String(data_key="Idempotency-Key", validate=[validate.Length(1, 200), STORABLE_TEXT])


class TableSettings(Options):
    ruleset = f.String(required=True)


#: What an event's field of these types holds (the others are shown by type alone).
EVENT_DOCUMENTS = {MatchSettings: TableSettings, HandResult: Result}
#: The values of event fields that take a few (by name).
EVENT_VALUES = {"by": [PLAYER, BOT], "combination": COMBINATION_TYPES}


def payload_fields(cls: type[Event]) -> dict[str, f.Field]:
    """What a seat may see of an event of ``cls`` (``views.visible``): its fields, but
    those hidden from the seats (only operators see them) and with those shown instead."""
    hints = get_type_hints(cls)
    hidden = views.HIDDEN.get(cls, ())
    own = views.OWN.get(cls, ())
    fields: dict[str, f.Field] = {}
    for field in dataclasses.fields(cls):
        name, hint = field.name, hints[field.name]
        options: dict[str, Any] = {"required": name not in hidden}
        if name in hidden:
            options["metadata"] = {"description": "Operators only"}
        if name in own:
            options.update(allow_none=True, metadata={"description": "Null but to its seat"})
        if hint in EVENT_DOCUMENTS:
            fields[name] = f.Nested(EVENT_DOCUMENTS[hint], **options)
        else:
            if name in EVENT_VALUES:
                options["validate"] = validate.OneOf(EVENT_VALUES[name])
            fields[name] = shown_by_type(hint, **options)
    for name, hint in views.SHOWN_INSTEAD.get(cls, {}).items():
        fields[name] = shown_by_type(hint, metadata={"description": "Seats only"})
    return fields


def event_fields(cls: type[Event]) -> dict[str, f.Field]:
    payload = ma.Schema.from_dict(payload_fields(cls), name=f"{cls.__name__}Payload")
    return {
        "version": f.Integer(
            required=True, metadata={"description": "The event's version in the match stream"}
        ),
        "schema_version": f.Integer(required=True),
        "recorded_at": f.DateTime(required=True),
        "payload": AsShaped(
            payload, required=True, metadata={"description": "What the seat may see of the event"}
        ),
        "deadline": f.DateTime(
            required=True,
            allow_none=True,
            metadata={
                "description": "On the match's latest event: when the seat to act loses its "
                "turn to the system (null when nobody is to act); null on earlier events"
            },
        ),
    }


#: An event as a seat sees it, by its ``type``: each type's payload its own.
EventDocument = kinds(
    "EventDocument",
    "type",
    {
        cls.type: kind("type", cls.type, event_fields(cls), f"{cls.__name__}Event")
        for cls in MATCH_EVENTS
    },
)


class CommandResult(ma.Schema):
    version = f.Integer(required=True)
    events = f.List(f.Nested(EventDocument), required=True)
    view = f.Nested(View, required=True)


def long_poll_wait() -> QueryNumber:
    """The ``wait`` of a query that may long-poll (match events, a player's feed, a
    watched table): one bound for all of them."""
    return QueryNumber(
        load_default=0,
        validate=validate.Range(0, 30),
        metadata={"description": "Long-poll up to this many seconds"},
    )


class EventsQuery(ma.Schema):
    after = QueryInteger(load_default=0, validate=validate.Range(0, MAX_VERSION))
    wait = long_poll_wait()


def stream_event(
    event: dict,
    data: str | dict,
    description: str,
    id_pattern: str = "^[0-9]+$",
    id_description: str = "The match version (send it back as `Last-Event-ID`)",
) -> dict:
    """One kind of event of an event stream: its ``event:`` name, its ``id:`` and its
    ``data:`` (JSON of the schema named, or of the schema given)."""
    return {
        "type": "object",
        "description": description,
        "properties": {
            "event": event,
            "id": {"type": "string", "pattern": id_pattern, "description": id_description},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": f"#/components/schemas/{data}"}
                if isinstance(data, str)
                else data,
            },
        },
        "required": ["event", "id", "data"],
        "additionalProperties": False,
    }


#: One event of ``GET /v1/matches/{match_id}/stream`` (``text/event-stream``), as its
#: fields parse: the OpenAPI 3.2 reading of an event stream's schema, which tools for 3.1
#: (schemathesis among them) follow. The ``retry:`` advice and the keep-alive comments
#: are not events.
STREAM_EVENT = {
    "description": "Each event of the stream: first the caller's view, then the match's events",
    "oneOf": [
        stream_event(
            {"const": "snapshot"},
            "View",
            "The caller's view when the stream starts (not after `Last-Event-ID`)",
        ),
        stream_event(
            {"type": "string", "enum": sorted(MATCH_EVENT_TYPES)},
            "EventDocument",
            "An event of the match, as the caller may see it",
        ),
    ],
}


class EventList(ma.Schema):
    version = f.Integer(required=True, metadata={"description": "The match's current version"})
    events = f.List(f.Nested(EventDocument), required=True)


class DealSchema(ma.Schema):
    hands = f.List(
        f.List(f.String()),
        required=True,
        metadata={"description": "Each seat's hand as dealt, in seat order"},
    )
    bottom = f.List(f.String(), required=True)
    marked_card = f.String(required=True)
    marked_seat = f.Integer(required=True)


def entry_fields(name: str) -> dict[str, f.Field]:
    """A hand record's entry of a seat's action: the seat, then its command's fields."""
    cls = COMMANDS[name]
    hints = get_type_hints(cls)
    fields: dict[str, f.Field] = {"seat": f.Integer(required=True)}
    for field in dataclasses.fields(cls):
        if field.name != "seat":
            options: dict[str, Any] = {"required": True}
            if field.name in EVENT_VALUES:
                options["validate"] = validate.OneOf(EVENT_VALUES[field.name])
            fields[field.name] = shown_by_type(hints[field.name], **options)
    return fields


#: An action of a hand record, by its ``action``: each its own fields.
ActionEntry = kinds(
    "ActionEntry",
    "action",
    {name: kind("action", name, entry_fields(name), f"{camel(name)}Entry") for name in COMMANDS},
)


class HandRecord(ma.Schema):
    format = f.String(required=True)
    match_id = f.String(required=True)
    ruleset = f.String(required=True)
    options = f.Nested(Options, required=True)
    seats = f.List(f.Nested(SeatSummary, allow_none=True), required=True)
    commitment = f.String(required=True, allow_none=True)
    seed = f.String(required=True, allow_none=True)
    deal = f.Nested(DealSchema, required=True, allow_none=True)
    actions = f.List(f.Nested(ActionEntry), required=True)
    result = f.Nested(Result, required=True, allow_none=True)


class Audit(ma.Schema):
    match_id = f.UUID(required=True)
    ok = f.Boolean(required=True)
    discrepancy = f.String(required=True, allow_none=True)


class Health(ma.Schema):
    status = f.String(required=True)
    checks = f.Dict(keys=f.String(), values=f.String())


# The player's own stream


#: What an item's fields say, by name (the kinds and their fields are the feed's: ITEMS).
ITEM_SAID = {
    "id": "Its place in the player's stream: resume after it",
    "at": "When its event was recorded",
    "table_id": "The table (null only in the items of a match that is no table's hand, one "
    "made by `POST /v1/matches`)",
    "hand_number": "Which hand of its table (1, 2, ...); null for a match that is no table's hand",
    "version": "The match's version the item comes from",
    "ticket_id": "The lobby ticket it seated",
    "at_hand_end": "The seat was freed with the hand's settlement (the player left during the "
    "hand, or did nothing in it)",
    "hands": "The hands the table played",
    "hand": "The player's own cards",
    "phase": "The match's phase",
    "deadline": "When the system takes the seat",
    "actions": "The actions allowed now",
    "reason": "Why the system plays the seat now, `deadline` or `left`; "
    "`POST /v1/matches/{id}/commands` with `resume` takes it back",
    "result": "The hand's result (docs/hand-record.md)",
    "net": "The player's net in the ledger",
}
#: What an item's field of these names holds (the others are shown by their type alone).
ITEM_DOCUMENTS = {
    "actions": lambda **o: f.List(AsShaped(Action), **o),
    "result": lambda **o: AsShaped(Result, **o),
}


def item_fields(item: type) -> dict[str, f.Field]:
    """The fields of a kind of item (a TypedDict of ``service.app.feed``), its ``type``
    aside, with the ``id`` and ``at`` of every item."""
    hints = {"id": str, "at": dt.datetime, **get_type_hints(item)}
    required = {"id", "at", *item.__required_keys__}  # type: ignore[attr-defined]
    fields = {}
    for name, hint in hints.items():
        if name == "type":
            continue
        options: dict[str, Any] = {"required": name in required}
        if name in ITEM_SAID:
            options["metadata"] = {"description": ITEM_SAID[name]}
        if name in ITEM_DOCUMENTS:
            fields[name] = ITEM_DOCUMENTS[name](**options)
        else:
            fields[name] = shown_by_type(hint, **options)
    return fields


def item_type(item: type) -> str:
    (value,) = get_args(get_type_hints(item)["type"])
    return value


ITEM_TYPES = [item_type(item) for item in ITEMS]
#: An item of the player's own stream, by its ``type``: each its own fields.
Item = kinds(
    "Item",
    "type",
    {
        item_type(item): kind(
            "type", item_type(item), item_fields(item), f"{camel(item_type(item))}Item"
        )
        for item in ITEMS
    },
)
