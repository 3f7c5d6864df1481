"""The front door: ``/`` names the service, its version and the ways in; the contract is
served as committed (``/openapi.json``, ``/openapi.yaml``); the API reference (``/docs``)
and the web table (``/play/``) are pages whose every file the service serves itself."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from contract import committed_document

from service.web.front import service_version

SPEC_PATH = Path(__file__).resolve().parent.parent / "openapi.yaml"


class Resources(HTMLParser):
    """The links and the files (scripts, styles, images) a page names."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.files: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "a" and named.get("href"):
            self.links.append(named["href"] or "")
        elif tag == "script" and named.get("src"):
            self.files.append(named["src"] or "")
        elif tag == "link" and named.get("href"):
            self.files.append(named["href"] or "")
        elif tag == "img" and named.get("src"):
            self.files.append(named["src"] or "")


def resources(html: str) -> Resources:
    parser = Resources()
    parser.feed(html)
    return parser


def test_the_front_door_names_the_service_and_every_way_in(client):
    answer = client.get("/")
    assert answer.status_code == 200
    assert answer.mimetype == "text/html"
    page = answer.get_data(as_text=True)
    assert f"Version {service_version()}" in page
    links = resources(page).links
    for way in ("/play/", "/docs", "/docs/problems", "/console/", "/healthz", "/openapi.yaml"):
        assert way in links, way
    # Each way in answers (the console asks an operator to sign in first; /readyz says
    # 503 here, where no worker runs).
    for way in links:
        assert client.get(way).status_code in (200, 302, 503), way


def test_the_served_contract_is_the_committed_one(client):
    committed = SPEC_PATH.read_text(encoding="utf-8")
    as_yaml = client.get("/openapi.yaml")
    assert as_yaml.status_code == 200
    assert as_yaml.get_data(as_text=True) == committed
    as_json = client.get("/openapi.json")
    assert as_json.status_code == 200 and as_json.mimetype == "application/json"
    assert as_json.get_json() == committed_document()


def test_the_pages_files_are_the_service_s_own(client):
    """The API reference and the web table name no file of another site, and the service
    serves each they name; their policy lets the browser fetch nothing from elsewhere."""
    for path in ("/docs", "/play/", "/"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        policy = answer.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "http" not in policy, policy
        files = resources(answer.get_data(as_text=True)).files
        for name in files:
            if name.startswith("data:"):
                continue  # no request at all (the empty icon)
            assert re.match(r"^/[^/]", name), f"{path} names {name}"
            served = client.get(name)
            assert served.status_code == 200, name
            assert "max-age" in served.headers["Cache-Control"]


def test_only_the_pages_files_are_served(client):
    for path in (
        "/docs/assets/index.html",
        "/docs/assets/../templates/index.template.html",
        "/static/console/x.css",
        "/static/play/..%2F..%2F__init__.py",
    ):
        assert client.get(path).status_code == 404, path


def test_the_page_of_problem_codes_is_linked_from_the_reference(client):
    docs = client.get("/docs").get_data(as_text=True)
    assert "/docs/problems" in resources(docs).links
    assert client.get("/docs/problems").status_code == 200
