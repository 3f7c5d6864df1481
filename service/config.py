"""The configuration of every process (the API, gunicorn, the workers, the CLI): one field
per setting, each read from the environment variable named next to it; tests pass a
mapping instead. Nothing here imports the app: gunicorn's master reads it before gevent
patches the standard library."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any, ClassVar

#: Connections a gunicorn worker keeps for commands and reads when its event streams and long
#: polls are at their bound (``max_streams``): without this room, 3,000 streams on 1,000
#: connections left a command unanswered for 30 s.
COMMAND_CONNECTIONS = 100


@dataclass(frozen=True)
class Config:
    #: PostgreSQL (libpq URL or DSN): DATABASE_URL.
    database_url: str = "postgresql://postgres@127.0.0.1:5432/ddz"
    #: Redis: REDIS_URL. With sentinels (below), only its database number, user and
    #: password are used: the sentinels name the server.
    redis_url: str = "redis://127.0.0.1:6379/0"
    #: Redis Sentinel: the sentinels' addresses, ``host:port`` joined by commas
    #: (``s1:26379,s2:26379,s3:26379``): REDIS_SENTINELS. Set, every process asks them for
    #: the master and follows the new one after a failover. Empty: REDIS_URL's server.
    redis_sentinels: str = ""
    #: The name the sentinels monitor the master under: REDIS_SENTINEL_MASTER.
    redis_sentinel_master: str = "ddz"
    #: The operator's bearer token: DDZ_OPERATOR_TOKEN. Unset: no operator access.
    operator_token: str | None = None
    #: Largest request body in bytes: DDZ_MAX_BODY_BYTES.
    max_body_bytes: int = 16 * 1024
    #: Seconds a request's body may take to arrive, counted from its headers; one still
    #: arriving then is answered 408 ``body_timeout`` and its connection closed:
    #: DDZ_BODY_SECONDS. The largest body (16 KiB) takes under 7 s at 20 kbit/s, a poor
    #: mobile link; a client that trickles its body holds a connection no longer.
    body_seconds: float = 10.0
    #: How long one event stream stays open at most before the client reconnects (each
    #: stream draws up to a fifth less: service/api/streaming.py): DDZ_STREAM_SECONDS.
    stream_seconds: float = 300.0
    #: Seconds between keep-alive comments on a quiet stream: DDZ_KEEPALIVE_SECONDS.
    keepalive_seconds: float = 15.0
    #: Database connections per process: DDZ_DB_POOL_SIZE.
    db_pool_size: int = 16
    #: Reverse proxies in front of the API that set X-Forwarded-For and X-Forwarded-Proto
    #: (nginx, an Ingress): DDZ_TRUSTED_PROXIES. 0: none, the client's address is the
    #: connection's. Behind a proxy, leaving it 0 puts every client under one address's
    #: rate limits; setting it without a proxy lets clients choose their address.
    trusted_proxies: int = 0
    #: Matches in play whose latest state each process keeps in memory, so that a command
    #: on one reads only the events appended since (a state is some 60 kB by a hand's end;
    #: one not used for 5 minutes is dropped, and an eighth as many ended ones are kept
    #: besides): DDZ_STATE_CACHE_SIZE.
    state_cache_size: int = 2048
    #: Origins whose browser pages may call the API (CORS), comma-separated, e.g.
    #: ``https://play.example,https://admin.example``: DDZ_CORS_ORIGINS. Empty: none.
    cors_origins: str = ""
    #: Seconds a request (or a job) waits for a database connection before it answers 503
    #: (or fails, to be run again): DDZ_DB_TIMEOUT.
    db_timeout: float = 10.0
    #: A worker is alive while its heartbeat is, which it renews every third of this many
    #: seconds from a thread of its own: when it lapses, the other workers enqueue the dead
    #: one's started job again and /readyz fails if no worker is left:
    #: DDZ_WORKER_HEARTBEAT_SECONDS.
    worker_heartbeat_seconds: float = 3.0
    #: How often each worker looks for turns past their deadline and for started jobs of dead
    #: workers (seconds): DDZ_DEADLINE_SCAN_SECONDS.
    deadline_scan_seconds: float = 1.0
    #: How often each worker sweeps for work lost with Redis or a worker (seconds):
    #: DDZ_SWEEP_SECONDS.
    sweep_seconds: float = 15.0
    #: After a failed pass the workers' timers wait this long, then twice as long each time:
    #: DDZ_MIN_BACKOFF_SECONDS.
    min_backoff_seconds: float = 1.0
    #: ... up to this many seconds, and a worker that lost Redis tries it again as often:
    #: DDZ_MAX_BACKOFF_SECONDS.
    max_backoff_seconds: float = 8.0
    #: Rate limits, and the bounds on what one caller holds open (``max_streams_per_*``),
    #: on or off (``off``, ``false`` or ``0``): DDZ_RATE_LIMITS. Each limit below
    #: is one or more of ``N/second``, ``N/minute``, ``N/hour`` joined by ``;``.
    rate_limits: bool = True
    #: Commands (POST commands, seats, leave; new matches and tokens, revocations) per
    #: token: DDZ_RATE_LIMIT_COMMANDS; and per client address: DDZ_RATE_LIMIT_COMMANDS_PER_ADDRESS.
    rate_limit_commands: str = "10/second;300/minute"
    rate_limit_commands_per_address: str = "100/second;3000/minute"
    #: Reads (views, events, legal plays, records, lists, ledger) per token:
    #: DDZ_RATE_LIMIT_READS; per address: DDZ_RATE_LIMIT_READS_PER_ADDRESS.
    rate_limit_reads: str = "20/second;600/minute"
    rate_limit_reads_per_address: str = "200/second;6000/minute"
    #: Opening event streams and long polls per token: DDZ_RATE_LIMIT_STREAMS; per address:
    #: DDZ_RATE_LIMIT_STREAMS_PER_ADDRESS.
    rate_limit_streams: str = "10/second;300/minute"
    rate_limit_streams_per_address: str = "100/second;3000/minute"
    #: New players per address (a moving window): DDZ_RATE_LIMIT_SIGNUPS_PER_ADDRESS.
    rate_limit_signups_per_address: str = "10/minute;100/hour"
    #: New matches, tables and lobby tickets (moving windows; each is a command too), per
    #: token: DDZ_RATE_LIMIT_CREATIONS, and per address:
    #: DDZ_RATE_LIMIT_CREATIONS_PER_ADDRESS. A hand takes a minute or more: a player, or a
    #: bot account playing several matches at once, starts far fewer than one a second.
    rate_limit_creations: str = "2/second;30/minute"
    rate_limit_creations_per_address: str = "20/second;300/minute"
    #: Console sign-in attempts (POSTs of the form; a moving window), counted per client
    #: address and, separately, per operator name from that address (so that nobody locks
    #: an operator out from elsewhere): DDZ_RATE_LIMIT_SIGN_INS.
    rate_limit_sign_ins: str = "10/minute"
    #: Failed console sign-ins per operator name, from every address (a moving window):
    #: guesses spread over many addresses go no faster; a browser where the operator has
    #: signed in before is not held to it: DDZ_RATE_LIMIT_SIGN_IN_FAILURES_PER_NAME.
    rate_limit_sign_in_failures_per_name: str = "20/hour"
    #: A caller refused again while it is known to be over a limit gets its 429 after this
    #: many seconds (at most until its window ends): a client that ignores Retry-After
    #: then sends a request per connection per hold, not thousands a second, and others
    #: keep the CPU: DDZ_RATE_LIMIT_HOLD_SECONDS.
    rate_limit_hold_seconds: float = 1.0
    #: The share of each limit on commands, reads and streams (0 to 1) that a process
    #: counts in its own memory before it asks Redis for the total:
    #: DDZ_RATE_LIMIT_LOCAL_SHARE. 0 counts every request in Redis (exact across
    #: processes; a round trip per request); see service/api/rate_limits.py.
    rate_limit_local_share: float = 0.5
    #: gunicorn worker processes for the API: WEB_CONCURRENCY (the usual name on platforms
    #: that set it). 0: one per core, since a gevent worker runs on one.
    web_concurrency: int = 0
    #: Open event streams and long polls (``wait``) per API process; one more is answered
    #: 503 ``too_many_streams`` with Retry-After, so that they cannot take the connections
    #: commands and reads need: DDZ_MAX_STREAMS. Keep it below ``worker_connections``
    #: (gunicorn refuses to start with less than ``COMMAND_CONNECTIONS`` between them).
    max_streams: int = 5000
    #: Open event streams and long polls one caller may hold at once, across every API
    #: process (counted in Redis), per token: DDZ_MAX_STREAMS_PER_TOKEN; per player (or
    #: operator), all its tokens together: DDZ_MAX_STREAMS_PER_PLAYER; per client address
    #: (an IPv6 /64 as one): DDZ_MAX_STREAMS_PER_ADDRESS. One more is answered 429
    #: ``open_stream_limit`` with Retry-After. 0: no bound. A player at a table holds two
    #: (its own stream and the match's), a browser at most six per site; a token gets
    #: room for a few tabs, a player for a few devices. An address is shared by everyone
    #: behind one NAT, so its bound is high, but a tenth of one process's streams: no
    #: single address can fill a process. Off with DDZ_RATE_LIMITS.
    max_streams_per_token: int = 8
    max_streams_per_player: int = 16
    max_streams_per_address: int = 500
    #: Open connections per gunicorn worker (streams included): DDZ_WORKER_CONNECTIONS.
    worker_connections: int = 6000
    #: Requests one client connection carries before the API closes it (as nginx's
    #: ``keepalive_requests``; the client opens another): DDZ_REQUESTS_PER_CONNECTION.
    requests_per_connection: int = 100
    #: Database connections per RQ worker process (a worker runs one job at a time, plus its
    #: sweeper's timer): DDZ_WORKER_DB_POOL_SIZE.
    worker_db_pool_size: int = 4
    #: Where a worker serves its own /metrics, as ``host:port`` (``0.0.0.0:9101``), for a
    #: worker on another machine than the API: DDZ_WORKER_METRICS. Empty: none (a worker
    #: beside the API under ``ddz serve`` shares PROMETHEUS_MULTIPROC_DIR with it instead).
    worker_metrics: str = ""
    #: The key that signs the console's session cookies: DDZ_CONSOLE_SECRET. Every API
    #: process must have the same one (gunicorn's master draws one for its workers when it
    #: is unset; then a restart signs every operator out).
    console_secret: str | None = None
    #: Console sessions last this many seconds after signing in: DDZ_CONSOLE_SESSION_SECONDS.
    console_session_seconds: int = 8 * 3600
    #: The console's cookie only over HTTPS (``on`` behind TLS): DDZ_CONSOLE_SECURE_COOKIE.
    console_secure_cookie: bool = False
    #: Seconds a lobby ticket that allows bots waits for people before the empty seats of
    #: its table go to system bots: DDZ_LOBBY_BOTS_AFTER.
    lobby_bots_after: float = 30.0
    #: Seconds a table rests after a hand is settled before it deals the next (a new
    #: table's default, and the lobby's tables'): DDZ_TABLE_NEXT_HAND_SECONDS.
    table_next_hand_seconds: int = 5
    #: Seconds a table of people only that lost a person between hands waits for another
    #: (from the lobby, or anyone) before it closes (a new table's default, and the
    #: lobby's tables'): DDZ_TABLE_CLOSE_SECONDS.
    table_close_seconds: int = 120
    #: Tables a bot account may sit at at once, its waiting lobby ticket counting as one
    #: (a person sits at one): DDZ_BOT_ACCOUNT_TABLES.
    bot_account_tables: int = 4
    #: Seconds a public table's watchers are behind the table: each event reaches their
    #: stream this long after it happened (docs/tables.md, "Watching"):
    #: DDZ_WATCH_DELAY_SECONDS.
    watch_delay_seconds: float = 0.0
    #: Milliseconds the ``hard`` bot level searches per decision: DDZ_BOT_SEARCH_MS.
    bot_search_ms: float = 50.0
    #: The largest base stake (底分) a match, table or lobby ticket may have: DDZ_MAX_UNIT.
    #: Ten thousand times the default stake; the ledger holds the worst hand at any stake
    #: the contract allows (migrations/0012_ledger_amounts.sql), so this bound is the
    #: operators' choice of what a hand may move, not the database's.
    max_unit: Decimal = Decimal("10000.00")
    #: The largest system cut (系统得分) a match or table may have, as a share of each
    #: winner's gain: DDZ_MAX_RAKE.
    max_rake: Decimal = Decimal("0.10")
    #: Days an Idempotency-Key (of a command or of a creation) is kept: a retry within them
    #: gets the first answer, a request after them is a new one: DDZ_KEEP_KEYS_DAYS.
    keep_keys_days: float = 7.0
    #: Days a player's token and an operator's console session are kept after they expire,
    #: then deleted: DDZ_KEEP_EXPIRED_DAYS. (Events, settlements, the ledger and the audit
    #: trail are kept for ever: they refuse deletes; see docs/operations.md, "Retention".)
    keep_expired_days: float = 30.0
    #: How often each worker prunes what is past those ages (seconds): DDZ_PRUNE_SECONDS.
    prune_seconds: float = 3600.0
    #: ``ddz archive`` exports the hands settled at least this many days ago unless told a
    #: date: DDZ_ARCHIVE_AFTER_DAYS.
    archive_after_days: int = 90

    _ENV: ClassVar[dict[str, str]] = {
        "database_url": "DATABASE_URL",
        "redis_url": "REDIS_URL",
        "redis_sentinels": "REDIS_SENTINELS",
        "redis_sentinel_master": "REDIS_SENTINEL_MASTER",
        "watch_delay_seconds": "DDZ_WATCH_DELAY_SECONDS",
        "operator_token": "DDZ_OPERATOR_TOKEN",
        "max_body_bytes": "DDZ_MAX_BODY_BYTES",
        "body_seconds": "DDZ_BODY_SECONDS",
        "stream_seconds": "DDZ_STREAM_SECONDS",
        "keepalive_seconds": "DDZ_KEEPALIVE_SECONDS",
        "db_pool_size": "DDZ_DB_POOL_SIZE",
        "trusted_proxies": "DDZ_TRUSTED_PROXIES",
        "state_cache_size": "DDZ_STATE_CACHE_SIZE",
        "cors_origins": "DDZ_CORS_ORIGINS",
        "db_timeout": "DDZ_DB_TIMEOUT",
        "worker_heartbeat_seconds": "DDZ_WORKER_HEARTBEAT_SECONDS",
        "deadline_scan_seconds": "DDZ_DEADLINE_SCAN_SECONDS",
        "sweep_seconds": "DDZ_SWEEP_SECONDS",
        "min_backoff_seconds": "DDZ_MIN_BACKOFF_SECONDS",
        "max_backoff_seconds": "DDZ_MAX_BACKOFF_SECONDS",
        "rate_limits": "DDZ_RATE_LIMITS",
        "rate_limit_commands": "DDZ_RATE_LIMIT_COMMANDS",
        "rate_limit_commands_per_address": "DDZ_RATE_LIMIT_COMMANDS_PER_ADDRESS",
        "rate_limit_reads": "DDZ_RATE_LIMIT_READS",
        "rate_limit_reads_per_address": "DDZ_RATE_LIMIT_READS_PER_ADDRESS",
        "rate_limit_streams": "DDZ_RATE_LIMIT_STREAMS",
        "rate_limit_streams_per_address": "DDZ_RATE_LIMIT_STREAMS_PER_ADDRESS",
        "rate_limit_signups_per_address": "DDZ_RATE_LIMIT_SIGNUPS_PER_ADDRESS",
        "rate_limit_creations": "DDZ_RATE_LIMIT_CREATIONS",
        "rate_limit_creations_per_address": "DDZ_RATE_LIMIT_CREATIONS_PER_ADDRESS",
        "rate_limit_sign_ins": "DDZ_RATE_LIMIT_SIGN_INS",
        "rate_limit_sign_in_failures_per_name": "DDZ_RATE_LIMIT_SIGN_IN_FAILURES_PER_NAME",
        "rate_limit_hold_seconds": "DDZ_RATE_LIMIT_HOLD_SECONDS",
        "rate_limit_local_share": "DDZ_RATE_LIMIT_LOCAL_SHARE",
        "web_concurrency": "WEB_CONCURRENCY",
        "max_streams": "DDZ_MAX_STREAMS",
        "max_streams_per_token": "DDZ_MAX_STREAMS_PER_TOKEN",
        "max_streams_per_player": "DDZ_MAX_STREAMS_PER_PLAYER",
        "max_streams_per_address": "DDZ_MAX_STREAMS_PER_ADDRESS",
        "worker_connections": "DDZ_WORKER_CONNECTIONS",
        "requests_per_connection": "DDZ_REQUESTS_PER_CONNECTION",
        "worker_db_pool_size": "DDZ_WORKER_DB_POOL_SIZE",
        "worker_metrics": "DDZ_WORKER_METRICS",
        "console_secret": "DDZ_CONSOLE_SECRET",
        "console_session_seconds": "DDZ_CONSOLE_SESSION_SECONDS",
        "console_secure_cookie": "DDZ_CONSOLE_SECURE_COOKIE",
        "lobby_bots_after": "DDZ_LOBBY_BOTS_AFTER",
        "table_next_hand_seconds": "DDZ_TABLE_NEXT_HAND_SECONDS",
        "table_close_seconds": "DDZ_TABLE_CLOSE_SECONDS",
        "bot_account_tables": "DDZ_BOT_ACCOUNT_TABLES",
        "bot_search_ms": "DDZ_BOT_SEARCH_MS",
        "max_unit": "DDZ_MAX_UNIT",
        "max_rake": "DDZ_MAX_RAKE",
        "keep_keys_days": "DDZ_KEEP_KEYS_DAYS",
        "keep_expired_days": "DDZ_KEEP_EXPIRED_DAYS",
        "prune_seconds": "DDZ_PRUNE_SECONDS",
        "archive_after_days": "DDZ_ARCHIVE_AFTER_DAYS",
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, **overrides: Any) -> Config:
        values: dict[str, Any] = {}
        for field in fields(cls):
            name = cls._ENV.get(field.name)
            if name and environ.get(name):
                kind: Callable[[str], Any] = (
                    type(field.default) if field.default is not None else str
                )
                if kind is bool:
                    values[field.name] = environ[name].strip().lower() not in (
                        "0",
                        "false",
                        "off",
                        "no",
                    )
                else:
                    values[field.name] = kind(environ[name])
        values.update(overrides)
        return cls(**values)
