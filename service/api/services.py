"""The app's connections, made by the app factory and kept on ``app.extensions``."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from flask import current_app
from psycopg_pool import ConnectionPool

from ..app.commands import Commands
from ..app.feed import PlayerFeed
from ..app.feed_fanout import FeedFanout
from ..app.redis_client import connect
from ..app.tables import Tables
from ..app.work import enqueuer, table_enqueuer
from ..config import Config
from ..store import (
    Announcer,
    EventStore,
    Fanout,
    Notifier,
    Players,
    StateCache,
    open_pool,
)
from ..store.creations import CreationKeys
from ..store.feed import Feed
from ..store.operators import Operators
from ..store.tables import TableStore
from .open_streams import OpenStreams


@dataclass
class Services:
    config: Config
    pool: ConnectionPool
    store: EventStore
    commands: Commands
    players: Players
    operators: Operators
    notifier: Notifier
    fanout: Fanout
    redis: redis.Redis
    tables: Tables
    feed: PlayerFeed
    feed_fanout: FeedFanout
    creation_keys: CreationKeys
    announcer: Announcer
    open_streams: OpenStreams

    @classmethod
    def open(cls, config: Config) -> Services:
        pool = open_pool(config.database_url, config.db_pool_size, "ddz", config.db_timeout)
        announcer = Announcer(pool)
        store = EventStore(pool, StateCache(config.state_cache_size), announcer)
        players = Players(pool)
        connection = connect(config)
        # After an append, the work the new state calls for (a bot turn) goes on the queue.
        commands = Commands(store, enqueuer(connection))
        open_streams = OpenStreams(config, players.issued)

        def revoked(digest_hex: str | None) -> None:
            players.forget(digest_hex)
            open_streams.revoked(digest_hex)

        notifier = Notifier(config.database_url, on_event=store.learn, on_revoked=revoked)
        feed = PlayerFeed(store, Feed(pool))
        return cls(
            config=config,
            pool=pool,
            store=store,
            commands=commands,
            players=players,
            operators=Operators(pool),
            notifier=notifier,
            fanout=Fanout(store, notifier, config.max_streams),
            redis=connection,
            tables=Tables(
                store,
                TableStore(store, config.bot_account_tables),
                commands,
                table_enqueuer(connection),
            ),
            feed=feed,
            feed_fanout=FeedFanout(feed, notifier),
            creation_keys=CreationKeys(pool),
            announcer=announcer,
            open_streams=open_streams,
        )

    def close(self, wait: bool = True) -> None:
        """``wait``: for the listener's thread to end (a process about to exit need not)."""
        self.announcer.close()
        self.notifier.close(wait)
        self.open_streams.close()
        self.pool.close()
        self.redis.close()


def services() -> Services:
    return current_app.extensions["ddz"]
