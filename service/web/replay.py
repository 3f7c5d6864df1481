"""A finished hand's public replay as a page (``/replay/{match_id}``; the API's is ``GET
/v1/matches/{match_id}/replay``, the same document): the seats, each hand as dealt, every
action, the result. HTML, not in the contract."""

from __future__ import annotations

import secrets

from flask import Blueprint, make_response, render_template

from ..api.documents import private_hands_hidden, public_replay

bp = Blueprint("replay_page", __name__, url_prefix="/replay", template_folder="templates")


@bp.route("/<uuid:match_id>", methods=["GET"])
@private_hands_hidden(token=False)
def replay_page(match_id):
    """The replay as a page: the seats, each hand as dealt, every action, the result."""
    nonce = secrets.token_urlsafe(16)
    response = make_response(
        render_template("replay/page.html", record=public_replay(match_id), nonce=nonce)
    )
    # Its own style, and nothing else.
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; frame-ancestors 'none'; base-uri 'none'"
    )
    return response
