"""The RQ worker class of ``ddz worker``."""

from __future__ import annotations

from typing import Any

from rq import SimpleWorker
from rq.job import Job

from service.app import logs


class JobWorker(SimpleWorker):
    """SimpleWorker runs jobs in this process (no fork per job, so a bot turn takes
    milliseconds; the job timeout still bounds a stuck one); every line a job logs names
    the job (``job_id``)."""

    def perform_job(self, job: Job, *args: Any, **kwargs: Any) -> bool:
        with logs.context(job_id=job.id):
            return super().perform_job(job, *args, **kwargs)
