"""One SQLite file and one connection that threads take turns on: what every local store is built on.

Each local store (usage, rates, erasures, sources, credentials, registry, feedback, conversations) is a
file of its own in the home, opened once per process and shared by all of `citewise serve`'s threads.
One connection behind a lock rather than one per thread: SQLite lets one writer in at a time anyway, and
a store stays one object to open and close. The connection is in autocommit mode (`isolation_level=None`)
so that nothing opens a transaction behind the code's back: a read is one statement, and a write that
must be atomic says so with `_write()`, one `BEGIN IMMEDIATE` transaction. That takes SQLite's write lock
before its first read, so a check and the write it guards see no other writer in between, across threads
and processes alike (`citewise serve` and the CLI may share a home), as a DynamoDB condition does on AWS.
The journal is WAL: readers do not wait for a writer, nor a writer for readers. The local index is not
one of these stores (a connection per reading thread, a watcher, a matrix in memory); it shares only
`transaction`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from citewise.ports.erasure import ERASE_BATCH

BUSY_TIMEOUT_SECONDS = 30.0
"""How long a writer waits for another process's write lock before SQLite fails with `database is locked`
(threads of one process wait on the store's own lock instead)."""


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` when the block raises, KeyboardInterrupt included, or
    the commit itself fails: the connection is never left inside a transaction. The caller holds whatever
    lock keeps other threads off `conn` meanwhile."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class SQLiteFile:
    """One SQLite file, its schema applied, and the connection its store's threads take turns on."""

    def __init__(
        self,
        path: Path,
        schema: Iterable[str] = (),
        *,
        busy_timeout: float = BUSY_TIMEOUT_SECONDS,
        synchronous_normal: bool = False,
    ) -> None:
        """Open (or create) the file and run `schema`'s statements, which must be idempotent (`IF NOT
        EXISTS`): every process opening the home runs them. `synchronous_normal` is for files worth less
        than a disk flush per commit: in WAL mode a commit is then not fsynced, so a power cut may lose the
        last commits, never corrupt the file (a crash of the process loses none)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=busy_timeout)
        self._conn.execute("PRAGMA journal_mode=WAL")
        if synchronous_normal:
            self._conn.execute("PRAGMA synchronous=NORMAL")
        for statement in schema:
            self._conn.execute(statement)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the database connection."""
        self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write `transaction`, the connection held by this thread throughout."""
        with self._lock, transaction(self._conn):
            yield self._conn

    def _count_rows(self, tenant_id: str, tables: Iterable[str]) -> int:
        """How many rows the tenant has in `tables`, counted in one statement (one snapshot)."""
        counts = [f"(SELECT count(*) FROM {table} WHERE tenant_id = ?)" for table in tables]  # noqa: S608 - table names of the store's own schema
        with self._lock:
            (count,) = self._conn.execute("SELECT " + " + ".join(counts), (tenant_id,) * len(counts)).fetchone()
        return int(count)


class TenantTables(SQLiteFile):
    """A store whose tenant is its rows in `tenant_tables` (`citewise.ports.erasure.TenantStore`): erasure
    empties them in that order, a batch of `limit` rows at a time, and counts what is left of them."""

    tenant_tables: ClassVar[tuple[str, ...]]

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        with self._write() as conn:
            return self._erase_rows(conn, tenant_id, limit)

    def count_tenant(self, tenant_id: str) -> int:
        return self._count_rows(tenant_id, self.tenant_tables)

    def _erase_rows(self, conn: sqlite3.Connection, tenant_id: str, limit: int) -> int:
        """Delete up to `limit` of the tenant's rows, table by table, inside the caller's `_write()`."""
        erased = 0
        for table in self.tenant_tables:
            erased += conn.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE tenant_id = ? LIMIT ?)",  # noqa: S608 - table names of the store's own schema
                (tenant_id, limit - erased),
            ).rowcount
        return erased
