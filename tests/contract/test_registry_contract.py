"""One DocumentRegistry contract, run against the local SQLite registry and DynamoDB (under moto).

The DynamoDB-only rules (ordered writes, status transitions, cursor checks, error translation) follow
the shared suite.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from citewise import aws
from citewise.errors import CitewiseError, ThrottledError, ValidationError
from citewise.models import Document, DocumentStatus, Visibility
from citewise.registry.base import DocumentRegistry
from citewise.registry.dynamodb import (
    TABLE_SCHEMA,
    DynamoRegistry,
    StaleVersionError,
    encode_cursor,
    normalise_sequencer,
    update_request,
)
from citewise.registry.local import LocalRegistry
from citewise.tenancy import document_id

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
) -> Document:
    return Document(
        tenant_id=tenant_id,
        doc_id=document_id(tenant_id, path),
        path=path,
        source="test",
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
    registry.delete("acme", document.doc_id)
    registry.delete("acme", document.doc_id)
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
    registry.delete("beta", acme.doc_id)
    registry.delete("acme", beta.doc_id)
    assert registry.get("acme", acme.doc_id) == acme
    assert registry.get("beta", beta.doc_id) == beta


@pytest.mark.parametrize("limit", [0, 1001])
def test_limit_is_bounded(registry: DocumentRegistry, limit: int) -> None:
    with pytest.raises(ValidationError):
        registry.list("acme", limit=limit)


# --- DynamoDB: ordered writes -------------------------------------------------------------------------


def test_put_refuses_an_older_update(dynamo: DynamoRegistry) -> None:
    # Given a record written at T0 + 1 minute
    dynamo.put(make_document("acme", "a.md", version="v2", updated_at=T0 + timedelta(minutes=1)))
    # When a writer that started earlier writes its (older) record
    with pytest.raises(StaleVersionError) as caught:
        dynamo.put(make_document("acme", "a.md", version="v1", updated_at=T0))
    # Then it is refused as a conflict and the newer record stays
    assert caught.value.code == "CONFLICT" and caught.value.http_status == 409
    assert caught.value.details["reason"] == "stale"
    stored = dynamo.get("acme", document_id("acme", "a.md"))
    assert stored is not None and stored.version == "v2"


def test_put_if_newer_refuses_an_older_sequencer(dynamo: DynamoRegistry) -> None:
    # Given the record of the event with sequencer ...E6
    dynamo.put_if_newer(make_document("acme", "a.md", version="v2"), "0055AED6DCD90281E6")
    # When the event before it (...E5) arrives late, even with a later clock
    late = make_document("acme", "a.md", version="v1", updated_at=T0 + timedelta(hours=1))
    with pytest.raises(StaleVersionError):
        dynamo.put_if_newer(late, "0055AED6DCD90281E5")
    # Then the newer version stays; the same sequencer again (a redelivery) is accepted
    assert dynamo.get("acme", late.doc_id).version == "v2"  # type: ignore[union-attr]
    dynamo.put_if_newer(
        make_document("acme", "a.md", version="v2", status=DocumentStatus.INDEXED), "0055aed6dcd90281e6"
    )
    assert dynamo.get("acme", late.doc_id).status is DocumentStatus.INDEXED  # type: ignore[union-attr]


def test_sequencers_of_different_lengths_compare_right_padded(dynamo: DynamoRegistry) -> None:
    # "1" right-padded is 1000..., newer than 0FFFFF...; so a later "0FFFFF" is refused
    dynamo.put_if_newer(make_document("acme", "a.md", version="v2"), "1")
    with pytest.raises(StaleVersionError):
        dynamo.put_if_newer(make_document("acme", "a.md", version="v1"), "0FFFFFFFFFFFFFFFFF")


def test_plain_put_keeps_the_sequencer_high_water_mark(dynamo: DynamoRegistry) -> None:
    dynamo.put_if_newer(make_document("acme", "a.md", version="v2"), "B0")
    dynamo.put(make_document("acme", "a.md", version="v2", status=DocumentStatus.FAILED))
    with pytest.raises(StaleVersionError):
        dynamo.put_if_newer(make_document("acme", "a.md", version="v1"), "A0")


def test_paths_beyond_the_index_key_limit_are_refused(dynamo: DynamoRegistry) -> None:
    with pytest.raises(ValidationError):
        dynamo.put(make_document("acme", "é" * 513))


@pytest.mark.parametrize("sequencer", ["", "xyz", "0x12", "1" * 65])
def test_invalid_sequencers_are_refused(sequencer: str) -> None:
    with pytest.raises(ValidationError):
        normalise_sequencer(sequencer)


# --- DynamoDB: status transitions ---------------------------------------------------------------------


def test_a_terminal_status_needs_a_pending_record(dynamo: DynamoRegistry) -> None:
    with pytest.raises(StaleVersionError) as caught:
        dynamo.put(make_document("acme", "gone.md", status=DocumentStatus.INDEXED))
    assert caught.value.details["reason"] == "missing"
    assert dynamo.get("acme", document_id("acme", "gone.md")) is None


def test_a_terminal_status_must_name_the_pending_version(dynamo: DynamoRegistry) -> None:
    # Given v2 pending (a newer upload overtook the worker indexing v1)
    dynamo.put(make_document("acme", "a.md", version="v2"))
    # When the v1 worker finishes
    with pytest.raises(StaleVersionError) as caught:
        dynamo.put(make_document("acme", "a.md", version="v1", status=DocumentStatus.INDEXED))
    # Then it cannot mark v2's record indexed
    details = caught.value.details
    assert (details["reason"], details["stored_version"], details["stored_status"]) == ("transition", "v2", "PENDING")


def test_terminal_statuses_do_not_switch_without_pending(dynamo: DynamoRegistry) -> None:
    indexed = register(dynamo, make_document("acme", "a.md", status=DocumentStatus.INDEXED))
    dynamo.put(indexed)  # a retried write of the same outcome is fine
    with pytest.raises(StaleVersionError):
        dynamo.put(indexed.model_copy(update={"status": DocumentStatus.FAILED, "error": "late"}))
    # A new PENDING (re-ingestion) reopens the record
    register(dynamo, indexed.model_copy(update={"status": DocumentStatus.FAILED, "error": "parse"}))
    assert dynamo.get("acme", indexed.doc_id).status is DocumentStatus.FAILED  # type: ignore[union-attr]


def test_update_request_is_conditional() -> None:
    request = update_request(TABLE, make_document("acme", "a.md", status=DocumentStatus.INDEXED), None)
    assert request["Key"] == {"tenant_id": {"S": "acme"}, "doc_id": {"S": document_id("acme", "a.md")}}
    assert request["ConditionExpression"] == (
        "(attribute_not_exists(#updated) OR #updated <= :updated)"
        " AND #version = :version AND #status IN (:pending, :status)"
    )
    assert request["ExpressionAttributeValues"][":updated"] == {"N": str(int(T0.timestamp()) * 1_000_000)}
    assert "#sequencer" not in request["UpdateExpression"]


# --- DynamoDB: cursors --------------------------------------------------------------------------------


@pytest.fixture
def two_tenants(dynamo: DynamoRegistry) -> DynamoRegistry:
    for n in range(10):
        dynamo.put(make_document("acme", f"reports/{n}.md"))
        dynamo.put(make_document("beta", f"reports/{n}.md"))
    return dynamo


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor!",
        "e30",
        "bnVsbA",
        encode_cursor(make_document("beta", "reports/1.md")),
        "A" * 9000,
        base64.urlsafe_b64encode(b"[" * 3000).decode(),
    ],
    ids=["garbage", "empty-object", "json-null", "other-tenant", "too-long", "deeply-nested"],
)
def test_tampered_cursors_are_refused(two_tenants: DynamoRegistry, cursor: str) -> None:
    with pytest.raises(ValidationError):
        two_tenants.list("acme", limit=3, cursor=cursor)


def test_a_cursor_outside_the_prefix_is_refused(two_tenants: DynamoRegistry) -> None:
    page = two_tenants.list("acme", limit=3)
    with pytest.raises(ValidationError):
        two_tenants.list("acme", limit=3, cursor=page.next_cursor, path_prefix="wiki/")


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
