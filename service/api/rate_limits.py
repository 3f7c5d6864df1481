"""Rate limits, counted in Redis so that every API process shares the counts: per bearer
token and, separately, per client address, for the categories of request (commands, reads,
streams and long polls, new players, creations of matches, tables and lobby tickets); and
the console's sign-ins per address and per operator name from that address, with a slower
limit on failed sign-ins per name from everywhere. A request over a limit gets 429
``rate_limited`` with ``Retry-After``, before its token is looked up or anything is read.

A client address is counted as one: an IPv4 address exactly, an IPv6 address by its /64
(the network one subscriber gets, whose 2**64 addresses a client hops between at will).

The limits are written and parsed by the ``limits`` package (``10/second;300/minute``).
What guards accounts and money (sign-ups, sign-ins, creations) is counted in moving
windows, by the ``limits`` package in Redis: at most a limit's number in any stretch of its
length, whenever it starts (fixed windows let 20 sign-ups of a ``10/minute`` limit through
in a second across a minute's boundary). A creation counts as a command too.

Commands, reads and streams are many, and counted in fixed windows: at worst a caller gets
twice a limit in a moment across a window's boundary (the end of one and the start of the
next), never more in a window's length. A process counts such a
request in its own memory while every window it counts against is well below its limit
(the share of it set by ``DDZ_RATE_LIMIT_LOCAL_SHARE``, half by default), and sends what
it counted to Redis at most :data:`SYNC_SECONDS` later, every window's in one command; a
request that takes a window past that share is counted in Redis at once, with what the
process holds of it, and decided on the total. A round trip per request took a tenth of
an API worker's time under load, for limits that a player at the table never comes near.
The price: a caller who spreads a burst over ``P`` processes faster than they send their
counts can get one limit and the share of it from each other process in one window (with
two processes and half, a limit and a half); one process alone counts exactly, for what it
sent to Redis is held against the limit until Redis answers. A share of 0 counts every
request in Redis, as a limit shared exactly needs.

Operator requests and the health checks are not limited. When Redis does not answer, each
process counts in its own memory only (one warning; Redis is tried again after a while,
and sent what was counted meanwhile), so that requests are still served. Each process also
remembers who is over a limit until the window ends, and refuses them without asking
Redis, after holding the request a moment: a flood from one caller then costs a dict
look-up per request, and comes at the pace of one request per connection per hold."""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis
from flask import Flask, g, request
from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage, RedisSentinelStorage, RedisStorage
from limits.strategies import MovingWindowRateLimiter

from ..app.redis_client import connect, limits_sentinel_uri, sentinels
from ..config import Config
from .auth import bearer_token
from .problems import problem

log = logging.getLogger(__name__)

COMMANDS, READS, STREAMS, SIGNUPS = "commands", "reads", "streams", "signups"
#: Console sign-in attempts, counted per address and per operator name from that address
#: (so that nobody locks an operator out from elsewhere), apart from players' sign-ups: a
#: crowd of new players behind one address must not lock the operators out. Failed ones
#: are counted per name from everywhere too (see :class:`SignInFailures`).
SIGN_INS = "sign-ins"
#: New matches, tables and lobby tickets: each costs the workers a hand or more (and is a
#: command as well).
CREATIONS = "creations"
CREATING = {"matches.create_match", "tables.create_table", "lobby.create_ticket"}
#: Failed console sign-ins, per operator name from everywhere (see :class:`SignInFailures`).
FAILED_SIGN_INS = "failed sign-ins"
#: The categories counted in moving windows.
MOVING = {SIGNUPS, SIGN_INS, CREATIONS}

