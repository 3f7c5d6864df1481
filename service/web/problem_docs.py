"""The page each problem document's ``type`` points at: ``GET /docs/problems``, every
``code`` the service answers with what it means, each at its own anchor
(``/docs/problems#version_conflict``). A plain Flask blueprint, HTML like the console's
pages, so not in ``openapi.yaml``."""

from __future__ import annotations

from flask import Blueprint, render_template
from markupsafe import Markup, escape

from ..api.encoding import I_JSON_RULES
from ..api.problems import PROBLEMS_PATH

bp = Blueprint("problem_docs", __name__)

#: What each problem code means, by the part of the API that answers it. A code the
#: service answers and this leaves out fails tests/test_api_http.py.
MEANINGS: dict[str, dict[str, str]] = {
    "The request": {
        "bad_request": "The request is not valid HTTP/1.1, or a header of it is malformed.",
        "invalid_json": "The body is not valid JSON (the detail says where it goes wrong), "
        f"is nested too deeply, or is not {I_JSON_RULES}.",
        "unsupported_media_type": "The body is not sent as `Content-Type: application/json` "
        "(a `+json` type is refused too; a charset, if given, must be UTF-8).",
        "body_too_large": "The body is larger than the server accepts (`DDZ_MAX_BODY_BYTES`).",
        "body_timeout": "The body did not arrive within `DDZ_BODY_SECONDS` of the request's "
        "headers; the connection is closed.",
        "invalid_request": "The request does not match its schema: `errors` says where, by "
        "location (`json`, `query`, `headers`), then field.",
        "request_line_too_long": "The request line (method, path and query) is longer than "
        "the server reads.",
        "headers_too_large": "The request's header fields are too many or too large.",
        "not_found": "Nothing is served at this path.",
        "malformed_id": "An id in the path is not a UUID.",
        "method_not_allowed": "This path does not take this method; `Allow` lists those it takes.",
        "not_acceptable": "The server cannot answer in a type the `Accept` header allows.",
        "invalid_cursor": "The `cursor` is not one this list gave.",
        "cursor_unknown": "`after` names no item of the player's own events yet: send the id "
        "of an item received.",
        "invalid_last_event_id": "`Last-Event-ID` is not an id this stream sends.",
    },
    "Tokens and rights": {
        "unauthorized": "No `Authorization: Bearer <token>` header.",
        "invalid_token": "The token belongs to no one (or was revoked).",
        "token_expired": "The token's lifetime (`expires_in`) is over: use another token of "
        "the player's.",
        "token_not_found": "The caller has no token with this id.",
        "forbidden": "The token may not do this.",
        "player_required": "This needs a player's token.",
        "operator_required": "This needs an operator's token.",
        "admin_required": "This needs an admin's token: an auditor reads only.",
        "player_suspended": "The platform's operators suspended this player: every request "
        "with their tokens is refused until they are reinstated, and the system plays their "
        "seats.",
        "player_banned": "The platform's operators banned this player: every request with "
        "their tokens is refused, and the system plays their seats.",
        "not_seated": "The caller has no seat at this match or table.",
        "record_not_available": "A hand record is for the match's seated players once the "
        "hand has ended (and for operators).",
        "replay_not_available": "A hand's public replay is anyone's once the hand has ended "
        "(a private table's hand is shown only to those dealt it: to anyone else it is "
        "`match_not_found`).",
        "watch_table": "The hand is a table's, and the caller was not dealt it: who has no "
        "seat at a table's hand watches the table (`GET /v1/tables/{table_id}/watch`, as "
        "far behind it as the server keeps watchers; `table_id` names it), or replays the "
        "hand once it has ended (`GET /v1/matches/{match_id}/replay`).",
        "bot_account_required": "The ladder is for bot accounts (authors' programs).",
        "person_required": "A bot account belongs to a person: register it with a person's "
        "token, not a bot account's or an operator's.",
        "player_not_found": "No player has this id.",
        "not_your_ledger": "A player reads only their own ledger.",
        "rate_limited": "Too many requests from this token or address: `detail` names the "
        "limit; send again after `Retry-After` seconds.",
        "too_many_requests": "Too many requests: send again after `Retry-After` seconds.",
        "open_stream_limit": "This token, player or address holds as many event streams and "
        "long polls open as it may (`DDZ_MAX_STREAMS_PER_TOKEN`, `_PER_PLAYER`, "
        "`_PER_ADDRESS`; `detail` says which): end one, or open again after `Retry-After` "
        "seconds.",
    },
    "Matches and commands": {
        "match_not_found": "No match has this id (or none the caller may know of: a private "
        "table's hand is answered so to whoever was not dealt it).",
        "match_exists": "A match with this id exists already.",
        "match_full": "Every seat of the match is taken.",
        "match_ended": "The hand has ended: nothing more can be done in it.",
        "version_conflict": "The match is no longer at `expected_version` (another command "
        "came first): read the view again and decide on it.",
        "idempotency_key_in_use": "A request with this `Idempotency-Key` is under way, or its "
        "outcome is unknown: wait, look for what it made, or send a new key.",
        "idempotency_key_reused": "This `Idempotency-Key` came with another request before.",
        "invalid_command": "The command is malformed: an unknown action, a value or cards "
        "missing or out of place, a card code that is none.",
        "invalid_notation": "A card code, rank string or seed that cannot be read.",
        "invalid_seat": "A seat is 0, 1, 2 or 3.",
        "seat_taken": "That seat is taken.",
        "already_seated": "The player has a seat here already.",
        "wrong_phase": "Not allowed in the match's phase now; the detail names the phases "
        "that allow it.",
        "not_your_turn": "It is another seat's turn.",
        "seat_under_system_control": "The system plays this seat (系统代打, after a missed "
        "deadline or a leave): send `resume` to take it back.",
        "seat_not_under_system_control": "The seat's player is connected and acts for it.",
        "invalid_bid": "A bid is 1, 2 or 3, or 0 to pass.",
        "bid_too_low": "A bid must be higher than the highest bid so far.",
        "not_landlord": "Only the landlord decides this (摊打, 报到).",
        "invalid_report": "报到 takes `play`, `no_play` or `decline`.",
        "cards_not_in_hand": "The hand does not hold these cards (the detail names those missing).",
        "invalid_combination": "The cards are none of the combinations (docs/rules.md §2); "
        "the detail names them and the rule they break.",
        "does_not_beat": "The play does not beat the one on the table (docs/rules.md §3); "
        "the detail names both.",
        "leader_cannot_pass": "The seat that leads must play.",
        "bomb_limit_reached": "This seat has played all the bombs its limit allows.",
        "must_play_whole_reported_bomb": "A rank reported at 报到 leaves the hand only as its "
        "whole bomb.",
        "bot_seat": "A bot seat cannot do this (disconnect).",
        "already_disconnected": "The seat is disconnected already.",
        "not_disconnected": "The seat is not disconnected: there is nothing to resume.",
        "already_settled": "The hand is settled already.",
        "not_settled": "The hand has not been settled (yet).",
        "unknown_ruleset": "No ruleset has this name (`shanghai-platform`, `shanghai-local`).",
        "invalid_table": "An option of the match or table is not valid (unit, cap, rake, "
        "turn_seconds, bot_level, the waits, the invite code); the detail says which.",
        "stake_out_of_bounds": "The stake is beyond what this server allows: `unit` above "
        "`DDZ_MAX_UNIT` or `rake` above `DDZ_MAX_RAKE` (the detail names the bound).",
        "invalid_settlement": "A settlement's amounts are not valid.",
        "ledger_check_running": "A full check of the ledger is running already (`check_id` "
        "names it): follow its progress at `GET /v1/admin/ledger/check`, and start another "
        "once it has finished.",
    },
    "Tables and the lobby": {
        "table_not_found": "No table has this id (or none the caller may know of: a private "
        "table is answered so to whoever never sat there, and to a seat asked without its "
        "invite code).",
        "table_exists": "A table with this id exists already.",
        "table_full": "Every seat of the table is taken.",
        "invite_required": "The table is private: join it with its invite code (the API "
        "answers a seat asked without it, or with another, as `table_not_found`: nothing "
        "is said of a private table to whoever lacks its code).",
        "hand_in_play": "A hand is under way at this table.",
        "table_not_full": "A hand needs the four seats taken.",
        "no_players": "No player is seated at this table.",
        "not_current_hand": "That match is not the table's hand under way.",
        "invalid_net": "A settlement's net amounts are one per seat.",
        "lobby_table": "The lobby made this table, and only the lobby seats players there "
        "(its hands are rated: nobody chooses their opponents): ask it for a quick match.",
        "ticket_not_found": "The caller has no lobby ticket with this id.",
        "ticket_waiting": "The player has a ticket waiting already (`ticket_id` names it): "
        "cancel it to post another or to take a seat at a table.",
        "ticket_seated": "The ticket has been seated at a table already: leave the table instead.",
        "seated_elsewhere": "The player sits at another table (`table_id` names it): a person "
        "sits at one table at a time, a bot account at up to `DDZ_BOT_ACCOUNT_TABLES`, a "
        "waiting lobby ticket counting as one. Leave it first.",
        "table_closed": "The table has closed (a table without bots whose freed seat no one "
        "took in time): it deals no more hands.",
    },
    "The service": {
        "database_unavailable": "PostgreSQL does not answer, after retries on fresh "
        "connections: send again shortly (a command with the same `Idempotency-Key` "
        "applies once).",
        "too_many_streams": "This API process holds as many event streams and long polls as "
        "it may (`DDZ_MAX_STREAMS`): connect again after `Retry-After` seconds.",
        "not_ready": "From `/readyz`: PostgreSQL, Redis or every worker is away; `checks` "
        "says which.",
        "internal_error": "The server failed; the request may not have been applied.",
        "unknown_command": "A command this server does not know (a fault of the server).",
        "unknown_event": "An event this server cannot read (written by a newer server).",
    },
}


def _marked(text: str) -> Markup:
    """The text as HTML: each `span` in backticks as code, everything escaped."""
    parts = str(escape(text)).split("`")
    return Markup("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


@bp.route(PROBLEMS_PATH)
def index():
    meanings = {
        part: {code: _marked(meaning) for code, meaning in codes.items()}
        for part, codes in MEANINGS.items()
    }
    return render_template("docs/problems.html", meanings=meanings)
