"""The web pages, beside the REST API and served by the same app: the operators' console
(``/console/``), the front door (``/``) with the API reference (``/docs``, the contract as
``/openapi.yaml`` and ``/openapi.json``) and the web table (``/play/``), the page of
problem codes (``/docs/problems``) and a hand's public replay (``/replay/{match_id}``);
their templates, static files and translations. Plain Flask blueprints: HTML and files,
not in ``openapi.yaml``. They use the application's layers as the API does, and of the API
only what both need (tests/test_layers.py): its problem documents, the process's services
(its connections) and its documents of a match."""

from __future__ import annotations

from flask import Flask

from ..config import Config
from . import console, front, problem_docs, replay


def install(app: Flask, config: Config) -> None:
    """The pages' blueprints, and what the console sets on the app (its session, CSRF
    check and languages, which the replay's page speaks too)."""
    console.install(app, config)
    app.register_blueprint(problem_docs.bp)
    app.register_blueprint(replay.bp)
    app.register_blueprint(front.bp)
