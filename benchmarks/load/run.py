"""What benchmarks/capacity.py and benchmarks/soak.py share: the service as deployed
(``ddz serve`` on PostgreSQL and Redis of its own, extra workers beside it), the load
generator (Locust, :mod:`locustfile`, in processes of its own), the CPU and memory of
every process, measured, and the requests' samples, read back by window."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from common import free_port, wait_ready

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LOCUSTFILE = HERE / "locustfile.py"
#: What the people and bots feel (the locustfile's ``SLO`` requests), and the targets.
ACK, TURN = "decision ack", "your_turn delivery"
TARGETS = {ACK: 200.0, TURN: 300.0}
OPERATOR, OPERATOR_PASSWORD = "load-operator", "a load operator's passphrase"
#: All the load comes from one address: the per-address limits and bounds are out of its
#: way (behind a proxy they count the proxy, README); each player's own stay as deployed.
PER_ADDRESS = {
    "DDZ_RATE_LIMIT_COMMANDS_PER_ADDRESS": "1000000/second",
    "DDZ_RATE_LIMIT_READS_PER_ADDRESS": "1000000/second",
    "DDZ_RATE_LIMIT_STREAMS_PER_ADDRESS": "1000000/second",
    "DDZ_RATE_LIMIT_SIGNUPS_PER_ADDRESS": "1000000/second",
    "DDZ_RATE_LIMIT_CREATIONS_PER_ADDRESS": "1000000/second",
    "DDZ_RATE_LIMIT_SIGN_INS": "1000000/second",
    "DDZ_MAX_STREAMS_PER_ADDRESS": "0",
}
#: The groups of processes whose CPU and memory are told apart.
GROUPS = ("api", "workers", "postgres", "redis", "generator")


@dataclass
class Service:
    """``ddz serve`` (its API processes, its worker, its embedded PostgreSQL and Redis)
    and the extra workers beside it."""

    url: str
    serve: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def processes(self) -> dict[int, str]:
        """Every process of the service now, with its group."""
        found: dict[int, str] = {}
        roots = [self.serve.pid] + [w.pid for w in self.extra if w.poll() is None]
        for root in roots:
            try:
                parent = psutil.Process(root)
                tree = [parent, *parent.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for process in tree:
                group = group_of(process)
                if group is not None:
                    found[process.pid] = group
        return found

    def api_workers(self) -> list[int]:
        """The gunicorn workers (not the master)."""
        processes = self.processes()
        return [
            pid
            for pid, group in processes.items()
            if group == "api" and psutil.Process(pid).ppid() in processes
        ]

    def start_worker(self) -> subprocess.Popen[bytes]:
        worker = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "worker"],
            env=self.env,
            stdout=open(self.log.with_suffix(f".worker{len(self.extra)}.log"), "ab"),
            stderr=subprocess.STDOUT,
        )
        self.extra.append(worker)
        return worker

    def five_hundreds(self) -> int:
        """The answers 5xx the API logged: the app's, and gunicorn's own 500s (an error
        outside the app, which its access log never sees)."""
        text = self.log.read_text(errors="replace")
        return len(re.findall(r'"status":5\d\d|"message":"Error handling request', text))

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.env["DATABASE_URL"]) as conn:
            return conn.execute(query).fetchall()


#: A frame of py-spy's raw output: "function (path:line)".
_FRAME = re.compile(r"^(?P<function>.*) \((?P<path>.*?)(?::\d+)?\)$")
#: The project's own code, by path (its packages, not a library's folder of that name).
_OURS = re.compile(rf"^{re.escape(str(ROOT))}/(?=(service|workers)/)")


def profile(running: Service, folder: Path, seconds: float) -> dict[str, list[tuple[str, float]]]:
    """py-spy on every API process and worker at once for ``seconds``, each read without
    pausing it (``--nonblocking``): for each group, its busy samples by the innermost
    frame of the project's own code (a library's work counted to the function of ours
    that called it; the library's own frame when no code of ours is on the stack), the
    busiest first, as shares."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    groups = {pid: g for pid, g in running.processes().items() if g in ("api", "workers")}
    records = {pid: folder / f"profile-{group}-{pid}.txt" for pid, group in groups.items()}
    spies = [
        subprocess.Popen(
            [spy, "record", "--nonblocking", "--full-filenames", "--rate", "100"]
            + ["--duration", f"{seconds:.0f}"]
            + ["--format", "raw", "--output", str(out), "--pid", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid, out in records.items()
    ]
    for each in spies:
        each.wait(seconds + 60)
    tallies: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pid, out in records.items():
        if not out.exists():
            continue  # the process ended meanwhile
        for line in out.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            frames = [m for m in map(_FRAME.match, stack.split(";")) if m]
            if not frames or not count.isdigit():
                continue
            own = [f for f in frames if _OURS.match(f["path"])]
            frame = (own or frames)[-1]
            where = _OURS.sub("", frame["path"]) if own else Path(frame["path"]).name
            tallies[groups[pid]][f"{frame['function']} ({where})"] += int(count)
    shares: dict[str, list[tuple[str, float]]] = {}
    for group, tally in tallies.items():
        total = sum(tally.values())
        ranked = sorted(tally.items(), key=lambda item: -item[1])
        shares[group] = [(name, n / total) for name, n in ranked]
    return shares


def group_of(process: psutil.Process) -> str | None:
    try:
        name, line = process.name(), " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    if "gunicorn" in line:
        return "api"
    if "service.cli worker" in line or "ddz worker" in line:
        return "workers"
    if name.startswith("postgres") or "postgres" in line.split(" ")[0]:
        return "postgres"
    if "redis-server" in name or "redis-server" in line:
        return "redis"
    if "locust" in line:
        return "generator"
    return None


@contextmanager
def service(
    folder: Path, api: int, workers: int, settings: dict[str, str] | None = None
) -> Iterator[Service]:
    """``ddz serve`` with ``api`` API processes on embedded PostgreSQL and Redis of its
    own (a server shared with others would hold its players' streams back, docs/tables.md),
    ``workers`` workers in all, and an operator for the console."""
    port = free_port()
    log = folder / "serve.log"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
        **PER_ADDRESS,
        **(settings or {}),
        "PYTHONUNBUFFERED": "1",
    }
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(api),
            "--data",
            str(folder / "data"),
        ],
        env=env,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    running = Service(f"http://127.0.0.1:{port}", serve, log, env)
    try:
        wait_ready(running.url + "/readyz", serve, timeout=180, log=log)
        text = log.read_text(errors="replace")
        for name, variable in (("PostgreSQL", "DATABASE_URL"), ("Redis", "REDIS_URL")):
            found = re.search(rf"embedded {name}: (\S+)", text)
            if found is None:
                raise RuntimeError(f"ddz serve did not say its {name}'s address:\n{text[-2000:]}")
            running.env[variable] = found.group(1)
        for _ in range(workers - 1):
            running.start_worker()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "service.cli",
                "operator",
                "add",
                OPERATOR,
                "--role",
                "auditor",
                "--password-stdin",
            ],
            input=f"{OPERATOR_PASSWORD}\n".encode(),
            env=running.env,
            check=True,
            capture_output=True,
        )
        yield running
    finally:
        for worker in running.extra:
            if worker.poll() is None:
                worker.terminate()
        for worker in running.extra:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
        if serve.poll() is None:
            serve.terminate()
            try:
                serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(serve.pid, signal.SIGKILL)
                serve.wait()


