"""The service's Prometheus metrics, for the API and the workers alike (docs/operations.md).

With ``PROMETHEUS_MULTIPROC_DIR`` set (``ddz serve`` and ``gunicorn_conf`` set it), each
process writes its samples to files there and ``/metrics`` adds up every process's, the
RQ worker's included when it runs on the same machine: one gunicorn worker's counters
alone would be a fraction of the truth, and a different fraction at each scrape.
Without it (tests, one process) the samples stay in this process's registry."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# No ``*_created`` series beside each counter and histogram: Prometheus has no use for
# them, and they double what a scrape carries.
disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated in prometheus_client
#: Bounds for what takes milliseconds (a request, an append, a job) up to seconds.
FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUEST_SECONDS = Histogram(
    "ddz_http_request_duration_seconds",
    "Time to answer an HTTP request (to its headers, for a stream), by route template and status",
    ["method", "route", "status"],
    buckets=FAST,
)
COMMANDS = Counter(
    "ddz_commands_total",
    "Seat commands (POST .../commands) by action and outcome (ok, or the refusal's code)",
    ["action", "outcome"],
)
VERSION_CONFLICTS = Counter(
    "ddz_version_conflicts_total",
    "Appends refused because another process appended to the match first",
)
APPEND_SECONDS = Histogram(
    "ddz_append_duration_seconds",
    "Time of one command's decide and append (one database round trip when the process saw the match's last event)",
    buckets=FAST,
)
OPEN_STREAMS = Gauge(
    "ddz_open_streams",
    "Event streams (Server-Sent Events) open now",
    multiprocess_mode="livesum",
)
JOB_SECONDS = Histogram(
    "ddz_job_duration_seconds",
    "Time a worker spent on one job (bot turn, turn timeout, settlement), by kind",
    ["kind"],
    buckets=FAST,
)
SETTLEMENT_LAG = Histogram(
    "ddz_settlement_lag_seconds",
    "From a hand's end to its settlement in the ledger",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)


SETTLEMENTS = Counter(
    "ddz_settlements_total",
    "Hands settled in the ledger (each once, by the settlement job)",
)
HOUSE_TAKINGS = Counter(
    "ddz_house_takings_total",
    "Points the house took at settlements, by kind: the system cut (rake) and the disconnect"
    " penalties",
    ["kind"],
)
PENALTIES = Counter(
    "ddz_penalties_total",
    "Disconnect penalties charged at settlements (one per hand with a first disconnect)",
)
SIGN_INS_FAILED = Counter(
    "ddz_console_sign_ins_failed_total",
    "Console sign-ins refused: a wrong name or password (wrong), or past the limit (limited)",
    ["reason"],
)


class Sampled(Collector):
    """Gauges read at scrape time (queue depths, the oldest unsettled hand, workers alive):
    ``sample`` returns (name, help, labels, value) rows."""

    def __init__(self, sample: Callable[[], Iterable[tuple[str, str, dict[str, str], float]]]):
        self.sample = sample

    def collect(self) -> Iterable[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for name, help_text, labels, value in self.sample():
            family = families.get(name)
            if family is None:
                family = families[name] = GaugeMetricFamily(name, help_text, labels=list(labels))
            family.add_metric(list(labels.values()), value)
        return families.values()


def exposition(sampled: Sampled | None = None) -> tuple[bytes, str]:
    """The text of ``/metrics`` and its content type: every process's samples, and the
    gauges read now."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_Everything())
    if sampled is not None:
        registry.register(sampled)
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Everything(Collector):
    """This process's default registry, inside a registry of one scrape."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def process_exited(pid: int) -> None:
    """Drops a dead process's live gauges (its open streams) from the sums."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
