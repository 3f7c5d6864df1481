"""The RQ worker class of ``ddz worker``."""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from rq import SimpleWorker
from rq.exceptions import StopRequested
from rq.job import Job
from rq.queue import Queue

from service.app import logs
from service.app.work import REDIS_AWAY

from .context import context
from .sweeper import OUTAGES, answering, forget, sweep_soon

log = logging.getLogger(__name__)


class JobWorker(SimpleWorker):
    """SimpleWorker runs jobs in this process (no fork per job, so a bot turn takes
    milliseconds; the job timeout still bounds a stuck one); every line a job logs names
    the job (``job_id``).

    RQ's main loop waits out a lost Redis only while it dequeues; its other calls to Redis
    between two jobs (the suspension flag, the heartbeat, maintenance) would end the worker
    if Redis went away at that moment. Those are skipped instead, and the dequeue that
    follows waits for Redis with its back-off (the sweeper's timer tells the outage).

    Redis lost in the middle of a job (taking it, its heartbeat, its end), or around the
    dequeue (the worker's state), would end the worker too: the worker waits for Redis
    instead (see :meth:`execute_job` and :meth:`dequeue_job_and_maintain_ttl`)."""

    def perform_job(self, job: Job, *args: Any, **kwargs: Any) -> bool:
        with logs.context(job_id=job.id):
            done = super().perform_job(job, *args, **kwargs)
        if done:
            answering()
        return done

    def check_for_suspension(self, burst: bool) -> None:
        try:
            super().check_for_suspension(burst)
        except REDIS_AWAY:
            pass

    def heartbeat(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().heartbeat(*args, **kwargs)
        except REDIS_AWAY:
            pass

    def unsubscribe(self) -> None:
        # RQ unsubscribes, then stops its pubsub thread, which redis-py 8 waits for without a
        # limit; a thread that read the unsubscription's answer before it was told to stop
        # waits for a new subscription (up to a minute), and so did the worker's exit after
        # SIGTERM. Told first, the thread leaves as that answer comes.
        thread = self.pubsub_thread
        if thread is not None:
            thread.stop(timeout=0)
        try:
            super().unsubscribe()  # type: ignore[no-untyped-call]  # RQ leaves it untyped
        except REDIS_AWAY:
            # Or the thread, woken by another message first (its subscription's
            # confirmation, in a short burst), left and closed the connection as RQ sent
            # the unsubscription on it: the subscription ended with the connection.
            if thread is not None:
                thread.join(1)
            if self.pubsub is not None:
                self.pubsub.close()

    def run_maintenance_tasks(self) -> None:
        try:
            super().run_maintenance_tasks()  # type: ignore[no-untyped-call]  # RQ leaves it untyped
        except REDIS_AWAY:
            pass

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        """A job that failed because PostgreSQL or Redis was away (a failover) left its
        work undone: the sweep runs as soon as they answer again, rather than at its next
        turn (a job that fails for another reason waits for that turn)."""
        if isinstance(exc_info[1], tuple(kind for kind, _ in OUTAGES)):
            sweep_soon()
        super().handle_exception(job, *exc_info)

    # --- Redis lost in the middle of a job, or around the dequeue -------------------------

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """RQ's dequeue, waited out when Redis is away: RQ itself waits only around its
        blocking pop, and a call before or after it (the worker's state, after a Redis
        failover the old master refusing) would end the worker. A job taken just before
        the failure is found again by the sweep (it is in no queue a worker reads)."""
        config = context().config
        backoff = config.min_backoff_seconds
        while True:
            try:
                return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            except REDIS_AWAY:
                if self._stop_requested:
                    raise StopRequested() from None
                backoff = self._pause(backoff, config.max_backoff_seconds)

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Runs the job; if Redis goes away while RQ takes it, renews its heartbeat or
        records its end, waits until Redis answers again (backing off as the sweeper
        does), then forgets what RQ kept of the job and has the sweep run at once: what the
        job did is in PostgreSQL, and the sweep enqueues again what it left undone (its
        own work, or what it could not enqueue). Stopped meanwhile, the worker leaves the
        job as it is: its heartbeat lapses, and the other workers enqueue it again."""
        try:
            super().execute_job(job, queue)
        except REDIS_AWAY as exc:
            log.warning(
                "Redis went away during job %s (%s): waiting for it; the sweep then finds "
                "what the job left undone",
                job.id,
                str(exc).strip() or type(exc).__name__,
            )
            self._forget_when_back(job.id)

    def _forget_when_back(self, job_id: str) -> None:
        config = context().config
        backoff = config.min_backoff_seconds
        while not self._stop_requested:
            try:
                forget(self.connection, job_id)
            except REDIS_AWAY:
                backoff = self._pause(backoff, config.max_backoff_seconds)
                continue
            except redis.RedisError as exc:  # a half-flushed job: the sweep copes
                log.warning("could not forget job %s: %s", job_id, exc)
            log.info("Redis is back: job %s forgotten, sweeping for lost work", job_id)
            sweep_soon()
            return

    def _pause(self, seconds: float, longest: float) -> float:
        """Sleeps ``seconds`` (less if the worker is told to stop); the next pause."""
        until = time.monotonic() + seconds
        while not self._stop_requested and time.monotonic() < until:
            time.sleep(min(0.2, max(0.0, until - time.monotonic())))
        return min(seconds * 2, longest)
