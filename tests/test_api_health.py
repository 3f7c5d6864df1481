"""Liveness and readiness answer 200 without a token (as load balancers call them)."""

from __future__ import annotations

import requests

from test_api_support import ClientApi


def test_healthz_and_readyz_answer_200(client):
    api = ClientApi(client)
    health = api.request("GET", "/healthz")
    assert health.status == 200 and health.json["status"] == "ok"
    ready = api.request("GET", "/readyz")
    assert ready.status == 200 and ready.json["status"] == "ok"
    assert ready.json["checks"] == {"database": "ok", "redis": "ok"}


def test_health_over_http(live_server):
    for path in ("/healthz", "/readyz"):
        response = requests.get(live_server + path, timeout=10)
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")
