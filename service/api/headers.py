"""Headers on every answer: the security headers, and CORS for the configured origins."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from flask import Flask
from flask_cors import CORS

#: An API answers JSON and event streams, never a page: nothing in it is to be sniffed as
#: another type, framed, given resources, or told where the caller came from.
SECURITY_HEADERS = [
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"),
    ("Referrer-Policy", "no-referrer"),
]
#: Answers are a player's own view, hand included: no cache keeps them, unless the answer
#: sets a policy of its own (the event stream's ``no-cache``).
NO_STORE = ("Cache-Control", "no-store")


class SecurityHeaders:
    """WSGI middleware, outermost, so that answers made outside Flask's handlers get the
    headers too. A list extended in ``start_response`` costs less than Flask's
    ``after_request`` on a ``Headers`` object."""

    def __init__(self, app: Callable):
        self.app = app

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        def start(status: str, headers: list, exc_info=None):
            given = {name.lower() for name, _ in headers}
            if "cache-control" not in given:
                headers.append(NO_STORE)
            # A page of the console sets a policy of its own (its style and script).
            headers.extend(h for h in SECURITY_HEADERS if h[0].lower() not in given)
            return start_response(status, headers, exc_info)

        return self.app(environ, start)


def cors(app: Flask, origins: str) -> None:
    """Lets pages of ``origins`` (comma-separated) call the API from a browser; none when
    empty. Bearer tokens, not cookies: no credentials mode."""
    allowed = [origin.strip() for origin in origins.split(",") if origin.strip()]
    if not allowed:
        return
    CORS(
        app,
        origins=allowed,
        methods=["GET", "POST"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
        expose_headers=["WWW-Authenticate"],
        max_age=600,
    )