#: The category of each endpoint's requests, the limits they count against (every endpoint
#: has one, or is in UNLIMITED: see :func:`check_categories`); ``matches.events`` is a
#: read, or a long poll (a stream) when it asks to wait.
CATEGORY_OF = {
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
    "tables.create_table": COMMANDS,
    "tables.join_table": COMMANDS,
    "tables.leave_table": COMMANDS,
    "tables.get_table": READS,
    "lobby.create_ticket": COMMANDS,
    "lobby.cancel_ticket": COMMANDS,
    "lobby.get_ticket": READS,
    "me.get_me": READS,
    "me.my_matches": READS,
    "me.my_tables": READS,
    "me.my_events": READS,
    "me.my_stream": STREAMS,
    "ratings.leaderboard": READS,
    "ratings.profile": READS,
    "ratings.my_ratings": READS,
    "watching.watch": READS,
    "watching.watch_stream": STREAMS,
    "watching.replay": READS,
    "replay_page.replay_page": READS,
    # The operators' (operator requests are not limited; others get 403 here, as reads).
    "ledger.check_ledger": READS,
    "ledger.start_ledger_check": READS,
    "admin.all_events": READS,
    "admin.audit": READS,
    "admin.players": READS,
    # The page of problem codes, as the console's pages are.
    "problem_docs.index": READS,
    # The front door, the API reference and the web table: pages and their files.
    **{
        f"front.{page}": READS
        for page in (
            "index",
            "docs",
            "docs_asset",
            "openapi_json",
            "openapi_yaml",
            "asset",
            "play",
            "play_worker",
        )
    },
    # The console: its pages as reads of the address (they take no bearer token); signing
    # in (a POST of the form) is its own category, see request_category().
    **{
        f"console.{page}": READS
        for page in (
            "sign_in",
            "sign_out",
            "language",
            "home",
            "matches",
            "match",
            "rules",
            "ledger_page",
            "check_ledger",
            "settlements_csv",
            "players",
            "player",
            "player_standing",
            "correct_balance",
            "void_hand",
            "void_rating",
            "system",
            "audit_page",
            "operators",
            "manage_operator",
            "change_operator",
        )
    },
}
#: Not limited: the health checks and the metrics (Prometheus scrapes on a private network).
UNLIMITED = {"health.healthz", "health.readyz", "metrics.metrics"}
#: How long a Redis call of the limiter may take before the process counts in memory.
STORAGE_TIMEOUT = 1.0
#: After Redis failed, how long the process counts in memory before it tries Redis again.
RETRY_REDIS_SECONDS = 5.0
#: Callers over a limit remembered per process (beyond that, forgotten all at once).
OVER_SIZE = 10_000
KEY_PREFIX = "ddz:rate"
#: How long a process keeps what it counted in its own memory before sending it to Redis
#: (with the next request after this long).
SYNC_SECONDS = 0.1
#: How often a process forgets the windows that are over.
SWEEP_SECONDS = 1.0
#: Adds each count to its window (KEYS; ARGV: each window's length, then the count) and
#: answers the totals: one command for Redis to parse and answer for every window a
#: process sends, where INCRBY and EXPIRE per window were two each.
COUNT_SCRIPT = """
local counts = {}
for i, key in ipairs(KEYS) do
  local by = tonumber(ARGV[2 * i])
  counts[i] = redis.call('INCRBY', key, by)
  if counts[i] == by then redis.call('EXPIRE', key, ARGV[2 * i - 1]) end
end
return counts
"""


def request_category() -> str | None:
    """The category of the request under way (None: not limited)."""
    # The request looked up once: each lookup through Flask's proxy costs a context
    # variable's and a wrapper's call, and the hook runs on every request.
    served = request._get_current_object()  # type: ignore[attr-defined]
    endpoint = served.endpoint
    if endpoint in ("matches.events", "me.my_events", "watching.watch") and _waits():
        return STREAMS
    if endpoint == "console.sign_in" and served.method == "POST":
        return SIGN_INS
    return CATEGORY_OF.get(endpoint or "")


