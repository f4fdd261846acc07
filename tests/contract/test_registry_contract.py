"""One DocumentRegistry contract, run against the local SQLite registry and DynamoDB (under moto).

The DynamoDB-only rules (ordered writes, status transitions, cursor checks, error translation) follow
the shared suite.
"""

from __future__ import annotations

import base64
import random
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

from citewise.aws import clients as aws
from citewise.aws.dynamodb import (
    TABLE_SCHEMA,
    TTL_ATTRIBUTE,
    DynamoRegistry,
    delete_request,
    update_request,
)
from citewise.domain.errors import CitewiseError, ThrottledError, ValidationError
from citewise.domain.models import Document, DocumentStatus, Visibility
from citewise.domain.quotas import QuotaOverrides
from citewise.domain.tenancy import document_id, validate_tenant_id
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports import cursors
from citewise.ports.registry import (
    DeletedDocumentError,
    DocumentRegistry,
    StaleVersionError,
    StoredTotals,
    microseconds,
)
from citewise_local.registry import SCHEMA_VERSION, LocalRegistry

TABLE = "citewise-documents"
T0 = datetime(2026, 1, 1, tzinfo=UTC)

MakeDocument = Callable[..., Document]


def make_document(
    tenant_id: str,
    path: str,
    *,
    owner: str = "alice",
    visibility: Visibility = Visibility.SHARED,
    status: DocumentStatus = DocumentStatus.PENDING,
    version: str = "v1",
    updated_at: datetime = T0,
    source: str = "test",
) -> Document:
    return Document(
        tenant_id=tenant_id,
        doc_id=document_id(tenant_id, path),
        path=path,
        source=source,
        owner=owner,
        visibility=visibility,
        status=status,
        version=version,
        created_at=T0,
        updated_at=updated_at,
    )


def register(registry: DocumentRegistry, document: Document) -> Document:
    """Store `document` the way the pipeline does: PENDING first, then its final status."""
    if document.status is not DocumentStatus.PENDING:
        registry.put(document.model_copy(update={"status": DocumentStatus.PENDING}))
    registry.put(document)
    return document


@pytest.fixture
def dynamo(aws_credentials: None) -> Iterator[DynamoRegistry]:
    with mock_aws():
        boto3.client("dynamodb").create_table(TableName=TABLE, **TABLE_SCHEMA)
        yield DynamoRegistry(TABLE)


