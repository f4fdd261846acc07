"""The local ErasureLog: erasure records and receipts in a SQLite file of their own (`erasures.db`).

A file apart from the registry, index and blobs it erases, so no erasure can remove its own receipt.
`start` checks and writes inside one `BEGIN IMMEDIATE` transaction: two processes (`citewise serve`
and the CLI) asking at once start one erasure.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from citewise.ports.erasure import Erasure, ErasureInProgressError, ErasureStatus
from citewise_local.sqlite import SQLiteFile

_SCHEMA = "CREATE TABLE IF NOT EXISTS erasures (tenant_id TEXT PRIMARY KEY, status TEXT NOT NULL, body TEXT NOT NULL)"


class LocalErasureLog(SQLiteFile):
    """An `ErasureLog` in a SQLite file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, (_SCHEMA,))

    def get(self, tenant_id: str) -> Erasure | None:
        with self._lock:
            row = self._conn.execute("SELECT body FROM erasures WHERE tenant_id = ?", (tenant_id,)).fetchone()
        return Erasure.model_validate_json(row[0]) if row else None

    def erasing(self, tenant_id: str) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT status FROM erasures WHERE tenant_id = ?", (tenant_id,)).fetchone()
        return row is not None and row[0] == ErasureStatus.ERASING.value

    def start(self, erasure: Erasure) -> None:
        with self._write() as conn:
            row = conn.execute("SELECT status FROM erasures WHERE tenant_id = ?", (erasure.tenant_id,)).fetchone()
            if row is not None and row[0] == ErasureStatus.ERASING.value:
                raise ErasureInProgressError(
                    "an erasure of this tenant is already running", details={"tenant_id": erasure.tenant_id}
                )
            _put(conn, erasure)

    def save(self, erasure: Erasure) -> None:
        with self._lock:
            _put(self._conn, erasure)


def _put(conn: sqlite3.Connection, erasure: Erasure) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO erasures (tenant_id, status, body) VALUES (?, ?, ?)",
        (erasure.tenant_id, erasure.status.value, erasure.model_dump_json()),
    )
