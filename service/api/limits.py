"""The request body limit, for bodies sent without a Content-Length too.

Werkzeug refuses a body whose Content-Length exceeds ``MAX_CONTENT_LENGTH``, but cuts a
chunked body at the limit and lets the app read what is left: a command followed by
padding would pass. This WSGI middleware reads such a body up to the limit first and
answers 413 itself when there is more."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable

from werkzeug.wsgi import get_current_url

from .problems import problem, too_large


class BodyLimit:
    def __init__(self, app: Callable, limit: int):
        self.app = app
        self.limit = limit

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("CONTENT_LENGTH") in (None, "") and environ.get("REQUEST_METHOD") in (
            "POST",
            "PUT",
            "PATCH",
        ):
            body = environ["wsgi.input"].read(self.limit + 1)
            if len(body) > self.limit:
                # Outside Flask's request: the problem's page on the request's host.
                base = get_current_url(environ, host_only=True).rstrip("/")
                return problem(413, "body_too_large", too_large(self.limit), base=base)(
                    environ, start_response
                )
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            environ.pop("HTTP_TRANSFER_ENCODING", None)
            environ["wsgi.input_terminated"] = False
        return self.app(environ, start_response)
