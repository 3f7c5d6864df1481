"""The service's Prometheus metrics, for the API and the workers alike (docs/operations.md).

With ``PROMETHEUS_MULTIPROC_DIR`` set (``ddz serve`` and ``gunicorn_conf`` set it), each
process writes its samples to files there and ``/metrics`` adds up every process's, the
RQ worker's included when it runs on the same machine: one gunicorn worker's counters
alone would be a fraction of the truth, and a different fraction at each scrape.
Without it (tests, one process) the samples stay in this process's registry, with
prometheus_client's ``process_*`` of this process; with it, each live process's
``process_*`` are read at the scrape (:class:`Processes`), labelled by pid."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

import psutil
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
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
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
STREAM_CATCH_UPS = Counter(
    "ddz_stream_catch_ups_total",
    "Player streams resumed from an id behind the process's reader of the feed, by where"
    " they read what they missed: the reader's kept events (kept) or the feed (feed)",
    ["source"],
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


#: A process's file in the multiprocess directory: ``counter_1234.db``,
#: ``gauge_livesum_1234.db`` … (prometheus_client names each by the kind and the pid).
_PID_FILE = re.compile(r"_(\d+)\.db$")


class Processes(Collector):
    """The ``process_*`` metrics of every live process that writes to the multiprocess
    directory (each API worker, and the RQ worker that shares it), labelled by ``pid``,
    read with psutil at the scrape. prometheus_client's own process collector reads only
    the process that answers the scrape, and its multiprocess mode exports none."""

    def __init__(self, directory: str):
        self.directory = directory

    def pids(self) -> dict[int, float]:
        """Each pid with a file in the directory, and when its files last changed."""
        changed: dict[int, float] = {}
        with os.scandir(self.directory) as entries:
            for entry in entries:
                found = _PID_FILE.search(entry.name)
                if found is None:
                    continue
                try:
                    at = entry.stat().st_mtime
                except FileNotFoundError:
                    continue  # a dead process's live gauges, removed meanwhile
                pid = int(found.group(1))
                changed[pid] = max(changed.get(pid, 0.0), at)
        return changed

    def collect(self) -> Iterable[Metric]:
        cpu = CounterMetricFamily(
            "process_cpu_seconds_total",
            "User and system CPU time the process spent, by process",
            labels=["pid"],
        )
        rss = GaugeMetricFamily(
            "process_resident_memory_bytes", "Resident memory, by process", labels=["pid"]
        )
        fds = GaugeMetricFamily(
            "process_open_fds", "Open file descriptors, by process", labels=["pid"]
        )
        start = GaugeMetricFamily(
            "process_start_time_seconds",
            "When the process started, in seconds since the Unix epoch, by process",
            labels=["pid"],
        )
        for pid, changed in sorted(self.pids().items()):
            try:
                process = psutil.Process(pid)
                with process.oneshot():
                    started = process.create_time()
                    # Files last written before this process started are a dead
                    # process's (counters stay to be added up), its pid taken since.
                    if changed < started - 1:
                        continue
                    times = process.cpu_times()
                    memory = process.memory_info().rss
                    descriptors = process.num_fds()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # dead (its counters still count), or not ours to read
            label = [str(pid)]
            cpu.add_metric(label, times.user + times.system)
            rss.add_metric(label, memory)
            fds.add_metric(label, descriptors)
            start.add_metric(label, started)
        return [cpu, rss, fds, start]


def exposition(sampled: Sampled | None = None) -> tuple[bytes, str]:
    """The text of ``/metrics`` and its content type: every process's samples (and, with
    several processes, each one's ``process_*``), and the gauges read now."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(Processes(directory))
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
