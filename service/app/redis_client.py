"""The one way every process reaches Redis: the server of ``REDIS_URL``, or, with
``REDIS_SENTINELS`` set, the master that Redis Sentinel names (redis-py's ``Sentinel``),
followed after a failover: a connection to the old master is dropped and the next one
asks the sentinels again. Only this module reads those settings."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import redis
from redis.sentinel import Sentinel

from ..config import Config


def sentinels(config: Config) -> list[tuple[str, int]]:
    """The sentinels' addresses of ``REDIS_SENTINELS`` (``host:port`` joined by commas;
    an IPv6 host in brackets); none when it is empty.

    >>> sentinels(Config(redis_sentinels="s1:26379, [::1]:26380"))
    [('s1', 26379), ('::1', 26380)]
    """
    found = []
    for entry in filter(None, (part.strip() for part in config.redis_sentinels.split(","))):
        host, _, port = entry.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"REDIS_SENTINELS: {entry!r} is not host:port (for example s1:26379)")
        found.append((host.strip("[]"), int(port)))
    return found


def connect(config: Config, timeout: float = 5.0) -> redis.Redis:
    """A client of the configuration's Redis; ``timeout`` bounds connecting and each call.
    A call that fails is not tried again: its caller copes (Redis only carries work, and
    the workers' sweep finds again what could not be enqueued), and the next call
    connects afresh. With sentinels: a client of the master they name, with
    ``REDIS_URL``'s database, user and password."""
    timeouts: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    addresses = sentinels(config)
    if not addresses:
        return redis.Redis.from_url(config.redis_url, **timeouts)
    sentinel = Sentinel(addresses, sentinel_kwargs=timeouts, **timeouts)
    client: redis.Redis = sentinel.master_for(config.redis_sentinel_master, **_credentials(config))
    return client


def _credentials(config: Config) -> dict[str, Any]:
    """REDIS_URL's database, user and password (its host and port are the sentinels')."""
    # Made without connecting: its pool keeps what the URL says.
    parsed = redis.Redis.from_url(config.redis_url).connection_pool.connection_kwargs
    return {k: parsed[k] for k in ("db", "username", "password") if parsed.get(k) is not None}


def limits_sentinel_uri(config: Config) -> tuple[str, dict[str, Any]]:
    """With sentinels, the ``limits`` package's storage URI of the master, and the options
    its Sentinel storage takes besides (the master's database; no reads from replicas,
    whose copy lags)."""
    credentials = _credentials(config)
    auth = ""
    if "password" in credentials:
        user = quote(credentials.get("username", ""), safe="")
        auth = f"{user}:{quote(credentials['password'], safe='')}@"
    hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in sentinels(config))
    uri = f"redis+sentinel://{auth}{hosts}/{config.redis_sentinel_master}"
    return uri, {"db": credentials.get("db", 0), "use_replicas": False}
