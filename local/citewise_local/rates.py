"""The local RateLimiter: each tenant's token bucket as one row of a SQLite file (`rates.db` in the home).

`take` reads the bucket and writes its new state (`citewise.ports.quotas.admit`) inside one
`BEGIN IMMEDIATE` transaction, so every thread of `citewise serve` (the REST and MCP handlers alike) and
any other process on the home draw from the same bucket, and no two admit the same token. A file of its
own, with `synchronous=NORMAL` as the usage counters: a bucket is worth a minute, not a disk flush per
query.
"""

from __future__ import annotations

from pathlib import Path

from citewise.ports.quotas import MINUTE_US, admit
from citewise_local.sqlite import TenantTables

BUSY_TIMEOUT_SECONDS = 10.0


class LocalRates(TenantTables):
    """A `RateLimiter` in a SQLite file."""

    tenant_tables = ("buckets",)

    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            ("CREATE TABLE IF NOT EXISTS buckets (tenant_id TEXT PRIMARY KEY, tat_us INTEGER NOT NULL)",),
            busy_timeout=BUSY_TIMEOUT_SECONDS,
            synchronous_normal=True,
        )

    def take(self, tenant_id: str, *, per_minute: int, burst: int, now_us: int) -> int:
        period = max(1, MINUTE_US // per_minute)
        with self._write() as conn:
            row = conn.execute("SELECT tat_us FROM buckets WHERE tenant_id = ?", (tenant_id,)).fetchone()
            new_tat, wait = admit(row[0] if row else None, now_us, period, burst)
            if new_tat is not None:
                conn.execute("INSERT OR REPLACE INTO buckets (tenant_id, tat_us) VALUES (?, ?)", (tenant_id, new_tat))
        return wait
