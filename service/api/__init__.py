"""The REST API: one blueprint per resource; and the Flask app factory, which serves the
API and the web pages (service/web) from one app."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from .. import web
from ..config import Config
from . import (
    admin,
    health,
    ledger,
    lobby,
    matches,
    me,
    observe,
    players,
    ratings,
    tables,
    tokens,
    watching,
)
from .encoding import JsonProvider
from .headers import SecurityHeaders, cors
from .limits import RequestBody
from .problems import Api
from .rate_limits import install as install_rate_limits
from .routing import IdConverter, Rule
from .services import Services

API_VERSION = "1.0.0"


class App(Flask):
    """Flask, remembering which functions are coroutines: Flask asks it of every hook and
    the view on every request (nine ``inspect`` calls a command, about 2 % of its CPU),
    and the answer for a function never changes."""

    #: Hooks and views are a few dozen functions; past this, something makes new ones.
    SYNC_REMEMBERED = 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sync: dict[Callable[..., Any], Callable[..., Any]] = {}

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        sync = self._sync.get(func)
        if sync is None:
            sync = super().ensure_sync(func)
            if len(self._sync) < self.SYNC_REMEMBERED:
                self._sync[func] = sync
        return sync


def create_app(
    config: Config | None = None, services: Services | None = None, connect: bool = True
) -> Flask:
    """The app; configuration from the environment unless given. ``connect=False`` makes
    an app that only describes itself (for generating the OpenAPI document)."""
    config = config or Config.from_env()
    app = App("ddz", static_folder=None)
    app.url_rule_class = Rule
    app.url_map.converters["uuid"] = IdConverter
    app.json = JsonProvider(app)
    app.config.update(
        API_TITLE="Shanghai Dou Dizhu game server",
        API_VERSION=API_VERSION,
        OPENAPI_VERSION="3.1.0",
        MAX_CONTENT_LENGTH=config.max_body_bytes,
        API_SPEC_OPTIONS={
            "info": {
                "description": "Four players, two decks, one landlord against three farmers. "
                "Bids and plays are commands appended as events; each seat sees only what "
                "docs/rules.md §6 allows. Errors are RFC 9457 problem documents with a stable `code`.",
            },
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        },
    )
    if connect:
        app.extensions["ddz"] = services or Services.open(config)
    api = Api(app)
    for module in (
        health,
        observe,
        players,
        tokens,
        matches,
        tables,
        lobby,
        me,
        ledger,
        admin,
        ratings,
        watching,
    ):
        api.register_blueprint(module.bp)
    web.install(app, config)
    app.extensions["ddz_api"] = api
    cors(app, config.cors_origins)
    if connect:
        install_rate_limits(app, config)
        observe.install(app)
    # Flask's documented way to wrap the app in WSGI middleware (mypy sees a method).
    app.wsgi_app = SecurityHeaders(  # type: ignore[method-assign]
        RequestBody(app.wsgi_app, config.max_body_bytes, config.body_seconds)
    )
    if config.trusted_proxies:
        # The client's address (its per-address rate limits) is the one the proxies forward.
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=config.trusted_proxies, x_proto=config.trusted_proxies
        )
    logging.getLogger("ddz").setLevel(logging.INFO)
    return app


def openapi_document() -> dict:
    """The OpenAPI document of the app, as generated from its routes and schemas."""
    app = create_app(Config(), connect=False)
    return app.extensions["ddz_api"].spec.to_dict()
