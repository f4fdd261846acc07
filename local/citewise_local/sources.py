"""The local SourceRegistry: one SQLite file (`sources.db` in the home), and the local refresh queue.

Table `sources` holds one row per source (its JSON whole, the refresh lock's run id and lease end in
columns so that taking the lock is one conditional UPDATE), `pages` one row per page state. A write is
one `BEGIN IMMEDIATE` transaction. `refresh_queue` is what SQS is on AWS: the runs `POST
/v1/sources/{id}/refresh` asked for, which `citewise serve`'s refresh loop takes in order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from citewise.domain.errors import ConflictError, NotFoundError
from citewise.domain.sources import PageState, RefreshLock, RefreshRun, RefreshRunningError, Source, url_key
from citewise.ports.sources import RefreshMessage
from citewise_local.sqlite import TenantTables

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS sources (
        tenant_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        body TEXT NOT NULL,
        due_at REAL NOT NULL,
        run_id TEXT,
        lease_until REAL,
        PRIMARY KEY (tenant_id, source_id)
    )""",
    """CREATE TABLE IF NOT EXISTS pages (
        tenant_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        url_key TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant_id, source_id, url_key)
    )""",
    """CREATE TABLE IF NOT EXISTS refresh_queue (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        run_id TEXT NOT NULL
    )""",
)


class LocalSources(TenantTables):
    """A `SourceRegistry` and a `RefreshQueue` in a SQLite file."""

    tenant_tables = ("pages", "sources", "refresh_queue")

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)

    def put_source(self, source: Source) -> None:
        with self._write() as conn:
            try:
                conn.execute(
                    "INSERT INTO sources (tenant_id, source_id, body, due_at) VALUES (?, ?, ?, ?)",
                    (source.tenant_id, source.source_id, _body(source), source.next_refresh_at.timestamp()),
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError("a source with this id exists", details={"id": source.source_id}) from exc

    def source(self, tenant_id: str, source_id: str) -> Source | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT body FROM sources WHERE tenant_id = ? AND source_id = ?", (tenant_id, source_id)
            ).fetchone()
        return Source.model_validate_json(row[0]) if row else None

    def tenant_sources(self, tenant_id: str) -> list[Source]:
        with self._lock:
            rows = self._conn.execute("SELECT body FROM sources WHERE tenant_id = ?", (tenant_id,)).fetchall()
        found = [Source.model_validate_json(body) for (body,) in rows]
        return sorted(found, key=lambda source: (source.created_at, source.source_id))

    def delete_source(self, tenant_id: str, source_id: str) -> bool:
        with self._write() as conn:
            conn.execute("DELETE FROM pages WHERE tenant_id = ? AND source_id = ?", (tenant_id, source_id))
            deleted = conn.execute(
                "DELETE FROM sources WHERE tenant_id = ? AND source_id = ?", (tenant_id, source_id)
            ).rowcount
        return bool(deleted)

    def due(self, now: datetime, *, limit: int) -> list[tuple[str, str]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT tenant_id, source_id FROM sources WHERE due_at <= ? ORDER BY due_at LIMIT ?",
                (now.timestamp(), limit),
            ).fetchall()
        return [(tenant_id, source_id) for tenant_id, source_id in rows]

    def start_run(self, tenant_id: str, source_id: str, lock: RefreshLock, now: datetime) -> None:
        with self._write() as conn:
            row = conn.execute(
                "SELECT body, run_id, lease_until FROM sources WHERE tenant_id = ? AND source_id = ?",
                (tenant_id, source_id),
            ).fetchone()
            if row is None:
                raise NotFoundError("no such source", details={"id": source_id})
            body, run_id, lease_until = row
            if run_id is not None and lease_until > now.timestamp():
                raise RefreshRunningError(source_id, run_id)
            source = Source.model_validate_json(body).model_copy(update={"running": lock})
            conn.execute(
                "UPDATE sources SET body = ?, run_id = ?, lease_until = ?, due_at = ? "
                "WHERE tenant_id = ? AND source_id = ?",
                (_body(source), lock.run.run_id, *[lock.lease_until.timestamp()] * 2, tenant_id, source_id),
            )

    def save_run(self, tenant_id: str, source_id: str, lock: RefreshLock) -> bool:
        with self._write() as conn:
            source = _held(conn, tenant_id, source_id, lock.run.run_id)
            if source is None:
                return False
            conn.execute(
                "UPDATE sources SET body = ?, lease_until = ? WHERE tenant_id = ? AND source_id = ?",
                (
                    _body(source.model_copy(update={"running": lock})),
                    lock.lease_until.timestamp(),
                    tenant_id,
                    source_id,
                ),
            )
        return True

    def finish_run(self, tenant_id: str, source_id: str, run: RefreshRun, next_refresh_at: datetime) -> bool:
        with self._write() as conn:
            source = _held(conn, tenant_id, source_id, run.run_id)
            if source is None:
                return False
            done = source.model_copy(update={"running": None, "last_run": run, "next_refresh_at": next_refresh_at})
            conn.execute(
                "UPDATE sources SET body = ?, due_at = ?, run_id = NULL, lease_until = NULL "
                "WHERE tenant_id = ? AND source_id = ?",
                (_body(done), next_refresh_at.timestamp(), tenant_id, source_id),
            )
        return True

    def pages(self, tenant_id: str, source_id: str) -> list[PageState]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT body FROM pages WHERE tenant_id = ? AND source_id = ?", (tenant_id, source_id)
            ).fetchall()
        return [PageState.model_validate_json(body) for (body,) in rows]

    def put_pages(self, tenant_id: str, source_id: str, pages: Iterable[PageState]) -> None:
        rows = [(tenant_id, source_id, url_key(page.url), page.model_dump_json()) for page in pages]
        with self._write() as conn:
            conn.executemany("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)", rows)

    def delete_pages(self, tenant_id: str, source_id: str, urls: Iterable[str]) -> None:
        rows = [(tenant_id, source_id, url_key(url)) for url in urls]
        with self._write() as conn:
            conn.executemany("DELETE FROM pages WHERE tenant_id = ? AND source_id = ? AND url_key = ?", rows)

    # --- the refresh queue ---------------------------------------------------------------------------

    def send(self, message: RefreshMessage, *, delay_seconds: int = 0) -> None:
        """Queue a run for `citewise serve`'s refresh loop (no delay locally: the loop polls)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO refresh_queue (tenant_id, source_id, run_id) VALUES (?, ?, ?)",
                (message.tenant_id, message.source_id, message.run_id),
            )

    def receive(self) -> RefreshMessage | None:
        """Take the oldest queued run, or None."""
        with self._write() as conn:
            row = conn.execute("SELECT seq, tenant_id, source_id, run_id FROM refresh_queue ORDER BY seq").fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM refresh_queue WHERE seq = ?", (row[0],))
        return RefreshMessage(tenant_id=row[1], source_id=row[2], run_id=row[3])


def _held(conn: sqlite3.Connection, tenant_id: str, source_id: str, run_id: str) -> Source | None:
    """The source if `run_id` holds it."""
    row = conn.execute(
        "SELECT body FROM sources WHERE tenant_id = ? AND source_id = ? AND run_id = ?", (tenant_id, source_id, run_id)
    ).fetchone()
    return Source.model_validate_json(row[0]) if row else None


def _body(source: Source) -> str:
    return source.model_dump_json()
