"""The local RateLimiter: each tenant's token bucket as one row of a SQLite file (`rates.db` in the home).

`take` reads the bucket and writes its new state (`citewise.ports.quotas.admit`) inside one
`BEGIN IMMEDIATE` transaction, so every thread of `citewise serve` (the REST and MCP handlers alike) and
any other process on the home draw from the same bucket, and no two admit the same token. A file of its
own, with `synchronous=NORMAL` as the usage counters: a bucket is worth a minute, not a disk flush per
query.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.quotas import MINUTE_US, admit

BUSY_TIMEOUT_SECONDS = 10.0


class LocalRates:
    """A `RateLimiter` in a SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_SECONDS)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS buckets (tenant_id TEXT PRIMARY KEY, tat_us INTEGER NOT NULL)")
        self._lock = threading.Lock()  # one connection: threads take turns on it

    def close(self) -> None:
        """Close the database connection."""
        self._conn.close()

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        with self._lock:
            return self._conn.execute("DELETE FROM buckets WHERE tenant_id = ?", (tenant_id,)).rowcount

    def count_tenant(self, tenant_id: str) -> int:
        with self._lock:
            row = self._conn.execute("SELECT count(*) FROM buckets WHERE tenant_id = ?", (tenant_id,)).fetchone()
        return int(row[0])

    def take(self, tenant_id: str, *, per_minute: int, burst: int, now_us: int) -> int:
        period = max(1, MINUTE_US // per_minute)
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute("SELECT tat_us FROM buckets WHERE tenant_id = ?", (tenant_id,)).fetchone()
                new_tat, wait = admit(row[0] if row else None, now_us, period, burst)
                if new_tat is not None:
                    self._conn.execute(
                        "INSERT OR REPLACE INTO buckets (tenant_id, tat_us) VALUES (?, ?)", (tenant_id, new_tat)
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return wait
