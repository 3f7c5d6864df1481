"""The front door: ``/`` says what the service is and where to go; ``/docs`` is the API
reference (Swagger UI, its files served from the flask-swagger-ui package, none from
the internet), ``/openapi.json`` and ``/openapi.yaml`` the contract as this service
generates it (the committed ``openapi.yaml``, which tests/test_front.py compares); and
``/play/`` the reference web table, a page built on the TypeScript client
(clients/typescript; its built files are committed under ``static/play``, so that serving
needs no Node), installable on a phone (its manifest, icons and service worker,
``/play/sw.js``, which keeps the page's shell and never an answer of the API). Plain Flask: pages and files, not in ``openapi.yaml``."""

from __future__ import annotations

import functools
import hashlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import flask_swagger_ui
import yaml
from flask import Blueprint, Response, abort, current_app, render_template, send_from_directory

bp = Blueprint("front", __name__, template_folder="templates")

STATIC = Path(__file__).resolve().parent / "static"
#: Swagger UI's files, as its package ships them.
SWAGGER_UI = Path(flask_swagger_ui.__file__).resolve().parent / "dist"
SWAGGER_FILES = frozenset({"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"})
#: The page's files change only with the service: a browser keeps them for an hour.
ASSET_CACHE = "public, max-age=3600"
#: A page runs its own scripts and styles and talks to its own service, nothing else.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; manifest-src 'self'; worker-src 'self'; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'"
)
#: The web table's service worker fetches the service's own files, nothing else.
WORKER_POLICY = "default-src 'none'; connect-src 'self'"
#: The web table's shell, which its service worker keeps: the page and its files.
PLAY_SHELL = ("play.js", "play.css", "manifest.webmanifest", "icon-192.png", "icon-512.png")
#: Swagger UI sets style attributes as it draws (the same, with inline styles allowed).
DOCS_POLICY = PAGE_POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")


def as_yaml(document: dict) -> str:
    """The contract's text, as ``ddz openapi`` prints it and ``openapi.yaml`` holds it."""
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def service_version() -> str:
    try:
        return version("ddz-server")
    except PackageNotFoundError:  # a checkout run without installing
        return "unknown"


@functools.cache
def asset_url(folder: str, name: str) -> str:
    """A page's file by a URL that changes with its content: browsers keep each for an
    hour, and a new version of the service is still seen at once."""
    directory = SWAGGER_UI if folder == "docs" else STATIC / folder
    digest = hashlib.sha256((directory / name).read_bytes()).hexdigest()[:12]
    where = "/docs/assets" if folder == "docs" else f"/static/{folder}"
    return f"{where}/{name}?v={digest}"


@bp.context_processor
def _asset_urls() -> dict:
    return {"asset": asset_url}


def _contract() -> dict:
    """The app's OpenAPI document (made once per process: it never changes)."""
    extensions = current_app.extensions
    if "ddz_contract" not in extensions:
        extensions["ddz_contract"] = extensions["ddz_api"].spec.to_dict()
    return extensions["ddz_contract"]


def _page(template: str, policy: str = PAGE_POLICY, **context) -> Response:
    response = Response(render_template(template, **context), mimetype="text/html")
    response.headers["Content-Security-Policy"] = policy
    return response


def _asset(directory: Path, name: str) -> Response:
    response = send_from_directory(directory, name, max_age=3600)
    response.headers["Cache-Control"] = ASSET_CACHE
    return response


@bp.route("/")
def index():
    spec = _contract()["info"]
    return _page(
        "front/index.html",
        title=spec["title"],
        api_version=spec["version"],
        version=service_version(),
    )


@bp.route("/docs")
def docs():
    return _page("front/docs.html", DOCS_POLICY, title=_contract()["info"]["title"])


@bp.route("/docs/assets/<name>")
def docs_asset(name: str):
    if name not in SWAGGER_FILES:
        abort(404)
    return _asset(SWAGGER_UI, name)


@bp.route("/openapi.json")
def openapi_json():
    return current_app.json.response(_contract())


@bp.route("/openapi.yaml")
def openapi_yaml():
    return Response(as_yaml(_contract()), mimetype="application/yaml")


@bp.route("/static/<folder>/<name>")
def asset(folder: str, name: str):
    """The pages' own files: the front door's, and the web table's (built)."""
    if folder not in ("front", "play"):
        abort(404)
    return _asset(STATIC / folder, name)


@bp.route("/play/")
def play():
    return _page("play/index.html")


@bp.route("/play/sw.js")
def play_worker():
    """The web table's service worker, at the page's path so that it serves the page
    (its scope). Its list of files names this version's: a new version of the service
    is a new worker, which replaces the files kept."""
    files = ["/play/", *(asset_url("play", name) for name in PLAY_SHELL)]
    shell = "ddz-play-" + hashlib.sha256(" ".join(files).encode()).hexdigest()[:12]
    script = render_template("play/sw.js", shell=shell, files=files)
    response = Response(script, mimetype="text/javascript")
    # Browsers look for a new worker at every visit: never a stale one.
    response.headers["Cache-Control"] = "no-cache"
    # A worker's policy is its script's answer's: it fetches the shell, and the requests it
    # passes through are the page's, under the page's policy.
    response.headers["Content-Security-Policy"] = WORKER_POLICY
    return response
