"""Real responses checked against the OpenAPI document (``openapi.yaml``), shared by the
contract's tests (test_openapi, test_schemathesis); no tests here."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from jsonschema import Draft202012Validator

COMMITTED = Path(__file__).resolve().parents[1] / "openapi.yaml"


@functools.cache
def committed_document() -> dict:
    """The committed ``openapi.yaml``, read once per process (by libyaml: PyYAML's own
    reader takes half a second of CPU over it); shared, so not to be changed."""
    return yaml.load(COMMITTED.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)


def resolve(spec: dict, node: Any) -> Any:
    """``node`` with its top-level ``$ref`` (within the document) followed."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"a reference outside the document: {ref}"
        node = spec
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


class Contract:
    """Checks real responses against the document: the status is documented for the
    operation, the media type is one it names, the documented headers are there, and a
    JSON body validates (formats included) against the documented schema."""

    def __init__(self, spec: dict, base_url: str, checking: bool = True):
        self.spec, self.base_url, self.checking = spec, base_url, checking
        self.http = requests.Session()
        self.seen: set[tuple[str, str, int]] = set()

    def validate(self, instance: Any, schema: dict, where: str) -> None:
        root = dict(copy.deepcopy(schema), components=self.spec["components"])
        validator = Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        assert not errors, f"{where}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5]
        )

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        expect: int | None = None,
        **kwargs,
    ):
        """Sends ``method path`` (a path template of the document, filled in from
        ``path_params``; other ``kwargs`` go to requests), checks the answer against the
        document and, with ``expect``, its status; returns it."""
        path_params = kwargs.pop("path_params", {})
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        response = self.http.request(
            method,
            self.base_url + path.format(**path_params),
            headers=headers,
            timeout=30,
            **kwargs,
        )
        if self.checking:
            self.check(response, path, method)
        if expect is not None:
            assert response.status_code == expect, (
                f"{method} {path}: {response.status_code} {response.text[:500]}"
            )
        return response

    def check(self, response: requests.Response, path: str, method: str) -> None:
        where = f"{method} {path} → {response.status_code}"
        operation = self.spec["paths"][path][method.lower()]
        status = str(response.status_code)
        assert status in operation["responses"], (
            f"{where}: undocumented status; {response.text[:500]}"
        )
        documented = resolve(self.spec, operation["responses"][status])
        for header in documented.get("headers", {}):
            assert header in response.headers, f"{where}: no {header} header"
        content = documented.get("content")
        if not content:
            assert not response.content, where
            self.seen.add((path, method.lower(), response.status_code))
            return
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        assert media_type in content, f"{where}: {media_type!r}, not one of {sorted(content)}"
        if media_type.endswith("json"):
            self.validate(response.json(), content[media_type]["schema"], where)
        self.seen.add((path, method.lower(), response.status_code))


def play_the_hand(contract: Contract, match_id: str, tokens: list[str]) -> dict:
    """Plays the hand to its end through the API, each seat as its player: the highest bid,
    the first choice that is accepted otherwise, and the longest legal play (or a pass).
    Returns the last view."""
    at = {"match_id": match_id}
    for _ in range(500):
        views = [
            contract.call(
                "GET", "/v1/matches/{match_id}", token=t, path_params=at, expect=200
            ).json()
            for t in tokens
        ]
        if views[0]["phase"] == "ended":
            return views[0]
        seat = views[0]["turn"]
        assert seat is not None, views[0]
        view, token = views[seat], tokens[seat]
        actions = {a["action"]: a for a in view["actions"]}
        assert actions, view
        if "play" in actions or "pass" in actions:
            legal = contract.call(
                "GET", "/v1/matches/{match_id}/legal", token=token, path_params=at, expect=200
            ).json()
            assert legal["seat"] == seat and legal["version"] == view["version"]
            if legal["plays"]:
                play = max(legal["plays"], key=lambda p: len(p["cards"]))
                body = {
                    "action": "play",
                    "cards": play["cards"],
                    "expected_version": view["version"],
                }
            else:
                assert legal["can_pass"], legal
                body = {"action": "pass", "expected_version": view["version"]}
            contract.call(
                "POST",
                "/v1/matches/{match_id}/commands",
                token=token,
                path_params=at,
                json=body,
                expect=200,
            )
            continue
        (action,) = actions.values()
        if "choices" not in action:  # resume, for a seat that has left
            body = {"action": action["action"]}
            contract.call(
                "POST",
                "/v1/matches/{match_id}/commands",
                token=token,
                path_params=at,
                json=body,
                expect=200,
            )
            continue
        choices = (
            sorted(action["choices"], reverse=True)
            if action["action"] == "bid"
            else action["choices"]
        )
        for value in choices:
            body = {"action": action["action"], "value": value}
            answer = contract.call(
                "POST", "/v1/matches/{match_id}/commands", token=token, path_params=at, json=body
            )
            if answer.status_code == 200:
                break
            assert answer.status_code == 422, answer.text
        else:
            pytest.fail(f"no choice of {action} was accepted")
    pytest.fail("the hand did not end in 500 actions")
