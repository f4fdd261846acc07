"""How the local index reads its rows: the SQL a search runs must stay cheap as a tenant grows.

The chunks a search returns are re-read with the tenant and access filter in the SQL. Given a list of row
ids and `tenant_id = ?`, SQLite's planner (no statistics) preferred scanning the tenant through a
`(tenant_id, ...)` index over looking the ids up, from five ids on: at 50,000 chunks a tenant that was
15-30 ms for each ranked list (docs/benchmarks.md, 9c). These tests read the plans SQLite really chose.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import Caller, Visibility
from citewise_local.index import LocalIndex
from tests.contract.test_index_contract import make_chunk

EMBEDDER = HashingEmbedder(32)
CHUNKS_PER_DOCUMENT = 20


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LocalIndex]:
    """Two tenants of 60 chunks each, some of them private, so a search has more than five hits to read."""
    opened = LocalIndex(tmp_path / "index.db")
    opened.ensure(EMBEDDER.name, EMBEDDER.dimension)
    for tenant in ("acme", "globex"):
        for doc in range(3):
            visibility = Visibility.PRIVATE if doc == 2 else Visibility.SHARED
            chunks = [
                make_chunk(tenant, f"d{doc}", i, f"apple orchard note {doc} {i}", visibility=visibility)
                for i in range(CHUNKS_PER_DOCUMENT)
            ]
            opened.replace_document(
                tenant, f"d{doc}", chunks, EMBEDDER.embed_documents([chunk.text for chunk in chunks])
            )
    try:
        yield opened
    finally:
        opened.close()


def _plans_of_row_reads(index: LocalIndex, tmp_path: Path, search: str) -> list[str]:
    """The query plan of every statement that reads `chunks` rows during one search by `search`."""
    statements: list[str] = []
    index._reader().set_trace_callback(statements.append)  # noqa: SLF001 - the statements this thread runs
    caller = Caller(tenant_id="acme", user_id="bob")
    if search == "keyword":
        found = index.keyword_search(caller, "apple orchard", None, 25)
    else:
        found = index.vector_search(caller, EMBEDDER.embed_query("apple orchard"), None, 25)
    index._reader().set_trace_callback(None)  # noqa: SLF001
    assert len(found) == 25  # bob reads acme's 40 shared chunks: the search had rows to read back
    explain = sqlite3.connect(tmp_path / "index.db")
    try:
        return [
            " / ".join(row[3] for row in explain.execute(f"EXPLAIN QUERY PLAN {sql}"))
            for sql in statements
            if "FROM chunks " in sql and "body" in sql
        ]
    finally:
        explain.close()


@pytest.mark.parametrize("search", ["keyword", "vector"])
def test_a_search_reads_its_chunks_back_by_row_id_not_by_scanning_the_tenant(
    index: LocalIndex, tmp_path: Path, search: str
) -> None:
    # When acme's user searches, with more than five hits to read back
    plans = _plans_of_row_reads(index, tmp_path, search)

    # Then the bodies were read, each statement by its row ids, never through a tenant index
    assert plans, "the search read no chunk bodies"
    for plan in plans:
        assert "INTEGER PRIMARY KEY" in plan, plan
        assert "chunks_by_" not in plan, plan