def generator(
    running: Service,
    folder: Path,
    users: Sequence[int],
    ramp: float,
    hold: float,
    down: float,
    processes: int,
    pace: float = 1.0,
    every_kind: bool = False,
) -> subprocess.Popen[bytes]:
    """Locust on the load model, ``processes`` processes of it (one master and its
    workers when more than one), writing its samples into ``folder``: ``users`` step after
    step, each ramped up to over ``ramp`` seconds and held ``hold``, then all ramped down
    over ``down``; ``every_kind``: at least one user of each kind, whatever the weights
    give."""
    env = {
        **os.environ,
        "DDZ_LOAD_USERS": ",".join(str(step) for step in users),
        "DDZ_LOAD_RAMP": str(ramp),
        "DDZ_LOAD_HOLD": str(hold),
        "DDZ_LOAD_DOWN": str(down),
        "DDZ_LOAD_PACE": str(pace),
        "DDZ_LOAD_SAMPLES": str(folder),
        "DDZ_LOAD_OPERATOR": OPERATOR,
        "DDZ_LOAD_OPERATOR_PASSWORD": OPERATOR_PASSWORD,
        "DDZ_LOAD_EVERY_KIND": "1" if every_kind else "0",
    }
    locust = shutil.which("locust", path=str(Path(sys.executable).parent)) or "locust"
    command = [
        locust,
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--host",
        running.url,
        "--only-summary",
        "--csv",
        str(folder / "locust"),
        "--loglevel",
        "INFO",
    ]
    if processes > 1:
        # The master's port for its workers (it forks them, and they dial --master-port):
        # a free one, Locust's 5557 may be taken.
        port = str(free_port())
        command += ["--processes", str(processes), "--master-bind-host", "127.0.0.1"]
        command += ["--master-bind-port", port, "--master-port", port]
    return subprocess.Popen(
        command,
        env=env,
        stdout=open(folder / "locust.log", "ab"),
        stderr=subprocess.STDOUT,
        cwd=folder,
        # A group of its own: its forked processes are stopped with it (stop()).
        start_new_session=True,
    )


