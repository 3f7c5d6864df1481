"""The RQ worker class of ``ddz worker``."""

from __future__ import annotations

from typing import Any

import redis
from rq import SimpleWorker
from rq.job import Job

from service.app import logs


class JobWorker(SimpleWorker):
    """SimpleWorker runs jobs in this process (no fork per job, so a bot turn takes
    milliseconds; the job timeout still bounds a stuck one); every line a job logs names
    the job (``job_id``).

    RQ's main loop waits out a lost Redis only while it dequeues; its other calls to Redis
    between two jobs (the suspension flag, the heartbeat, maintenance) would end the worker
    if Redis went away at that moment. Those are skipped instead, and the dequeue that
    follows waits for Redis with its back-off (the sweeper's timer tells the outage)."""

    def perform_job(self, job: Job, *args: Any, **kwargs: Any) -> bool:
        with logs.context(job_id=job.id):
            return super().perform_job(job, *args, **kwargs)

    def check_for_suspension(self, burst: bool) -> None:
        try:
            super().check_for_suspension(burst)
        except redis.ConnectionError:
            pass

    def heartbeat(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().heartbeat(*args, **kwargs)
        except redis.ConnectionError:
            pass

    def unsubscribe(self) -> None:
        # RQ unsubscribes, then stops its pubsub thread, which redis-py 8 waits for without a
        # limit; a thread that read the unsubscription's answer before it was told to stop
        # waits for a new subscription (up to a minute), and so did the worker's exit after
        # SIGTERM. Told first, the thread leaves as that answer comes.
        if self.pubsub_thread is not None:
            self.pubsub_thread.stop(timeout=0)
        super().unsubscribe()  # type: ignore[no-untyped-call]  # RQ leaves it untyped

    def run_maintenance_tasks(self) -> None:
        try:
            super().run_maintenance_tasks()  # type: ignore[no-untyped-call]  # RQ leaves it untyped
        except redis.ConnectionError:
            pass
