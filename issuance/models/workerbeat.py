"""The last sign of life of each running worker, for `reconcile --check` (a systemd or
kubelet probe of a worker process, which serves no HTTP).

Written by issuance/worker/liveness.py from inside the worker process every few seconds;
deleted when the worker stops cleanly. A worker that died leaves its row behind, growing
stale: the check looks at the newest beat only, and rows older than a day are removed by
the next worker that starts.
"""

from __future__ import annotations

from django.db import models


class WorkerBeat(models.Model):
    worker_id = models.CharField(max_length=64, unique=True)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-beat_at"]

    def __str__(self) -> str:
        return f"WorkerBeat/{self.worker_id}"