@pytest.fixture(params=["local", "dynamodb"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DocumentRegistry]:
    if request.param == "local":
        local = LocalRegistry(tmp_path / "registry.db")
        yield local
        local.close()
    else:
        yield request.getfixturevalue("dynamo")


def all_pages(registry: DocumentRegistry, tenant_id: str, **options: object) -> list[list[Document]]:
    pages, cursor = [], None
    while True:
        page = registry.list(tenant_id, cursor=cursor, **options)  # type: ignore[arg-type]
        pages.append(page.items)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


# --- the shared contract ------------------------------------------------------------------------------


def test_put_get_delete_round_trip(registry: DocumentRegistry) -> None:
    # Given a stored document
    document = register(registry, make_document("acme", "guide.md", status=DocumentStatus.INDEXED))
    # Then it reads back equal, and a missing id reads as None
    assert registry.get("acme", document.doc_id) == document
    assert registry.get("acme", "no-such-doc") is None
    # When it is deleted (twice: deleting nothing is fine)
    registry.delete("acme", document.doc_id, deleted_at=T0 + timedelta(minutes=1))
    registry.delete("acme", document.doc_id, deleted_at=T0 + timedelta(minutes=2))
    # Then it is gone
    assert registry.get("acme", document.doc_id) is None


def test_put_replaces_the_record(registry: DocumentRegistry) -> None:
    register(registry, make_document("acme", "guide.md", status=DocumentStatus.INDEXED))
    newer = make_document("acme", "guide.md", version="v2", updated_at=T0 + timedelta(minutes=1))
    registry.put(newer)
    assert registry.get("acme", newer.doc_id) == newer


def test_list_is_ordered_by_path(registry: DocumentRegistry) -> None:
    # Given paths inserted out of order, with upper case, nesting and non-ASCII characters
    paths = ["b.md", "B.md", "a/z.md", "a.md", "été.md", "Z/x.md", "a-b.md", "ab.md"]
    for path in random.Random(7).sample(paths, len(paths)):
        register(registry, make_document("acme", path))
    # Then listing returns them in code-point (= UTF-8 byte) order
    assert [d.path for d in registry.list("acme").items] == sorted(paths)


def test_visible_to_keeps_shared_and_own_documents(registry: DocumentRegistry) -> None:
    register(registry, make_document("acme", "shared.md", owner="alice"))
    register(registry, make_document("acme", "alice.md", owner="alice", visibility=Visibility.PRIVATE))
    register(registry, make_document("acme", "bob.md", owner="bob", visibility=Visibility.PRIVATE))
    assert [d.path for d in registry.list("acme", visible_to="bob").items] == ["bob.md", "shared.md"]
    assert [d.path for d in registry.list("acme", visible_to="alice").items] == ["alice.md", "shared.md"]
    assert [d.path for d in registry.list("acme", visible_to="carol").items] == ["shared.md"]
    assert len(registry.list("acme").items) == 3


def test_status_filter(registry: DocumentRegistry) -> None:
    register(registry, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
    register(registry, make_document("acme", "b.md", status=DocumentStatus.FAILED))
    register(registry, make_document("acme", "c.md"))
    register(registry, make_document("acme", "d.md", status=DocumentStatus.INDEXED))
    assert [d.path for d in registry.list("acme", status=DocumentStatus.INDEXED).items] == ["a.md", "d.md"]
    assert [d.path for d in registry.list("acme", status=DocumentStatus.FAILED).items] == ["b.md"]
    assert [d.path for d in registry.list("acme", status=DocumentStatus.PENDING).items] == ["c.md"]


def test_path_prefix(registry: DocumentRegistry) -> None:
    for path in ["report.md", "reports/q1.md", "reports/q2/detail.md", "reports-old/q0.md", "wiki/reports/x.md"]:
        register(registry, make_document("acme", path))
    listed = registry.list("acme", path_prefix="reports/").items
    assert [d.path for d in listed] == ["reports/q1.md", "reports/q2/detail.md"]
    assert len(registry.list("acme", path_prefix="").items) == 5


def test_paging_through_250_documents(registry: DocumentRegistry) -> None:
    # Given 250 documents
    paths = [f"docs/{n:04d}.md" for n in range(250)]
    for path in paths:
        registry.put(make_document("acme", path))
    # When listing 100 at a time, following the cursors
    pages = all_pages(registry, "acme", limit=100)
    # Then three pages cover every document once, in order
    assert [len(page) for page in pages] == [100, 100, 50]
    assert [d.path for page in pages for d in page] == paths


def test_paging_with_filters_and_an_exact_last_page(registry: DocumentRegistry) -> None:
    # Given 60 documents of which every third is private to bob, and the rest indexed or pending
    for n in range(60):
        private = n % 3 == 0
        register(
            registry,
            make_document(
                "acme",
                f"{n:03d}.md",
                owner="bob" if private else "alice",
                visibility=Visibility.PRIVATE if private else Visibility.SHARED,
                status=DocumentStatus.INDEXED if n % 2 else DocumentStatus.PENDING,
            ),
        )
    # When carol (who sees only shared documents) lists the indexed ones 5 at a time
    pages = all_pages(registry, "acme", visible_to="carol", status=DocumentStatus.INDEXED, limit=5)
    # Then pages hold exactly the matching documents, and a full last page has no cursor
    expected = [f"{n:03d}.md" for n in range(60) if n % 3 and n % 2]
    assert len(expected) == 20
    assert [len(page) for page in pages] == [5, 5, 5, 5]
    assert [d.path for page in pages for d in page] == expected


def test_paging_with_long_non_ascii_paths(registry: DocumentRegistry) -> None:
    paths = [f"{'é' * 500}/{n}.md" for n in range(3)]
    for path in paths:
        registry.put(make_document("acme", path))
    pages = all_pages(registry, "acme", limit=1, path_prefix="é")
    assert [d.path for page in pages for d in page] == paths


def test_tenants_are_isolated(registry: DocumentRegistry) -> None:
    # Given the same path in two tenants and one more document in acme
    acme = register(registry, make_document("acme", "guide.md"))
    register(registry, make_document("acme", "other.md"))
    beta = register(registry, make_document("beta", "guide.md", owner="bea"))
    # Then each tenant sees only its own records, even by the other's id
    assert registry.get("beta", acme.doc_id) is None
    assert [d.tenant_id for d in registry.list("beta").items] == ["beta"]
    assert {d.tenant_id for d in registry.list("acme").items} == {"acme"}
    # And deleting in one tenant never touches the other
    registry.delete("beta", acme.doc_id, deleted_at=T0 + timedelta(minutes=1))
    registry.delete("acme", beta.doc_id, deleted_at=T0 + timedelta(minutes=1))
    assert registry.get("acme", acme.doc_id) == acme
    assert registry.get("beta", beta.doc_id) == beta


def test_source_filter_matches_exactly(registry: DocumentRegistry) -> None:
    # Given documents from three sources, one of whose names is a prefix of another's
    for path, source in [("a.md", "s3"), ("b.md", "local"), ("c.md", "s3"), ("d.md", "s3-archive"), ("e.md", "eval")]:
        register(registry, make_document("acme", path, source=source))
    # Then each source lists exactly its own documents, a prefix of a name matches nothing
    assert [d.path for d in registry.list("acme", source="s3").items] == ["a.md", "c.md"]
    assert [d.path for d in registry.list("acme", source="local").items] == ["b.md"]
    assert [d.source for d in registry.list("acme", source="s3-archive").items] == ["s3-archive"]
    assert registry.list("acme", source="s").items == []
    assert registry.list("acme", source="S3").items == []
    # And no source filter lists all of them
    assert len(registry.list("acme", source=None).items) == 5


def test_source_filter_stays_inside_the_tenant(registry: DocumentRegistry) -> None:
    register(registry, make_document("acme", "a.md", source="s3"))
    register(registry, make_document("beta", "b.md", owner="bea", source="s3"))
    assert [(d.tenant_id, d.path) for d in registry.list("beta", source="s3").items] == [("beta", "b.md")]


def test_source_combined_with_status_prefix_visibility_and_paging(registry: DocumentRegistry) -> None:
    # Given 90 documents over two folders, three sources, two statuses, and private ones of bob's and dave's
    documents = []
    for n in range(90):
        private = n % 4 == 1
        documents.append(
            register(
                registry,
                make_document(
                    "acme",
                    f"{'reports' if n % 5 else 'wiki'}/{n:03d}.md",
                    owner=("bob" if n % 8 == 1 else "dave") if private else "alice",
                    visibility=Visibility.PRIVATE if private else Visibility.SHARED,
                    status=DocumentStatus.INDEXED if n % 2 else DocumentStatus.FAILED,
                    source=("s3", "local", "eval")[n % 3],
                ),
            )
        )
    # When carol lists the indexed s3 documents under reports/, 2 at a time
    pages = all_pages(
        registry,
        "acme",
        visible_to="carol",
        status=DocumentStatus.INDEXED,
        source="s3",
        path_prefix="reports/",
        limit=2,
    )
    # Then the pages hold exactly the documents matching every filter, in path order, each once
    expected = [
        d.path
        for d in documents
        if d.source == "s3"
        and d.status is DocumentStatus.INDEXED
        and d.path.startswith("reports/")
        and d.visibility is Visibility.SHARED
    ]
    assert len(expected) == 6
    assert [d.path for page in pages for d in page] == sorted(expected)
    assert [len(page) for page in pages] == [2, 2, 2]
    # And bob's s3 listing adds his own private documents, never dave's
    bobs = [d.path for page in all_pages(registry, "acme", visible_to="bob", source="s3", limit=3) for d in page]
    visible = [d for d in documents if d.visibility is Visibility.SHARED or d.owner == "bob"]
    assert bobs == sorted(d.path for d in visible if d.source == "s3")
    assert any(d.owner == "bob" for d in visible if d.source == "s3")


def test_a_rare_source_pages_through_many_other_documents(registry: DocumentRegistry) -> None:
    # Given 120 local documents and, scattered among them, 5 from s3
    rare = {7, 31, 64, 65, 119}
    for n in range(120):
        registry.put(make_document("acme", f"docs/{n:03d}.md", source="s3" if n in rare else "local"))
    # When listing the s3 ones one at a time
    pages = all_pages(registry, "acme", source="s3", limit=1)
    # Then each page holds the next one, and the last page ends the listing
    assert [[d.path for d in page] for page in pages] == [[f"docs/{n:03d}.md"] for n in sorted(rare)]


def test_a_document_moving_to_another_source_is_listed_under_the_new_one(registry: DocumentRegistry) -> None:
    register(registry, make_document("acme", "a.md", source="local"))
    registry.put(make_document("acme", "a.md", source="s3", version="v2", updated_at=T0 + timedelta(minutes=1)))
    assert registry.list("acme", source="local").items == []
    assert [d.version for d in registry.list("acme", source="s3").items] == ["v2"]


@pytest.mark.parametrize("limit", [0, 1001])
def test_limit_is_bounded(registry: DocumentRegistry, limit: int) -> None:
    with pytest.raises(ValidationError):
        registry.list("acme", limit=limit)


# --- local: schema migration --------------------------------------------------------------------------

# The schema of registry.db files created before `source` had a column (and before schema versions).
_UNVERSIONED_SCHEMA = """
CREATE TABLE documents (
    tenant_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    path TEXT NOT NULL,
    owner TEXT NOT NULL,
    visibility TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant_id, doc_id)
);
CREATE INDEX documents_by_path ON documents (tenant_id, path);
"""


def old_registry_file(path: Path, documents: list[Document]) -> Path:
    """A registry.db as the version without the `source` column wrote it."""
    with sqlite3.connect(path) as conn:
        conn.executescript(_UNVERSIONED_SCHEMA)
        conn.executemany(
            "INSERT INTO documents (tenant_id, doc_id, path, owner, visibility, status, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (d.tenant_id, d.doc_id, d.path, d.owner, d.visibility.value, d.status.value, d.model_dump_json())
                for d in documents
            ],
        )
    conn.close()
    return path


def test_an_old_local_registry_is_migrated_and_filters_by_source(tmp_path: Path) -> None:
    # Given a registry.db written before `source` had a column
    old = [
        make_document("acme", "a.md", source="local", status=DocumentStatus.INDEXED),
        make_document("acme", "b.md", source="s3"),
        make_document("beta", "c.md", source="local", owner="bea"),
    ]
    path = old_registry_file(tmp_path / "registry.db", old)
    # When the current registry opens it
    registry = LocalRegistry(path)
    try:
        # Then its records read back unchanged and filter by the source in their bodies
        assert registry.get("acme", old[0].doc_id) == old[0]
        assert [d.path for d in registry.list("acme", source="local").items] == ["a.md"]
        assert [d.path for d in registry.list("acme", source="s3").items] == ["b.md"]
        assert [d.path for d in registry.list("beta", source="local").items] == ["c.md"]
        # And new writes land in the migrated table
        registry.put(make_document("acme", "d.md", source="s3"))
        assert [d.path for d in registry.list("acme", source="s3").items] == ["b.md", "d.md"]
    finally:
        registry.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert "source" in {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
    conn.close()
    # And opening it again (already migrated) changes nothing
    reopened = LocalRegistry(path)
    try:
        assert [d.path for d in reopened.list("acme", source="s3").items] == ["b.md", "d.md"]
        assert len(reopened.list("acme").items) == 3
    finally:
        reopened.close()


def test_a_failed_migration_leaves_the_old_file_as_it_was(tmp_path: Path) -> None:
    # Given an old registry.db with a row whose body is not a document
    path = old_registry_file(tmp_path / "registry.db", [make_document("acme", "a.md")])
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO documents VALUES ('acme', 'x', 'x.md', 'alice', 'shared', 'PENDING', 'not json')")
    conn.close()
    # When the migration fails on it
    with pytest.raises(sqlite3.Error):
        LocalRegistry(path)
    # Then the file keeps its old schema and version, so nothing is half-migrated
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (0,)
        assert "source" not in {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
        assert conn.execute("SELECT count(*) FROM documents").fetchone() == (2,)
    conn.close()


def test_a_new_local_registry_starts_at_the_current_schema(tmp_path: Path) -> None:
    LocalRegistry(tmp_path / "registry.db").close()
    with sqlite3.connect(tmp_path / "registry.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()


# --- the shared contract: ordered writes and status transitions -----------------------------------------


def test_put_refuses_an_older_update(registry: DocumentRegistry) -> None:
    # Given a record written at T0 + 1 minute
    registry.put(make_document("acme", "a.md", version="v2", updated_at=T0 + timedelta(minutes=1)))
    # When a writer that started earlier writes its (older) record
    with pytest.raises(StaleVersionError) as caught:
        registry.put(make_document("acme", "a.md", version="v1", updated_at=T0))
    # Then it is refused as a conflict and the newer record stays
    assert caught.value.code == "CONFLICT" and caught.value.http_status == 409
    assert caught.value.details["reason"] == "stale"
    stored = registry.get("acme", document_id("acme", "a.md"))
    assert stored is not None and stored.version == "v2"


def test_racing_writers_leave_the_newest_record(registry: DocumentRegistry) -> None:
    # Given twelve writers of one document, started at different times, racing to write it
    writes = [make_document("acme", "a.md", version=f"v{n}", updated_at=T0 + timedelta(seconds=n)) for n in range(12)]
    random.Random(7).shuffle(writes)
    refused: list[str] = []

    def write(document: Document) -> None:
        try:
            registry.put(document)
        except StaleVersionError:
            refused.append(document.version)

    # (in threads on SQLite; one at a time on moto, whose DynamoDB checks a condition without a lock, where
    # the real service is atomic)
    with ThreadPoolExecutor(max_workers=6 if isinstance(registry, LocalRegistry) else 1) as pool:
        list(pool.map(write, writes))
    # Then the newest one wins, whatever the order, and only older ones were refused
    stored = registry.get("acme", document_id("acme", "a.md"))
    assert stored is not None and stored.version == "v11"
    assert "v11" not in refused


def test_paths_beyond_the_index_key_limit_are_refused(dynamo: DynamoRegistry) -> None:
    with pytest.raises(ValidationError):
        dynamo.put(make_document("acme", "é" * 513))


def test_a_terminal_status_needs_a_pending_record(registry: DocumentRegistry) -> None:
    with pytest.raises(StaleVersionError) as caught:
        registry.put(make_document("acme", "gone.md", status=DocumentStatus.INDEXED))
    assert caught.value.details["reason"] == "missing"
    assert registry.get("acme", document_id("acme", "gone.md")) is None


def test_a_terminal_status_must_name_the_pending_version(registry: DocumentRegistry) -> None:
    # Given v2 pending (a newer upload overtook the worker indexing v1)
    registry.put(make_document("acme", "a.md", version="v2"))
    # When the v1 worker finishes
    with pytest.raises(StaleVersionError) as caught:
        registry.put(make_document("acme", "a.md", version="v1", status=DocumentStatus.INDEXED))
    # Then it cannot mark v2's record indexed
    details = caught.value.details
    assert (details["reason"], details["stored_version"], details["stored_status"]) == ("transition", "v2", "PENDING")


def test_terminal_statuses_do_not_switch_without_pending(registry: DocumentRegistry) -> None:
    indexed = register(registry, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
    registry.put(indexed)  # a retried write of the same outcome is fine
    with pytest.raises(StaleVersionError):
        registry.put(indexed.model_copy(update={"status": DocumentStatus.FAILED, "error": "late"}))
    # A new PENDING (re-ingestion) reopens the record
    register(registry, indexed.model_copy(update={"status": DocumentStatus.FAILED, "error": "parse"}))
    assert registry.get("acme", indexed.doc_id).status is DocumentStatus.FAILED  # type: ignore[union-attr]


def test_update_request_is_conditional() -> None:
    request = update_request(TABLE, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
    assert request["Key"] == {"tenant_id": {"S": "acme"}, "doc_id": {"S": document_id("acme", "a.md")}}
    assert request["ConditionExpression"] == (
        "(attribute_not_exists(#updated) OR #updated <= :updated)"
        " AND (attribute_not_exists(#deleted) OR #deleted < :updated)"
        " AND #version = :version AND #status IN (:pending, :status)"
    )
    # A write replaces a tombstone: it removes the delete's time and the expiry with it
    assert request["UpdateExpression"].endswith(" REMOVE #deleted, #expires")
    assert request["ExpressionAttributeNames"]["#expires"] == TTL_ATTRIBUTE
    assert request["ExpressionAttributeValues"][":updated"] == {"N": str(int(T0.timestamp()) * 1_000_000)}


# --- the shared contract: delete tombstones ----------------------------------------------------------


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def test_a_delete_refuses_every_write_that_began_before_it(registry: DocumentRegistry) -> None:
    # Given a document indexed at T0 and deleted at T0 + 10 minutes
    indexed = register(registry, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
    registry.delete("acme", indexed.doc_id, deleted_at=minutes(10))
    late_writes = [
        indexed,  # the INDEXED write of the ingest that was running when the delete came
        indexed.model_copy(update={"status": DocumentStatus.FAILED, "error": "late"}),
        make_document("acme", "a.md", updated_at=minutes(5)),  # a PENDING of an older event's redelivery
        make_document("acme", "a.md", version="v2", updated_at=minutes(10)),  # not newer: as old as the delete
    ]
    for late in late_writes:
        # When a write that began before the delete arrives
        with pytest.raises(DeletedDocumentError) as caught:
            registry.put(late)
        # Then it is refused as stale (a conflict: superseded, not failed), naming the deleted version
        assert isinstance(caught.value, StaleVersionError) and caught.value.http_status == 409
        assert caught.value.details["reason"] == "deleted"
        assert caught.value.details["deleted_version"] == "v1"
        # And the document stays deleted
        assert registry.get("acme", indexed.doc_id) is None
        assert registry.list("acme").items == []


def test_a_newer_write_after_a_delete_replaces_the_tombstone(registry: DocumentRegistry) -> None:
    # Given a deleted document
    first = register(registry, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
    registry.delete("acme", first.doc_id, deleted_at=minutes(10))
    # When it is uploaded again after the delete and ingested
    again = register(
        registry, make_document("acme", "a.md", version="v2", status=DocumentStatus.INDEXED, updated_at=minutes(11))
    )
    # Then it is recorded and listed like any document
    assert registry.get("acme", first.doc_id) == again
    assert registry.list("acme").items == [again]
    # And the tombstone is gone: the record's own ordering rules apply again
    registry.put(again)  # a retried write of the same outcome
    with pytest.raises(StaleVersionError) as caught:
        registry.put(make_document("acme", "a.md", version="v3", updated_at=minutes(10.5)))
    assert not isinstance(caught.value, DeletedDocumentError) and caught.value.details["reason"] == "stale"
    # And a second delete leaves a new tombstone at its own time
    registry.delete("acme", first.doc_id, deleted_at=minutes(20))
    with pytest.raises(DeletedDocumentError):
        registry.put(make_document("acme", "a.md", version="v3", updated_at=minutes(15)))
    assert registry.get("acme", first.doc_id) is None


def test_tombstones_are_invisible_to_get_and_list(registry: DocumentRegistry) -> None:
    # Given ten documents of which every other one is deleted
    documents = [
        register(registry, make_document("acme", f"docs/{n}.md", status=DocumentStatus.INDEXED, source="s3"))
        for n in range(10)
    ]
    for document in documents[::2]:
        registry.delete("acme", document.doc_id, deleted_at=minutes(1))
    live = documents[1::2]
    # Then no read returns a tombstone: by id, listed whole or filtered, or page by page
    assert [registry.get("acme", d.doc_id) for d in documents[::2]] == [None] * 5
    assert registry.list("acme").items == live
    assert registry.list("acme", visible_to="carol", status=DocumentStatus.INDEXED, source="s3").items == live
    assert registry.list("acme", path_prefix="docs/").items == live
    assert [d for page in all_pages(registry, "acme", limit=2) for d in page] == live
    assert [len(page) for page in all_pages(registry, "acme", limit=2)] == [2, 2, 1]


def test_deleting_twice_keeps_the_later_delete(registry: DocumentRegistry) -> None:
    # Given a document deleted at T0 + 10 minutes, and a slower delete from T0 + 5 minutes arriving last
    document = register(registry, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
    registry.delete("acme", document.doc_id, deleted_at=minutes(10))
    registry.delete("acme", document.doc_id, deleted_at=minutes(5))
    # Then the tombstone still refuses writes up to the later delete, and still knows the deleted version
    with pytest.raises(DeletedDocumentError) as caught:
        registry.put(make_document("acme", "a.md", version="v2", updated_at=minutes(7)))
    assert caught.value.details["deleted_version"] == "v1"
    # And accepts the first write after it
    registry.put(make_document("acme", "a.md", version="v2", updated_at=minutes(10.001)))
    assert registry.get("acme", document.doc_id) is not None


def test_deleting_an_unknown_document_leaves_a_tombstone(registry: DocumentRegistry) -> None:
    # Given the removal of a document never registered (its removal event overtook its creation event)
    doc_id = document_id("acme", "a.md")
    registry.delete("acme", doc_id, deleted_at=minutes(10))
    assert registry.get("acme", doc_id) is None
    assert registry.list("acme").items == []
    # Then the creation, older than the removal, cannot record it, but a later upload can
    with pytest.raises(DeletedDocumentError) as caught:
        registry.put(make_document("acme", "a.md", updated_at=minutes(9)))
    assert caught.value.details["deleted_version"] is None
    registry.put(make_document("acme", "a.md", updated_at=minutes(11)))
    assert [d.path for d in registry.list("acme").items] == ["a.md"]


def test_a_tombstone_keeps_the_deleted_records_ordering_key(registry: DocumentRegistry) -> None:
    # Given a record written at T0 + 10 minutes and deleted by a caller whose clock says T0 + 5 minutes
    document = register(registry, make_document("acme", "a.md", updated_at=minutes(10)))
    registry.delete("acme", document.doc_id, deleted_at=minutes(5))
    # Then a write older than the deleted record is refused, as it was while the record was there
    with pytest.raises(DeletedDocumentError):
        registry.put(make_document("acme", "a.md", version="v2", updated_at=minutes(8)))
    # And one newer than both is accepted
    registry.put(make_document("acme", "a.md", version="v2", updated_at=minutes(12)))
    assert registry.get("acme", document.doc_id) is not None


def test_a_delete_touches_only_its_own_tenant_and_document(registry: DocumentRegistry) -> None:
    # Given the same path in two tenants, and a deleted neighbour
    acme = register(registry, make_document("acme", "a.md"))
    register(registry, make_document("beta", "a.md", owner="bea"))
    registry.delete("acme", acme.doc_id, deleted_at=minutes(10))
    # Then beta's document and acme's other documents take writes of any age as before
    registry.put(make_document("beta", "a.md", owner="bea", version="v2", updated_at=minutes(1)))
    registry.put(make_document("acme", "b.md", updated_at=minutes(1)))
    assert [d.version for d in registry.list("beta").items] == ["v2"]
    assert [d.path for d in registry.list("acme").items] == ["b.md"]


# --- tombstone storage and expiry ---------------------------------------------------------------------


def test_local_tombstones_are_purged_after_the_retention(tmp_path: Path) -> None:
    # Given a local registry that keeps tombstones for a day, and a document deleted at T0
    registry = LocalRegistry(tmp_path / "registry.db", tombstone_retention=timedelta(days=1))
    try:
        old = register(registry, make_document("acme", "old.md"))
        registry.delete("acme", old.doc_id, deleted_at=T0)
        with pytest.raises(DeletedDocumentError):
            registry.put(make_document("acme", "old.md", updated_at=T0 - timedelta(hours=1)))
        # When another delete happens two days later
        registry.delete("acme", document_id("acme", "other.md"), deleted_at=T0 + timedelta(days=2))
        # Then the expired tombstone is gone (a write that old could only come from outside any queue)
        registry.put(make_document("acme", "old.md", updated_at=T0 - timedelta(hours=1)))
        assert registry.get("acme", old.doc_id) is not None
        # And the recent one still holds
        with pytest.raises(DeletedDocumentError):
            registry.put(make_document("acme", "other.md", updated_at=T0 + timedelta(days=1)))
    finally:
        registry.close()


def test_a_local_write_after_a_delete_removes_the_tombstone(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path / "registry.db")
    try:
        document = register(registry, make_document("acme", "a.md"))
        registry.delete("acme", document.doc_id, deleted_at=minutes(10))
        registry.delete("acme", document_id("acme", "b.md"), deleted_at=minutes(10))
        registry.put(make_document("acme", "a.md", version="v2", updated_at=minutes(11)))
    finally:
        registry.close()
    with sqlite3.connect(tmp_path / "registry.db") as conn:
        assert conn.execute("SELECT doc_id FROM tombstones").fetchall() == [(document_id("acme", "b.md"),)]
    conn.close()


def test_a_dynamodb_tombstone_keeps_only_the_key_ordering_and_expiry(aws_credentials: None) -> None:
    with mock_aws():
        boto3.client("dynamodb").create_table(TableName=TABLE, **TABLE_SCHEMA)
        registry = DynamoRegistry(TABLE, tombstone_retention=timedelta(days=30))
        # Given an indexed document, deleted
        document = register(registry, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
        assert TTL_ATTRIBUTE not in _raw_item(registry, document)  # a record never expires
        registry.delete("acme", document.doc_id, deleted_at=minutes(10))
        # Then the item holds the key, the deleted version's ordering key, the delete's time and its expiry
        assert _raw_item(registry, document) == {
            "tenant_id": {"S": "acme"},
            "doc_id": {"S": document.doc_id},
            "version": {"S": "v1"},
            "updated_us": {"N": str(microseconds(T0))},
            "deleted_us": {"N": str(microseconds(minutes(10)))},
            TTL_ATTRIBUTE: {"N": str(int((minutes(10) + timedelta(days=30)).timestamp()))},
        }
        # And the next write turns it back into a record that never expires
        register(registry, make_document("acme", "a.md", version="v2", updated_at=minutes(11)))
        item = _raw_item(registry, document)
        assert "deleted_us" not in item and TTL_ATTRIBUTE not in item and item["version"] == {"S": "v2"}


def test_delete_request_is_conditional_and_never_deletes_the_item() -> None:
    request = delete_request(TABLE, "acme", "d1", minutes(10), timedelta(days=90))
    assert request["Key"] == {"tenant_id": {"S": "acme"}, "doc_id": {"S": "d1"}}
    assert request["ConditionExpression"] == "attribute_not_exists(#deleted) OR #deleted < :deleted"
    assert request["UpdateExpression"] == (
        "SET #deleted = :deleted, #expires = :expires REMOVE #path, #owner, #visibility, #status, #source, #body,"
        " #stored_chunks, #stored_bytes"  # what the record added to the tenant's stored totals goes with it
    )
    assert request["ExpressionAttributeValues"] == {
        ":deleted": {"N": str(microseconds(minutes(10)))},
        ":expires": {"N": str(int((minutes(10) + timedelta(days=90)).timestamp()))},
    }


# --- DynamoDB: cursors --------------------------------------------------------------------------------


@pytest.fixture
def two_tenants(registry: DocumentRegistry) -> DocumentRegistry:
    for n in range(10):
        registry.put(make_document("acme", f"reports/{n}.md"))
        registry.put(make_document("beta", f"reports/{n}.md"))
    return registry


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor!",
        "e30",
        "bnVsbA",
        cursors.encode(make_document("beta", "reports/1.md")),
        "A" * 9000,
        base64.urlsafe_b64encode(b"[" * 3000).decode(),
    ],
    ids=["garbage", "empty-object", "json-null", "other-tenant", "too-long", "deeply-nested"],
)
def test_tampered_cursors_are_refused(two_tenants: DocumentRegistry, cursor: str) -> None:
    with pytest.raises(ValidationError):
        two_tenants.list("acme", limit=3, cursor=cursor)


def test_a_cursor_outside_the_prefix_is_refused(two_tenants: DocumentRegistry) -> None:
    page = two_tenants.list("acme", limit=3)
    with pytest.raises(ValidationError):
        two_tenants.list("acme", limit=3, cursor=page.next_cursor, path_prefix="wiki/")


# --- DynamoDB: the source attribute -------------------------------------------------------------------


def _raw_item(dynamo: DynamoRegistry, document: Document) -> dict[str, object]:
    key = {"tenant_id": {"S": document.tenant_id}, "doc_id": {"S": document.doc_id}}
    item: dict[str, object] = boto3.client("dynamodb").get_item(TableName=dynamo.table_name, Key=key)["Item"]
    return item


def forget_source_attribute(dynamo: DynamoRegistry, document: Document) -> None:
    """Make the stored item look like one written before `source` was an attribute (body only)."""
    boto3.client("dynamodb").update_item(
        TableName=dynamo.table_name,
        Key={"tenant_id": {"S": document.tenant_id}, "doc_id": {"S": document.doc_id}},
        UpdateExpression="REMOVE #source",
        ExpressionAttributeNames={"#source": "source"},
    )


def test_source_is_stored_as_a_top_level_attribute(dynamo: DynamoRegistry) -> None:
    document = register(dynamo, make_document("acme", "a.md", source="s3", status=DocumentStatus.INDEXED))
    assert _raw_item(dynamo, document)["source"] == {"S": "s3"}


def test_items_written_before_the_source_attribute_still_filter_right(dynamo: DynamoRegistry) -> None:
    # Given old items (no `source` attribute, the source only in the body) among new ones
    old_s3 = [register(dynamo, make_document("acme", f"{n}-old.md", source="s3")) for n in range(4)]
    old_local = [register(dynamo, make_document("acme", f"{n}-old-local.md", source="local")) for n in range(4)]
    for document in old_s3 + old_local:
        forget_source_attribute(dynamo, document)
        assert "source" not in _raw_item(dynamo, document)
    new_s3 = [register(dynamo, make_document("acme", f"{n}-new.md", source="s3")) for n in range(4)]
    # When listing by source, one at a time and all at once
    paged = [d.path for page in all_pages(dynamo, "acme", source="s3", limit=1) for d in page]
    # Then old items count by their body's source: none lost, none listed under the wrong source
    assert paged == sorted(d.path for d in old_s3 + new_s3)
    assert [d.path for d in dynamo.list("acme", source="local").items] == sorted(d.path for d in old_local)
    assert dynamo.list("acme", source="eval").items == []
    # And the next write of an old item stores the attribute
    dynamo.put(old_local[0].model_copy(update={"version": "v2", "updated_at": T0 + timedelta(minutes=1)}))
    assert _raw_item(dynamo, old_local[0])["source"] == {"S": "local"}


def test_a_cursor_with_a_source_filter_stays_in_its_tenant(two_tenants: DocumentRegistry) -> None:
    with pytest.raises(ValidationError):
        two_tenants.list("acme", source="test", limit=3, cursor=cursors.encode(make_document("beta", "reports/1.md")))


# --- the tenant's settings document -------------------------------------------------------------------


def test_tenant_settings_round_trip_per_tenant_and_stay_out_of_listings(registry: DocumentRegistry) -> None:
    # Given a tenant with documents and no settings yet
    register(registry, make_document("acme", "a.md"))
    assert registry.tenant_settings("acme") is None
    # When an admin saves settings, then saves them again
    first = TenantSettings(freshness_weight=0.5, source_credibility={"handbook": 1.0, "community": 0.3})
    registry.put_tenant_settings("acme", first)
    second = TenantSettings(
        credibility_weight=0.4,
        source_credibility={"community": 0.2},
        routing_aliases={"wiki": "confluence"},
        routing_time_zone="Europe/Berlin",
        updated_at=T0,
        updated_by="root",
    )
    registry.put_tenant_settings("acme", second)
    # Then the last one is read back whole, only in its tenant
    assert registry.tenant_settings("acme") == second
    assert registry.tenant_settings("beta") is None
    # And no listing returns it as a document
    assert [d.path for d in registry.list("acme").items] == ["a.md"]


# --- DynamoDB: errors ---------------------------------------------------------------------------------


def test_throttling_and_failures_are_translated(aws_credentials: None) -> None:
    client = aws.client("dynamodb", max_attempts=1)
    registry = DynamoRegistry(TABLE, client=client)
    with Stubber(client) as stub:
        stub.add_client_error("get_item", "ProvisionedThroughputExceededException")
        stub.add_client_error("query", "ResourceNotFoundException", "Requested resource not found")
        with pytest.raises(ThrottledError):
            registry.get("acme", "x")
        with pytest.raises(CitewiseError) as caught:
            registry.list("acme")
    assert caught.value.code == "INTERNAL_ERROR"
    assert caught.value.details == {"aws_error": "ResourceNotFoundException", "action": "DynamoDB Query"}


# --- the tenants' catalogue (the platform operator's listing) ---------------------------------------------


def test_list_tenants_pages_through_every_tenant_in_id_order(registry: DocumentRegistry) -> None:
    # Given tenants whose ids share prefixes, registered in no particular order, some with several documents
    tenants = ["acme", "acme-eu", "acme.eu", "acme2", "b", "Z9", *(f"t{n:03d}" for n in range(40))]
    for tenant in random.Random(7).sample(tenants, len(tenants)):
        register(registry, make_document(tenant, "a.md", status=DocumentStatus.INDEXED))
        register(registry, make_document(tenant, "b.md"))
    # When the operator pages through them 7 at a time
    seen, cursor = [], None
    while True:
        page = registry.list_tenants(limit=7, cursor=cursor)
        assert len(page.items) <= 7
        seen += [item.tenant_id for item in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    # Then every tenant appears once, in id order (code points), and the last page says it is the last
    assert seen == sorted(tenants)
    assert registry.list_tenants(limit=len(tenants)).next_cursor is None


def test_a_tenant_stays_listed_after_its_documents_are_deleted(registry: DocumentRegistry) -> None:
    # Given an empty registry, then a tenant's only document, deleted
    assert registry.list_tenants().items == []
    document = register(registry, make_document("acme", "a.md"))
    registry.delete("acme", document.doc_id, deleted_at=T0 + timedelta(minutes=1))
    # Then the tenant is still known (erasing a tenant, not deleting documents, forgets it)
    assert [item.tenant_id for item in registry.list_tenants().items] == ["acme"]
    # And settings alone do not make a tenant
    registry.put_tenant_settings("globex", TenantSettings())
    assert [item.tenant_id for item in registry.list_tenants().items] == ["acme"]


@pytest.mark.parametrize("cursor", ["%%%", "e30", cursors.encode(make_document("acme", "a.md")), "eyJhIjoiLi4vIn0"])
def test_a_tenant_cursor_that_was_not_issued_is_refused(registry: DocumentRegistry, cursor: str) -> None:
    # `e30` is `{}`; the last is {"a": "../"}: no tenant id
    with pytest.raises(ValidationError, match="invalid cursor"):
        registry.list_tenants(cursor=cursor)


@pytest.mark.parametrize("limit", [0, 1001])
def test_list_tenants_limit_is_bounded(registry: DocumentRegistry, limit: int) -> None:
    with pytest.raises(ValidationError):
        registry.list_tenants(limit=limit)


def test_an_old_local_registry_lists_the_tenants_it_already_had(tmp_path: Path) -> None:
    # Given a registry.db written before the tenants' catalogue
    path = old_registry_file(tmp_path / "registry.db", [make_document("beta", "c.md"), make_document("acme", "a.md")])
    # When the current registry opens it, then its tenants are listed
    registry = LocalRegistry(path)
    try:
        assert [item.tenant_id for item in registry.list_tenants().items] == ["acme", "beta"]
    finally:
        registry.close()


def test_the_dynamodb_catalogue_is_one_partition_apart_from_every_tenant(dynamo: DynamoRegistry) -> None:
    # Given a registered document
    register(dynamo, make_document("acme", "a.md"))
    # Then the catalogue item lives under a partition key no tenant id can take, and no listing returns it
    item = boto3.client("dynamodb").get_item(
        TableName=TABLE, Key={"tenant_id": {"S": "#tenants"}, "doc_id": {"S": "acme"}}
    )
    assert set(item["Item"]) == {"tenant_id", "doc_id", "first_us"}
    with pytest.raises(ValidationError):
        validate_tenant_id("#tenants")
    assert [d.path for d in dynamo.list("acme").items] == ["a.md"]


# --- erasing a tenant (`citewise.ports.erasure`) -------------------------------------------------------

PREFIXED_TENANTS = ("acme", "acme-eu", "acme2")
"""Tenants whose ids share a prefix: erasing the first must leave the others whole."""


def fill_tenant(registry: DocumentRegistry, tenant_id: str) -> None:
    """Two records, a tombstone, the settings document and (through the first write) the catalogue entry."""
    for path in ("a.md", "b.md", "gone.md"):
        register(registry, make_document(tenant_id, path, status=DocumentStatus.INDEXED))
    registry.delete(tenant_id, document_id(tenant_id, "gone.md"), deleted_at=T0 + timedelta(minutes=1))
    registry.put_tenant_settings(tenant_id, TenantSettings(freshness_weight=0.5))


def erase_all(store: object, tenant_id: str, limit: int) -> list[int]:
    """Call `erase_tenant` until it answers 0; every answer."""
    steps: list[int] = []
    while True:
        steps.append(store.erase_tenant(tenant_id, limit=limit))  # type: ignore[attr-defined]
        if steps[-1] == 0:
            return steps
        assert len(steps) < 100, "erase_tenant never reached 0"


def test_erase_tenant_removes_every_item_of_the_tenant_only(registry: DocumentRegistry) -> None:
    # Given three tenants whose ids share a prefix, each with records, a tombstone, settings and a catalogue entry
    for tenant_id in PREFIXED_TENANTS:
        fill_tenant(registry, tenant_id)
    others_before = {t: (all_pages(registry, t), registry.tenant_settings(t)) for t in PREFIXED_TENANTS[1:]}
    # (2 records, 1 tombstone, settings, catalogue; and on DynamoDB the stored totals' item)
    counts = {t: registry.count_tenant(t) for t in PREFIXED_TENANTS}
    assert counts["acme"] >= 5
    assert registry.has_tenant("acme")
    # When acme is erased in steps of 2
    steps = erase_all(registry, "acme", limit=2)
    # Then each step deleted at most 2, every item in total, and nothing of acme remains
    assert all(step <= 2 for step in steps) and sum(steps) == counts["acme"]
    assert registry.count_tenant("acme") == 0
    assert not registry.has_tenant("acme")
    assert registry.get("acme", document_id("acme", "a.md")) is None
    assert registry.list("acme").items == []
    assert registry.tenant_settings("acme") is None
    assert [t.tenant_id for t in registry.list_tenants().items] == ["acme-eu", "acme2"]
    # And the other tenants are untouched
    for tenant_id in PREFIXED_TENANTS[1:]:
        assert registry.count_tenant(tenant_id) == counts[tenant_id]
        assert (all_pages(registry, tenant_id), registry.tenant_settings(tenant_id)) == others_before[tenant_id]
    # And erasing again, or a tenant that never existed, deletes nothing
    assert registry.erase_tenant("acme") == 0
    assert registry.erase_tenant("nobody") == 0 and registry.count_tenant("nobody") == 0


def test_the_catalogue_entry_goes_last_so_an_interrupted_erasure_keeps_the_tenant_listed(
    registry: DocumentRegistry,
) -> None:
    # Given a tenant with 5 items or more, erased one step of 2 (an erasure interrupted after its first step)
    fill_tenant(registry, "acme")
    before = registry.count_tenant("acme")
    registry.erase_tenant("acme", limit=2)
    # Then the tenant is still in the catalogue, and what is left is counted
    assert registry.has_tenant("acme")
    assert registry.count_tenant("acme") == before - 2


def test_a_tenant_erased_then_ingesting_again_is_a_new_tenant(registry: DocumentRegistry) -> None:
    # Given an erased tenant
    fill_tenant(registry, "acme")
    erase_all(registry, "acme", limit=500)
    # When it registers a document again (its tombstone is gone: nothing refuses the write)
    register(registry, make_document("acme", "gone.md", status=DocumentStatus.INDEXED))
    # Then it is listed and counted afresh: one record, its catalogue entry (and on DynamoDB its totals' item)
    assert registry.has_tenant("acme") and registry.count_tenant("acme") in (2, 3)
    assert registry.stored_totals("acme").documents == 1


def test_dynamodb_erase_leaves_the_usage_counters_in_the_partition(dynamo: DynamoRegistry) -> None:
    from citewise.aws.dynamodb_usage import DynamoUsage
    from citewise.ports.usage import UsageCounts

    # Given a tenant with records and usage counters in its partition
    fill_tenant(dynamo, "acme")
    usage = DynamoUsage(TABLE)
    usage.add("acme", T0.date(), UsageCounts(rest_queries=3))
    # When the registry erases the tenant
    erase_all(dynamo, "acme", limit=1)
    # Then its own items are gone and the counters are kept (usage is the UsageMeter's to erase)
    assert dynamo.count_tenant("acme") == 0
    assert usage.count_tenant("acme") == 1
    assert usage.read("acme", T0.date(), T0.date())[0].counts.rest_queries == 3


# --- the shared contract: stored totals ----------------------------------------------------------------


def sized(document: Document, size: int, chunks: int = 0) -> Document:
    return document.model_copy(update={"size_bytes": size, "chunk_count": chunks})


def recount(registry: DocumentRegistry, tenant_id: str) -> StoredTotals:
    """The totals as the records say, one by one: what `stored_totals` must always equal."""
    documents = [d for page in all_pages(registry, tenant_id, limit=1000) for d in page]
    return StoredTotals(
        documents=len(documents),
        chunks=sum(d.chunk_count for d in documents),
        bytes=sum(d.size_bytes or 0 for d in documents),
    )


def test_stored_totals_follow_ingest_reingest_failure_and_delete(registry: DocumentRegistry) -> None:
    # Given a fresh tenant, and a neighbour whose id shares its prefix
    assert registry.stored_totals("acme") == StoredTotals()
    register(registry, sized(make_document("acme-eu", "n.md", status=DocumentStatus.INDEXED), 999, 9))
    # When a document is uploaded (PENDING) and indexed
    a = make_document("acme", "a.md")
    registry.put(sized(a, 100))
    assert registry.stored_totals("acme") == StoredTotals(documents=1, chunks=0, bytes=100)
    registry.put(sized(a, 100, 5).model_copy(update={"status": DocumentStatus.INDEXED}))
    assert registry.stored_totals("acme") == StoredTotals(documents=1, chunks=5, bytes=100)
    # And re-ingested as a larger version: the new version replaces the old one's chunks and bytes
    v2 = make_document("acme", "a.md", version="v2", updated_at=minutes(1))
    registry.put(sized(v2, 300))
    registry.put(sized(v2, 300, 7).model_copy(update={"status": DocumentStatus.INDEXED}))
    assert registry.stored_totals("acme") == StoredTotals(documents=1, chunks=7, bytes=300)
    # And a second document fails (its object is kept, so its bytes count; it has no chunks)
    b = make_document("acme", "b.md")
    registry.put(sized(b, 50))
    registry.put(sized(b, 50).model_copy(update={"status": DocumentStatus.FAILED, "error": "QUOTA_EXCEEDED: x"}))
    assert registry.stored_totals("acme") == StoredTotals(documents=2, chunks=7, bytes=350)
    # And a refused (older) write changes nothing
    with pytest.raises(StaleVersionError):
        registry.put(sized(make_document("acme", "a.md", version="v0"), 10_000, 100))
    assert registry.stored_totals("acme") == StoredTotals(documents=2, chunks=7, bytes=350)
    # When the first is deleted, twice
    registry.delete("acme", a.doc_id, deleted_at=minutes(5))
    registry.delete("acme", a.doc_id, deleted_at=minutes(6))
    # Then only the second counts, and the neighbour was never touched
    assert registry.stored_totals("acme") == StoredTotals(documents=1, chunks=0, bytes=50) == recount(registry, "acme")
    assert registry.stored_totals("acme-eu") == StoredTotals(documents=1, chunks=9, bytes=999)


@pytest.fixture
def atomic_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of moto's item requests and transactions runs alone, as each is atomic on DynamoDB (moto's are
    not: they read, compute and store in Python, unlocked). Reentrant: moto's transaction calls its own
    item requests."""
    lock = threading.RLock()
    for name in ("get_item", "put_item", "update_item", "query", "transact_write_items"):
        original = getattr(DynamoDBBackend, name)

        def atomic(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            with lock:
                return _original(*args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, atomic)


def test_stored_totals_stay_exact_under_concurrent_ingests_and_reingests(
    registry: DocumentRegistry, atomic_transactions: None
) -> None:
    # Given 8 writers ingesting and re-ingesting 6 shared documents (versions racing) and deleting some
    def work(writer: int) -> None:
        rng = random.Random(writer)
        for step in range(12):
            path = f"doc-{rng.randrange(6)}.md"
            at = T0 + timedelta(milliseconds=writer * 1000 + step * 7 + rng.randrange(5000))
            version = f"w{writer}s{step}"
            pending = sized(make_document("acme", path, version=version, updated_at=at), rng.randrange(1, 10_000))
            try:
                if rng.random() < 0.15:
                    registry.delete("acme", pending.doc_id, deleted_at=at)
                    continue
                registry.put(pending)
                final = rng.choice([DocumentStatus.INDEXED, DocumentStatus.FAILED])
                chunks = rng.randrange(1, 50) if final is DocumentStatus.INDEXED else 0
                registry.put(pending.model_copy(update={"status": final, "chunk_count": chunks}))
            except StaleVersionError:
                pass  # a newer writer owns the record: superseded, as the pipeline takes it

    # (in threads on both: on moto, each request atomic as on DynamoDB, so what the threads race on is the
    # adapter's read of a record's share before its transaction; the next test stages that race exactly)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    # Then the totals are exactly what the records add up to
    totals = registry.stored_totals("acme")
    assert totals == recount(registry, "acme")
    assert totals.documents > 0


def test_a_dynamodb_write_whose_read_went_stale_retries_and_counts_once(dynamo: DynamoRegistry) -> None:
    # Given an indexed document of 5 chunks and 100 bytes
    a = make_document("acme", "a.md")
    register(dynamo, sized(a, 100, 5).model_copy(update={"status": DocumentStatus.INDEXED}))
    # When a re-ingest's PENDING write reads what the record adds, and before it writes, another worker
    # records the document FAILED (0 chunks) in between
    real = dynamo._contribution
    raced = []

    def stale_read(tenant_id: str, doc_id: str) -> StoredTotals:
        seen = real(tenant_id, doc_id)
        if not raced:
            raced.append(True)
            dynamo.put(sized(a, 100).model_copy(update={"status": DocumentStatus.INDEXED, "updated_at": minutes(0.5)}))
        return seen

    dynamo._contribution = stale_read  # type: ignore[method-assign]
    dynamo.put(sized(make_document("acme", "a.md", version="v2", updated_at=minutes(1)), 300))
    # Then the stale transaction was cancelled, retried from a fresh read, and the totals are exact
    assert raced
    assert dynamo.stored_totals("acme") == StoredTotals(documents=1, chunks=0, bytes=300) == recount(dynamo, "acme")


def test_quota_overrides_round_trip_and_stay_in_their_tenant(registry: DocumentRegistry) -> None:
    assert registry.tenant_quotas("acme") is None
    registry.put_tenant_quotas("acme", QuotaOverrides(max_documents=10, queries_per_minute=60))
    registry.put_tenant_quotas("acme", QuotaOverrides(max_documents=20))  # replaces the whole document
    assert registry.tenant_quotas("acme") == QuotaOverrides(max_documents=20)
    assert registry.tenant_quotas("acme-eu") is None
    assert registry.list("acme").items == []  # never a document record