class Sampler:
    """Every few seconds: each process's CPU time and memory (the service's, the
    generator's), and the machine's CPU, in a thread. Memory is the proportional set size
    (PSS): a page shared by several processes is counted once among them, where RSS
    counts it in each (PostgreSQL's shared buffers in every backend that touched them)."""

    def __init__(self, running: Service, interval: float = 2.0):
        self.running = running
        self.interval = interval
        self.generators: list[int] = []
        #: (time, {pid: (group, name, cpu seconds, pss bytes)}, machine busy seconds)
        self.samples: list[tuple[float, dict[int, tuple[str, str, float, int]], float]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.sample()
            self.stopping.wait(self.interval)

    def sample(self) -> None:
        groups = self.running.processes()
        for root in self.generators:
            try:
                parent = psutil.Process(root)
                for process in [parent, *parent.children(recursive=True)]:
                    groups[process.pid] = "generator"
            except psutil.NoSuchProcess:
                pass
        taken: dict[int, tuple[str, str, float, int]] = {}
        for pid, group in groups.items():
            try:
                process = psutil.Process(pid)
                with process.oneshot():
                    cpu = process.cpu_times()
                    taken[pid] = (
                        group,
                        process.name(),
                        cpu.user + cpu.system,
                        process.memory_full_info().pss,
                    )
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        machine = psutil.cpu_times()
        busy = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
        self.samples.append((time.time(), taken, busy))

    def cpu(self, start: float, end: float) -> tuple[dict[str, float], dict[int, float], float]:
        """Between two times: each group's CPU (in cores: 1.0 is one core busy), each
        process's, and the whole machine's (everything on it, others' work too)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {g: float("nan") for g in GROUPS}, {}, float("nan")
        first, last = inside[0], inside[-1]
        seconds = last[0] - first[0]
        by_pid: dict[int, float] = {}
        by_group: dict[str, float] = defaultdict(float)
        seen: dict[int, tuple[str, float]] = {}
        for _, taken, _ in inside:
            for pid, (group, _, cpu, _) in taken.items():
                if pid not in seen:
                    seen[pid] = (group, cpu)
                by_pid[pid] = (cpu - seen[pid][1]) / seconds
        for pid, used in by_pid.items():
            by_group[seen[pid][0]] += used
        return {g: by_group.get(g, 0.0) for g in GROUPS}, by_pid, (last[2] - first[2]) / seconds

    def memory(self, at: float, pids: set[int] | None = None) -> dict[str, float]:
        """Each group's memory (PSS, MiB) at the sample nearest ``at`` (of ``pids`` only,
        when given)."""
        by_group: dict[str, float] = defaultdict(float)
        for pid, (group, _, _, pss) in self.nearest(at).items():
            if pids is None or pid in pids:
                by_group[group] += pss / 2**20
        return {g: by_group.get(g, 0.0) for g in GROUPS}

    def nearest(self, at: float) -> dict[int, tuple[str, str, float, int]]:
        """The processes sampled nearest ``at``."""
        return min(self.samples, key=lambda s: abs(s[0] - at))[1]


@dataclass(frozen=True)
class Sample:
    at: float
    kind: str
    name: str
    ms: float
    failure: str | None


def samples(folder: Path) -> list[Sample]:
    """Every request the generator's processes made (the locustfile's ``DDZ_LOAD_SAMPLES``)."""
    found: list[Sample] = []
    for path in glob.glob(str(folder / "samples-*.jsonl")):
        with open(path) as lines:
            for line in lines:
                try:
                    at, kind, name, ms, failure = json.loads(line)
                except ValueError:
                    continue  # a line cut by a process killed while writing
                found.append(Sample(at, kind, name, ms, failure))
    return sorted(found, key=lambda s: s.at)


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass(frozen=True)
class Window:
    """The requests of a window of time, summed up."""

    requests: int
    per_second: float
    failures: list[str]
    #: (p50, p99, count) of each ``SLO`` (milliseconds).
    felt: dict[str, tuple[float, float, int]]

    def meets(self) -> bool:
        return not self.failures and all(
            self.felt.get(name, (0.0, float("inf"), 0))[1] <= target
            for name, target in TARGETS.items()
        )


def window(found: Sequence[Sample], start: float, end: float) -> Window:
    inside = [s for s in found if start <= s.at < end]
    felt: dict[str, list[float]] = defaultdict(list)
    for s in inside:
        if s.kind == "SLO" and s.failure is None:
            felt[s.name].append(s.ms)
    return Window(
        requests=sum(1 for s in inside if s.kind != "SLO"),
        per_second=sum(1 for s in inside if s.kind != "SLO") / max(end - start, 1e-9),
        failures=[f"{s.kind} {s.name}: {s.failure}" for s in inside if s.failure],
        felt={
            name: (percentile(values, 0.5), percentile(values, 0.99), len(values))
            for name, values in felt.items()
        },
    )


def stopped_early(folder: Path, found: Sequence[Sample], planned: float) -> str | None:
    """What Locust said when its run ended before ``planned`` seconds (its log's lines
    about stopping, lost generators among them); None when it ran its course."""
    if found and found[-1].at - found[0].at >= 0.9 * planned:
        return None
    log = (folder / "locust.log").read_text(errors="replace").splitlines()
    said = [line for line in log if re.search(r"missing|stopping|Traceback|Error", line)]
    return "\n".join(said[-8:]) or "nothing"


def wait_for(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Waits for the generator to end its run. One still running ``timeout`` seconds on
    (a thousand users stopping take a while) is told here and left to :func:`stop`: the
    run's figures are taken all the same, since every request is in the samples already
    (an hour's soak once ended in a traceback here, its figures lost)."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"Locust still ran {timeout:.0f} s on: stopped", flush=True)


def stop(process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Stops the generator and every process it forked (its process group)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    try:
        os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            os.killpg(process.pid, 0)
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone
