"""`citewise serve`'s refreshes of web sources: the local stand-in for the schedule and the refresh queue.

A thread wakes every `interval` seconds: it starts a run for each source whose time has come
(`start_due`, as the schedule's tick on AWS) and runs what the local refresh queue holds, one run after
another (the runs the tick just started, and those `POST /v1/sources/{id}/refresh` queued: the server
`wake`s the loop when it answers one, so a refresh asked now starts now). Pages go where
an upload goes: into the blob store, then an S3 notification to the server's ingest queue
(`NotifyingWriter`), so the ingest function indexes them exactly as it indexes an upload.

`close` stops it cleanly: the run in progress stops at its next page (its time budget becomes 0), saves
where it is, and goes back on the queue, so the next `citewise serve` continues it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from citewise.ingest.sources import BlobWriter, start_due
from citewise.ports.blobstore import BlobStore, object_key
from citewise.ports.sources import RefreshMessage
from citewise.runtime.services import Services
from citewise_local.emulator import s3_record
from citewise_local.sources import LocalSources

logger = logging.getLogger(__name__)
REFRESH_INTERVAL_S = 60.0
"""How often `citewise serve` looks for due sources and queued refreshes."""


class NotifyingWriter(BlobWriter):
    """A `DocumentWriter` for `citewise serve`: the object in the blob store (as on AWS), then its S3
    notification to the ingest queue, as S3 sends one there."""

    def __init__(self, blobs: BlobStore, notify: Callable[[dict[str, Any]], None], sequence: Callable[[], str]) -> None:
        super().__init__(blobs)
        self.notify = notify
        self.sequence = sequence

    def store(
        self, tenant_id: str, path: str, data: bytes, *, content_type: str, owner: str, metadata: dict[str, str]
    ) -> None:
        super().store(tenant_id, path, data, content_type=content_type, owner=owner, metadata=metadata)
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        key = object_key(tenant_id, path)
        self.notify(s3_record("ObjectCreated:Put", key, size=len(data), etag=etag, sequencer=self.sequence()))

    def remove(self, tenant_id: str, path: str) -> None:
        super().remove(tenant_id, path)
        self.notify(s3_record("ObjectRemoved:Delete", object_key(tenant_id, path), sequencer=self.sequence()))


class RefreshLoop:
    """The thread that runs due and queued refreshes (module docstring)."""

    def __init__(
        self,
        services: Services,
        queue: LocalSources,
        *,
        interval: float = REFRESH_INTERVAL_S,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.services = services
        self.queue = queue
        self.interval = interval
        self.log = log
        self._stopping = threading.Event()
        self._woken = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="citewise-refresh", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Run the queue now, not at the next tick (a refresh asked through the API was queued)."""
        self._woken.set()

    def close(self, timeout: float = 30.0) -> None:
        """Stop after the page in progress; a run cut short goes back on the queue."""
        self._stopping.set()
        self._woken.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def tick(self) -> int:
        """One pass: start what is due, then run the queue until it is empty or the loop stops; the runs
        finished."""
        started = start_due(self.services.sources, self.queue, now=datetime.now(UTC))
        if started:
            self.log(f"refresh: {len(started)} source(s) due")
        finished = 0
        while not self._stopping.is_set() and (message := self.queue.receive()) is not None:
            finished += self._run(message)
        return finished

    def _run(self, message: RefreshMessage) -> int:
        try:
            run = self.services.refresher().run(message, time_left=self._time_left)
        except Exception as exc:  # noqa: BLE001 - one source's failure must not stop the others' refreshes
            logger.warning("refresh of source %s failed", message.source_id, exc_info=True)
            self.log(f"refresh of source {message.source_id} failed: {exc}")
            return 0
        if run is None:
            return 0
        if run.finished_at is None:  # stopped by `close`: continued by the next serve
            self.queue.send(message)
            return 0
        s = run.summary
        self.log(
            f"refresh of source {message.source_id}: {s.requests} requests, {s.not_modified} not modified, "
            f"{s.changed} changed, {s.new} new, {s.removed} removed, {s.failed} failed"
            + (f", stopped at {s.capped}" if s.capped else "")
        )
        return 1

    def _time_left(self) -> float | None:
        return 0.0 if self._stopping.is_set() else None

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._woken.clear()  # before the pass: a wake during it brings another at once
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a failing pass is logged; the next one tries again
                logger.warning("refresh pass failed", exc_info=True)
            self._woken.wait(self.interval)
