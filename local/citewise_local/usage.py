"""The local UsageMeter: one SQLite file (`usage.db` in the home), one row per tenant, day and counter.

`add` is an upsert per counter (`ON CONFLICT ... DO UPDATE SET value = value + excluded.value`) inside
one `BEGIN IMMEDIATE` transaction: SQLite's write lock serialises writers across threads and processes
(`citewise serve` and the CLI may share a home), and the addition happens inside the statement, so no
increment is lost. A row per counter, not a column: a counter added later needs no migration.

A file of its own rather than a table of `registry.db`: counters are written on every query, and their
connection commits with `synchronous=NORMAL` (in WAL mode a commit is then not fsynced, so a power cut
may lose the last increments, never corrupt the file; a crash of the process loses none). The registry
keeps its full durability, and the query path does not wait for a disk flush.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.usage import COUNTERS, DayUsage, UsageCounts
from citewise_local.sqlite import SQLiteFile

_SCHEMA = """CREATE TABLE IF NOT EXISTS usage (
    tenant_id TEXT NOT NULL,
    day TEXT NOT NULL,
    counter TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, day, counter)
)"""


class LocalUsage(SQLiteFile):
    """A `UsageMeter` in a SQLite file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, (_SCHEMA,), synchronous_normal=True)

    def add(self, tenant_id: str, day: date, counts: UsageCounts) -> None:
        rows = [(tenant_id, day.isoformat(), name, value) for name, value in counts.nonzero().items()]
        if not rows:
            return
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO usage (tenant_id, day, counter, value) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, day, counter) DO UPDATE SET value = value + excluded.value",
                rows,
            )

    def read(self, tenant_id: str, from_day: date, to_day: date) -> list[DayUsage]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT day, counter, value FROM usage WHERE tenant_id = ? AND day BETWEEN ? AND ? ORDER BY day",
                (tenant_id, from_day.isoformat(), to_day.isoformat()),
            ).fetchall()
        days: dict[str, dict[str, int]] = {}
        for day, counter, value in rows:
            if counter in COUNTERS:  # a counter this version does not know is kept, not shown
                days.setdefault(day, {})[counter] = value
        return [
            DayUsage(day=date.fromisoformat(day), counts=UsageCounts.model_validate(counts))
            for day, counts in days.items()
        ]

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        with self._lock:
            days = [
                day
                for (day,) in self._conn.execute(
                    "SELECT DISTINCT day FROM usage WHERE tenant_id = ? ORDER BY day LIMIT ?", (tenant_id, limit)
                ).fetchall()
            ]
            for day in days:
                self._conn.execute("DELETE FROM usage WHERE tenant_id = ? AND day = ?", (tenant_id, day))
        return len(days)

    def count_tenant(self, tenant_id: str) -> int:
        with self._lock:
            (count,) = self._conn.execute(
                "SELECT count(DISTINCT day) FROM usage WHERE tenant_id = ?", (tenant_id,)
            ).fetchone()
        return int(count)
