"""The RQ worker class of ``ddz worker``."""

from __future__ import annotations

from rq import SimpleWorker

from service.app import logs


class JobWorker(SimpleWorker):
    """SimpleWorker runs jobs in this process (no fork per job, so a bot turn takes
    milliseconds; the job timeout still bounds a stuck one); every line a job logs names
    the job (``job_id``)."""

    def perform_job(self, job, *args, **kwargs):
        with logs.context(job_id=job.id):
            return super().perform_job(job, *args, **kwargs)
