"""Rate limits, with flask-limiter counting in Redis so that every API process shares the
counts: per bearer token and, separately, per client address, for four kinds of request
(commands, reads, streams and long polls, new players). A request over a limit gets 429
``rate_limited`` with ``Retry-After``, before its token is looked up or anything is read.

Operator requests and the health checks are not limited. When Redis does not answer, each
process counts in its own memory instead (flask-limiter's fallback: one warning, and Redis
is tried again now and then), so that requests are still served."""

from __future__ import annotations

import hashlib
import hmac
import math
import time

from flask import Flask, g, request
from flask_limiter import Limit, Limiter, RateLimitExceeded

from .config import Config
from .problems import problem

COMMANDS, READS, STREAMS, SIGNUPS = "commands", "reads", "streams", "signups"

#: The kind of each endpoint's requests; ``matches.events`` is a read, or a long poll
#: (a stream) when it asks to wait.
KIND_OF = {
    "players.create_player": SIGNUPS,
    "matches.create_match": COMMANDS,
    "matches.take_seat": COMMANDS,
    "matches.command": COMMANDS,
    "matches.leave": COMMANDS,
    "tokens.create_token": COMMANDS,
    "tokens.revoke_token": COMMANDS,
    "matches.list_matches": READS,
    "matches.get_match": READS,
    "matches.legal": READS,
    "matches.events": READS,
    "matches.record": READS,
    "tokens.list_tokens": READS,
    "ledger.match_settlement": READS,
    "ledger.player_ledger": READS,
    "matches.stream": STREAMS,
    # The operators' (operator requests are not limited; others get 403 here, as reads).
    "ledger.check_ledger": READS,
    "admin.all_events": READS,
    "admin.audit": READS,
}
#: Not limited: the health checks.
UNLIMITED = {"health.healthz", "health.readyz"}
#: How long a Redis call of the limiter may take before the process counts in memory.
STORAGE_TIMEOUT = 1.0
#: Callers over a limit remembered per process (beyond that, forgotten all at once).
OVER_SIZE = 10_000


def kind() -> str | None:
    if request.endpoint == "matches.events" and _waits():
        return STREAMS
    return KIND_OF.get(request.endpoint or "")


def _waits() -> bool:
    try:
        return float(request.args.get("wait") or 0) > 0
    except ValueError:
        return False  # refused by the schema, as a read


def _bearer() -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def token_key() -> str:
    """The token's hash, not the token: Redis keys are no place for secrets."""
    if "ddz_token_key" not in g:
        g.ddz_token_key = hashlib.sha256(_bearer().encode()).hexdigest()[:32]
    return g.ddz_token_key


def address_key() -> str:
    return request.remote_addr or "unknown"


def _storage_uri(redis_url: str) -> str:
    # limits names a Unix socket redis+unix:// (redis-py: unix://).
    return f"redis+{redis_url}" if redis_url.startswith("unix://") else redis_url


def _refusal(category: str, per: str, limit: str, seconds: float):
    retry = max(1, math.ceil(seconds))
    return problem(
        429,
        "rate_limited",
        f"too many {category} from this {per} (at most {limit}); retry after {retry} s",
        headers={"Retry-After": str(retry)},
    )


def install(app: Flask, config: Config) -> Limiter | None:
    """Limits the app's requests as ``config`` says (nothing when switched off)."""
    if not config.rate_limits:
        return None
    unknown = set(app.view_functions) - set(KIND_OF) - UNLIMITED
    assert not unknown, f"say which rate limits apply to {sorted(unknown)}"

    operator_token = (config.operator_token or "").encode()

    def exempt() -> bool:
        if kind() is None:
            return True
        return bool(operator_token) and hmac.compare_digest(_bearer().encode(), operator_token)

    def of_kind(wanted: str, per_token: bool):
        return lambda: kind() != wanted or (per_token and not _bearer())

    limits = []
    for name, per_token, per_address in (
        (COMMANDS, config.rate_limit_commands, config.rate_limit_commands_per_address),
        (READS, config.rate_limit_reads, config.rate_limit_reads_per_address),
        (STREAMS, config.rate_limit_streams, config.rate_limit_streams_per_address),
        (SIGNUPS, None, config.rate_limit_signups_per_address),
    ):
        if per_token:
            limits.append(Limit(per_token, key_function=token_key, scope=f"{name}:token", shared=True, exempt_when=of_kind(name, True)))
        limits.append(Limit(per_address, key_function=address_key, scope=f"{name}:address", shared=True, exempt_when=of_kind(name, False)))

    # Each process remembers who is over a limit until its window ends, and refuses them
    # without asking Redis: a flood then costs a dict look-up per request. (Registered
    # before the limiter, so that it runs first.)
    over: dict[tuple[str, str], tuple[float, str]] = {}

    @app.before_request
    def known_to_be_over():
        category = kind()
        if category is None or exempt():
            return None
        now = time.time()
        for per, key in (("token", token_key() if _bearer() else None), ("address", address_key())):
            until, limit = over.get((f"{category}:{per}", key), (0.0, ""))
            if until > now:
                return _refusal(category, per, limit, until - now)
        return None

    limiter = Limiter(
        address_key,
        app=app,
        default_limits=limits,
        storage_uri=_storage_uri(config.redis_url),
        storage_options={"socket_timeout": STORAGE_TIMEOUT, "socket_connect_timeout": STORAGE_TIMEOUT},
        strategy="fixed-window",
        key_prefix="ddz",
        in_memory_fallback_enabled=True,
    )
    limiter.request_filter(exempt)

    def refused(error: RateLimitExceeded):
        scope, limit = str(error.limit.scope), str(error.limit.limit)
        try:
            until = limiter.current_limit.window.reset_time
        except Exception:  # noqa: BLE001 - Redis went away since the count: the window's length
            until = time.time() + error.limit.limit.get_expiry()
        if len(over) >= OVER_SIZE:
            over.clear()
        over[(scope, error.limit.key_func())] = (until, limit)
        category, _, per = scope.partition(":")
        return _refusal(category, per, limit, until - time.time())

    app.register_error_handler(RateLimitExceeded, refused)
    return limiter
