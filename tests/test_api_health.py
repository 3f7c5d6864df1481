"""Liveness and readiness answer without a token (as load balancers call them). Ready
means PostgreSQL and Redis answer and a worker lives; without one, 503 says which check
failed."""

from __future__ import annotations

import time

import requests
from api_support import ClientApi

from service.api import create_app
from service.app.work import beat, stopped


def test_healthz_and_readyz_answer_200(client, live_worker):
    api = ClientApi(client)
    health = api.request("GET", "/healthz")
    assert health.status == 200 and health.json["status"] == "ok"
    ready = api.request("GET", "/readyz")
    assert ready.status == 200 and ready.json["status"] == "ok"
    assert ready.json["checks"] == {"database": "ok", "redis": "ok", "worker": "ok"}


def test_health_over_http(live_server, live_worker):
    for path in ("/healthz", "/readyz"):
        response = requests.get(live_server + path, timeout=10)
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")


def test_readyz_without_a_worker_answers_503_naming_it(client):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.content_type == "application/problem+json"
    body = response.get_json()
    assert body["code"] == "not_ready" and "worker" in body["detail"]
    assert body["checks"]["database"] == "ok" and body["checks"]["redis"] == "ok"
    assert body["checks"]["worker"].startswith("no worker alive")
    # The process itself is up.
    assert client.get("/healthz").status_code == 200


def test_readyz_fails_once_the_worker_stops_beating(config):
    app = create_app(config)
    services = app.extensions["ddz"]
    beat(services.redis, "test-worker", lasting=0.5)
    try:
        client = app.test_client()
        assert client.get("/readyz").status_code == 200
        time.sleep(0.7)  # no heartbeat since: the worker hangs, or died with SIGKILL
        response = client.get("/readyz")
        assert response.status_code == 503, response.get_json()
        assert response.get_json()["checks"]["worker"].startswith("no worker alive")
        beat(services.redis, "test-worker", lasting=0.5)
        assert client.get("/readyz").status_code == 200
    finally:
        stopped(services.redis, "test-worker")
        services.close()
