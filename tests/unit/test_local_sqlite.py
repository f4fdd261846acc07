"""The local SQLite stores' shared plumbing (`citewise_local.sqlite`): each store opens its file as it
always has (WAL, its own durability and busy timeout), a write is one transaction whole or not at all,
and a tenant's rows are erased table by table, in order and in batches."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from citewise_local.conversations import LocalConversations
from citewise_local.credentials import LocalCredentials
from citewise_local.erasure import LocalErasureLog
from citewise_local.feedback import LocalFeedback
from citewise_local.rates import LocalRates
from citewise_local.registry import LocalRegistry
from citewise_local.sources import LocalSources
from citewise_local.sqlite import SQLiteFile, TenantTables
from citewise_local.usage import LocalUsage

NORMAL = 1
"""`PRAGMA synchronous` NORMAL: a commit in WAL mode is not fsynced."""
DEFAULT_SYNCHRONOUS = sqlite3.connect(":memory:").execute("PRAGMA synchronous").fetchone()[0]


@pytest.mark.parametrize(
    ("open_store", "synchronous", "busy_timeout_ms"),
    [
        pytest.param(LocalUsage, NORMAL, 30_000, id="usage"),
        pytest.param(LocalRates, NORMAL, 10_000, id="rates"),
        pytest.param(LocalConversations, NORMAL, 30_000, id="conversations"),
        pytest.param(LocalErasureLog, DEFAULT_SYNCHRONOUS, 30_000, id="erasure"),
        pytest.param(LocalFeedback, DEFAULT_SYNCHRONOUS, 30_000, id="feedback"),
        pytest.param(LocalSources, DEFAULT_SYNCHRONOUS, 30_000, id="sources"),
        pytest.param(
            lambda path: LocalCredentials(path, token_url="http://127.0.0.1/token"),
            DEFAULT_SYNCHRONOUS,
            30_000,
            id="credentials",
        ),
        pytest.param(LocalRegistry, DEFAULT_SYNCHRONOUS, 5_000, id="registry"),
    ],
)
def test_each_store_opens_its_file_with_its_own_pragmas(
    tmp_path: Path, open_store: Callable[[Path], SQLiteFile], synchronous: int, busy_timeout_ms: int
) -> None:
    # Given a store opened on a new file
    store = open_store(tmp_path / "store.db")
    try:
        # Then its connection is in WAL mode, with the durability and busy timeout that store chose
        conn = store._conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == synchronous
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == busy_timeout_ms
        assert conn.isolation_level is None  # autocommit: a transaction only where `_write` opens one
    finally:
        store.close()


class _Pairs(TenantTables):
    """Two tables of tenant rows, `children` erased before `parents`."""

    tenant_tables = ("children", "parents")

    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            (
                "CREATE TABLE IF NOT EXISTS children (tenant_id TEXT NOT NULL, n INTEGER NOT NULL)",
                "CREATE TABLE IF NOT EXISTS parents (tenant_id TEXT NOT NULL, n INTEGER NOT NULL)",
            ),
        )

    def add(self, table: str, tenant_id: str, rows: int) -> None:
        with self._write() as conn:
            conn.executemany(
                f"INSERT INTO {table} VALUES (?, ?)",  # noqa: S608 - the test's own table names
                [(tenant_id, n) for n in range(rows)],
            )

    def rows(self, table: str, tenant_id: str) -> int:
        return self._count_rows(tenant_id, (table,))


@pytest.fixture
def pairs(tmp_path: Path) -> Iterator[_Pairs]:
    store = _Pairs(tmp_path / "pairs.db")
    yield store
    store.close()


@pytest.mark.parametrize("interruption", [RuntimeError, KeyboardInterrupt])
def test_a_write_that_raises_leaves_nothing_and_frees_the_store(
    pairs: _Pairs, interruption: type[BaseException]
) -> None:
    # Given a write transaction interrupted after its first insert
    with pytest.raises(interruption), pairs._write() as conn:
        conn.execute("INSERT INTO parents VALUES ('acme', 1)")
        raise interruption

    # Then the insert is rolled back, and the next write goes through
    assert pairs.count_tenant("acme") == 0
    pairs.add("parents", "acme", 1)
    assert pairs.count_tenant("acme") == 1


def test_erasure_empties_the_tables_in_order_a_batch_at_a_time(pairs: _Pairs) -> None:
    # Given a tenant with rows in both tables, and another tenant
    pairs.add("children", "acme", 3)
    pairs.add("parents", "acme", 2)
    pairs.add("parents", "globex", 2)
    assert pairs.count_tenant("acme") == 5

    # When its rows are erased 4 at a time
    first = pairs.erase_tenant("acme", limit=4)

    # Then the first batch takes every child before any parent, and the second what is left
    assert first == 4
    assert (pairs.rows("children", "acme"), pairs.rows("parents", "acme")) == (0, 1)
    assert pairs.erase_tenant("acme", limit=4) == 1
    assert pairs.erase_tenant("acme", limit=4) == 0
    assert pairs.count_tenant("acme") == 0
    # and the other tenant keeps its rows
    assert pairs.count_tenant("globex") == 2