def check_categories(app: Flask) -> None:
    """Raises unless each of the app's endpoints has its category or is unlimited: an
    endpoint left out would be served without any limit."""
    unknown = set(app.view_functions) - set(CATEGORY_OF) - UNLIMITED
    if unknown:
        raise RuntimeError(
            f"no rate-limit category for {', '.join(sorted(unknown))}: give each one in "
            "CATEGORY_OF of service/api/rate_limits.py (or add it to UNLIMITED there)"
        )


def _waits() -> bool:
    try:
        return float(request.args.get("wait") or 0) > 0
    except ValueError:
        return False  # refused by the schema, as a read


def token_key() -> str:
    """The token's hash, not the token: Redis keys are no place for secrets."""
    state = g._get_current_object()
    key = state.get("ddz_token_key")
    if key is None:
        key = state.ddz_token_key = hashed(bearer_token())
    return key


def address_key() -> str:
    """The client, as the per-address limits count it (see the module's text)."""
    return client_network(request.remote_addr)


@functools.lru_cache(maxsize=4096)
def client_network(address: str | None) -> str:
    """An IPv4 address as it is, an IPv6 address as its /64 (an IPv4 address mapped into
    IPv6 as the IPv4 address)."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return address or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def name_key(name: str | None = None) -> str:
    """An operator name a sign-in tries, hashed: any string fits in a key that way."""
    return hashed(request.form.get("name", "") if name is None else name)


def hashed(text: str) -> str:
    """``text`` as the limits' Redis keys hold it (a token, an operator name)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def name_and_address_key() -> str:
    return f"{name_key()}:{address_key()}"


KEY_OF = {"token": token_key, "address": address_key, "name and address": name_and_address_key}


@dataclass(frozen=True)
class Limit:
    """One configured limit: a category of request, counted per token or per address; the
    share of it a process may count in its own memory first (see the module's text)."""

    category: str
    per: str
    windows: tuple[RateLimitItem, ...]
    local_share: float = 0.0


@dataclass(frozen=True)
class Refusal:
    limit: Limit
    key: str
    window: RateLimitItem
    seconds: float


@dataclass
class _Held:
    """One window of one caller, as this process knows it."""

    limit: Limit
    key: str
    window: RateLimitItem
    ends: float
    #: The total in Redis at this process's last exchange for the window.
    known: int = 0
    #: Counted here since, not yet sent.
    pending: int = 0
    #: Sent to Redis, its total not back yet: still held against the limit meanwhile,
    #: or the requests that came during the round trip were decided on a stale count (one
    #: process let about twice its limit through).
    sending: int = 0

    @property
    def counted(self) -> int:
        """The window's total as this process knows it (at least the total of what it
        counted itself)."""
        return self.known + self.sending + self.pending


class _Storage:
    """When Redis last failed, so that a process counts in its own memory for a while."""

    def __init__(self) -> None:
        self.redis_back_at = 0.0

    def _unreachable(self, exc: redis.RedisError, now: float) -> None:
        log.warning(
            "rate limit storage unreachable (%s): counting in this process for %.0f s",
            type(exc).__name__,
            RETRY_REDIS_SECONDS,
        )
        self.redis_back_at = now + RETRY_REDIS_SECONDS


class Moving(_Storage):
    """Moving windows, by the ``limits`` package: in Redis, or in this process's memory
    while Redis does not answer (made on first need: it runs a timer thread)."""

    def __init__(self, config: Config):
        super().__init__()
        settings: dict[str, Any] = {
            "key_prefix": f"{KEY_PREFIX}:moving",
            "socket_timeout": STORAGE_TIMEOUT,
            "socket_connect_timeout": STORAGE_TIMEOUT,
        }
        storage: RedisStorage
        if sentinels(config):
            uri, options = limits_sentinel_uri(config)
            storage = RedisSentinelStorage(uri, **settings, **options)
        else:
            storage = RedisStorage(config.redis_url, **settings)
        self.shared = MovingWindowRateLimiter(storage)
        self.local: MovingWindowRateLimiter | None = None

    def hit(self, counted: list[tuple[Limit, str]]) -> Refusal | None:
        """Counts the request in every window of each limit, up to the first it would go
        over (which it is not counted in); that one, if any."""
        now = time.time()
        if now >= self.redis_back_at:
            try:
                return self._hit(self.shared, counted)
            except redis.RedisError as exc:
                self._unreachable(exc, now)
        if self.local is None:
            self.local = MovingWindowRateLimiter(MemoryStorage())
        return self._hit(self.local, counted)

    def test(self, counted: list[tuple[Limit, str]]) -> Refusal | None:
        """The first window of these that is full, if any; counts nothing."""
        now = time.time()
        limiter = self.shared if now >= self.redis_back_at or self.local is None else self.local
        try:
            for limit, key in counted:
                for window in limit.windows:
                    if not limiter.test(window, limit.category, limit.per, key):
                        return self._refusal(limiter, limit, key, window)
        except redis.RedisError as exc:
            self._unreachable(exc, now)
        return None

    def _hit(
        self, limiter: MovingWindowRateLimiter, counted: list[tuple[Limit, str]]
    ) -> Refusal | None:
        for limit, key in counted:
            for window in limit.windows:
                if not limiter.hit(window, limit.category, limit.per, key):
                    return self._refusal(limiter, limit, key, window)
        return None

    @staticmethod
    def _refusal(
        limiter: MovingWindowRateLimiter, limit: Limit, key: str, window: RateLimitItem
    ) -> Refusal:
        stats = limiter.get_window_stats(window, limit.category, limit.per, key)
        return Refusal(limit, key, window, max(0.0, stats.reset_time - time.time()))


class Counter(_Storage):
    """Fixed windows counted in Redis, far below their limits in this process's memory
    first (see the module's text); only in memory while Redis does not answer, and sent
    when it answers again."""

    def __init__(self, config: Config):
        super().__init__()
        self.redis = connect(config, STORAGE_TIMEOUT)
        self.count = self.redis.register_script(COUNT_SCRIPT)
        #: Redis key -> the window it counts; the ones with counts not yet sent. A
        #: greenlet switches in the Redis call only; the lock is for threads (the test
        #: server's).
        self.held: dict[str, _Held] = {}
        self.unsent: dict[str, _Held] = {}
        self.lock = threading.Lock()
        #: One send at a time, round trip included: a total that comes back then holds
        #: every count this process sent before it. With two in flight, the second could
        #: reach Redis first and be decided without the first's counts, requests already
        #: let through (up to the limit's local share too many, seen in CI: 30 of 20).
        self.send_lock = threading.Lock()
        self.sent_at = time.monotonic()
        self.sending = False
        self.swept_at = time.time()

    def hit(self, counted: list[tuple[Limit, str]]) -> Refusal | None:
        """Counts the request against every window of each limit (with the caller's key);
        the first window it goes over, if any."""
        now = time.time()
        mine = self._windows(counted, now)
        if now >= self.redis_back_at:
            try:
                return self._hit_shared(mine, now)
            except redis.RedisError as exc:
                self._unreachable(exc, now)
        with self.lock:
            self._count(mine)
        return self._over(mine, {id(h): h.counted for h in mine.values()}, now)

    def _count(self, mine: dict[str, _Held]) -> None:
        for name, held in mine.items():
            held.pending += 1
            self.unsent[name] = held

    def _windows(self, counted: list[tuple[Limit, str]], now: float) -> dict[str, _Held]:
        mine = {}
        with self.lock:
            for limit, key in counted:
                for window in limit.windows:
                    length = window.get_expiry()
                    start = int(now // length) * length
                    name = f"{KEY_PREFIX}:{limit.category}:{limit.per}:{key}:{length}:{start}"
                    held = self.held.get(name)
                    if held is None:
                        held = self.held[name] = _Held(limit, key, window, start + length)
                    mine[name] = held
        return mine

    def _hit_shared(self, mine: dict[str, _Held], now: float) -> Refusal | None:
        with self.lock:
            local = all(
                h.counted + 1 <= h.window.amount * h.limit.local_share for h in mine.values()
            )
            if local:
                self._count(mine)
                if self.sending or time.monotonic() - self.sent_at < SYNC_SECONDS:
                    return None
                self.sending = True
        if not local:
            full = next((h for h in mine.values() if h.known >= h.window.amount), None)
            if full is not None:
                # Redis said the window is full: no request gets through until it ends,
                # and none needs counting (nor waits for a send, see send_lock).
                return Refusal(full.limit, full.key, full.window, full.ends - now)
            # Near a limit: counted in Redis now, so that the total the request is decided
            # on holds everything counted before it.
            with self.send_lock:
                return self._over(mine, self._send(mine, now), now)
        try:
            # The counts held here on their way; when a send is under way already, they
            # go with the next one rather than keep this request waiting.
            if self.send_lock.acquire(blocking=False):
                try:
                    self._send({}, now)
                finally:
                    self.send_lock.release()
        except redis.RedisError as exc:
            self._unreachable(exc, now)  # the counts stay held, for the next send
        finally:
            self.sending = False
        return None

    def _send(self, mine: dict[str, _Held], now: float) -> dict[int, int]:
        """Sends every count held here, and one for each of ``mine``; the totals, by the
        identity of each window sent. The caller holds ``send_lock``."""
        with self.lock:
            if now - self.swept_at >= SWEEP_SECONDS:
                # Windows that are over: nobody is counted in them any more.
                self.held = {name: held for name, held in self.held.items() if held.ends > now}
                self.swept_at = now
            sent = []
            for name, held in {**self.unsent, **mine}.items():
                if held.ends > now:
                    by = held.pending + (name in mine)
                    sent.append((name, held, by))
                    held.pending, held.sending = 0, held.sending + by
            self.unsent.clear()
            self.sent_at = time.monotonic()
        if not sent:
            return {}
        try:
            totals = self.count(
                keys=[name for name, _, _ in sent],
                args=[n for _, held, by in sent for n in (held.window.get_expiry() + 1, by)],
            )
        except redis.RedisError:
            with self.lock:  # held for the next send; this request is counted by the caller
                for name, held, by in sent:
                    held.sending -= by
                    held.pending += by - (name in mine)
                    if held.pending:
                        self.unsent[name] = held
            raise
        with self.lock:
            for (_, held, by), total in zip(sent, totals):
                # The total holds what was sent: known from now on. (A send that overlaps
                # this one may be in both for a moment: counted twice, never missed.)
                held.known, held.sending = max(held.known, total), held.sending - by
        return {id(held): total for (_, held, _), total in zip(sent, totals)}

    @staticmethod
    def _over(mine: dict[str, _Held], totals: dict[int, int], now: float) -> Refusal | None:
        for held in mine.values():
            if totals[id(held)] > held.window.amount:
                return Refusal(held.limit, held.key, held.window, held.ends - now)
        return None


def _refusal(limit: Limit, window: RateLimitItem, seconds: float):
    retry = max(1, math.ceil(seconds))
    return problem(
        429,
        "rate_limited",
        f"too many {limit.category} from this {limit.per} (at most {window}); retry after {retry} s",
        headers={"Retry-After": str(retry)},
    )


class SignInFailures:
    """Failed console sign-ins per operator name from everywhere, in a moving window
    (``DDZ_RATE_LIMIT_SIGN_IN_FAILURES_PER_NAME``): guesses at one name spread over many
    addresses go no faster than this. Only failures count, and the console asks only for
    browsers where the operator has not signed in before, so that the guesses of others
    never lock the operator out there (docs/operations.md)."""

    def __init__(self, moving: Moving, windows: tuple[RateLimitItem, ...]):
        self.moving, self.limit = moving, Limit(FAILED_SIGN_INS, "name", windows)

    def wait(self, name: str) -> int | None:
        """While the failed sign-ins as ``name`` are at the limit, the seconds until one
        more may be tried; None otherwise."""
        refused = self.moving.test([(self.limit, name_key(name))])
        return None if refused is None else max(1, math.ceil(refused.seconds))

    def failed(self, name: str) -> None:
        self.moving.hit([(self.limit, name_key(name))])


def install(app: Flask, config: Config) -> Counter | None:
    """Limits the app's requests as ``config`` says (nothing when switched off); the
    console finds the failed sign-ins' limit in ``app.extensions["ddz_sign_in_failures"]``."""
    check_categories(app)
    if not config.rate_limits:
        return None

    share = config.rate_limit_local_share
    if not 0 <= share <= 1:
        raise ValueError(f"DDZ_RATE_LIMIT_LOCAL_SHARE must be between 0 and 1, not {share}")
    operator_token = (config.operator_token or "").encode()
    limits: dict[str, list[Limit]] = {}
    for category, per_token, per_address, local_share in (
        (COMMANDS, config.rate_limit_commands, config.rate_limit_commands_per_address, share),
        (READS, config.rate_limit_reads, config.rate_limit_reads_per_address, share),
        (STREAMS, config.rate_limit_streams, config.rate_limit_streams_per_address, share),
        (SIGNUPS, None, config.rate_limit_signups_per_address, 0.0),
        (CREATIONS, config.rate_limit_creations, config.rate_limit_creations_per_address, 0.0),
    ):
        limits[category] = [Limit(category, "address", tuple(parse_many(per_address)), local_share)]
        if per_token:
            limits[category].insert(
                0, Limit(category, "token", tuple(parse_many(per_token)), local_share)
            )
    limits[SIGN_INS] = [
        Limit(SIGN_INS, per, tuple(parse_many(config.rate_limit_sign_ins)))
        for per in ("name and address", "address")
    ]

    counter, moving = Counter(config), Moving(config)
    app.extensions["ddz_sign_in_failures"] = SignInFailures(
        moving, tuple(parse_many(config.rate_limit_sign_in_failures_per_name))
    )
    hold = config.rate_limit_hold_seconds
    #: (category, per, key) -> (when the window ends, the window gone over)
    over: dict[tuple[str, str, str], tuple[float, RateLimitItem]] = {}

    @app.before_request
    def limit():
        category = request_category()
        if category is None:
            return None
        bearer = bearer_token()
        if bearer and operator_token and hmac.compare_digest(bearer.encode(), operator_token):
            return None
        categories = [category, CREATIONS] if request.endpoint in CREATING else [category]
        # A request without a token is counted per address only (it gets its 401 after).
        counted = [
            (lim, KEY_OF[lim.per]())
            for each in categories
            for lim in limits[each]
            if bearer or lim.per != "token"
        ]
        now = time.time()
        for lim, key in counted:
            until, window = over.get((lim.category, lim.per, key), (0.0, None))
            if window is not None and until > now:
                # Held, then refused: see Config.rate_limit_hold_seconds (a gevent
                # worker only parks the request meanwhile).
                time.sleep(min(hold, until - now))
                return _refusal(lim, window, until - time.time())
        fixed = [(lim, key) for lim, key in counted if lim.category not in MOVING]
        refused = counter.hit(fixed) if fixed else None
        if refused is None:
            refused = moving.hit([(lim, key) for lim, key in counted if lim.category in MOVING])
        if refused is None:
            return None
        if len(over) >= OVER_SIZE:
            over.clear()
        over[(refused.limit.category, refused.limit.per, refused.key)] = (
            now + refused.seconds,
            refused.window,
        )
        return _refusal(refused.limit, refused.window, refused.seconds)

    return counter
