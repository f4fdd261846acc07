"""S3 notifications through the pipeline: S3 under moto, the local index and registry."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from citewise.aws.dynamodb import TABLE_SCHEMA, DynamoRegistry
from citewise.aws.s3 import S3BlobStore
from citewise.domain.errors import ValidationError
from citewise.domain.models import Caller, DocumentStatus, SearchRequest
from citewise.domain.objects import SourceObject
from citewise.domain.tenancy import document_id
from citewise.ingest.chunking import Chunker
from citewise.ingest.documents import delete_document
from citewise.ingest.pipeline import Ingestor, Outcome
from citewise.ingest.s3events import apply, parse_notification
from citewise.ports.blobstore import key_to_location
from citewise.ports.registry import DocumentRegistry
from citewise.query.retrieval import Retriever
from citewise_local.index import LocalIndex
from citewise_local.registry import LocalRegistry
from tests.factories import CountingEmbedder, source

BUCKET = "citewise-docs"


def notification(kind: str, key: str, version: str | None = None) -> str:
    obj: dict[str, Any] = {"key": key, "size": 10, "sequencer": "0055AED6DCD90281E5"}
    if version:
        obj["versionId"] = version
    return json.dumps(
        {"Records": [{"eventName": f"Object{kind}:Put", "s3": {"bucket": {"name": BUCKET}, "object": obj}}]}
    )


@pytest.fixture
def pipeline(aws_credentials: None, tmp_path: Path) -> Iterator[tuple[Any, Ingestor, S3BlobStore]]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        index = LocalIndex(tmp_path / "index.db")
        ingestor = Ingestor(index, LocalRegistry(tmp_path / "registry.db"), CountingEmbedder(), Chunker())
        yield s3, ingestor, S3BlobStore(BUCKET, client=s3)


def _found(ingestor: Ingestor, tenant: str, query: str) -> list[str]:
    hits = Retriever(ingestor.index, ingestor.embedder).search(
        Caller(tenant_id=tenant, user_id="u"), SearchRequest(query=query)
    )
    return [h.chunk.document.path for h in hits if h.keyword_score is not None]


def test_a_created_object_is_indexed_for_the_tenant_of_its_key(pipeline: Any) -> None:
    # Given an object uploaded under acme's prefix, with a space in its name (URL-encoded in the event)
    s3, ingestor, blobs = pipeline
    s3.put_object(Bucket=BUCKET, Key="tenants/acme/My Notes.md", Body=b"# Notes\n\nThe heron nests by the river.")
    # When its notification is applied
    [event] = parse_notification(notification("Created", "tenants/acme/My+Notes.md"))
    result = apply(event, ingestor, blobs, key_to_location)
    # Then acme finds it and globex does not
    assert result is not None and result.outcome is Outcome.NEW
    assert result.document.status is DocumentStatus.INDEXED and result.document.path == "My Notes.md"
    assert _found(ingestor, "acme", "heron") == ["My Notes.md"]
    assert _found(ingestor, "globex", "heron") == []
    # And a redelivered notification changes nothing
    assert apply(event, ingestor, blobs, key_to_location).outcome is Outcome.UNCHANGED  # type: ignore[union-attr]


def test_a_removed_object_leaves_the_index_and_the_registry(pipeline: Any) -> None:
    s3, ingestor, blobs = pipeline
    s3.put_object(Bucket=BUCKET, Key="tenants/acme/a.md", Body=b"Otters float.")
    apply(parse_notification(notification("Created", "tenants/acme/a.md"))[0], ingestor, blobs, key_to_location)
    s3.delete_object(Bucket=BUCKET, Key="tenants/acme/a.md")
    result = apply(
        parse_notification(notification("Removed", "tenants/acme/a.md"))[0], ingestor, blobs, key_to_location
    )
    assert result is not None and result.outcome is Outcome.DELETED
    assert _found(ingestor, "acme", "otters") == []
    assert ingestor.registry.list("acme").items == []


@pytest.mark.parametrize(
    "key",
    ["outside/acme/a.md", "tenants/acme/", "tenants/.x/y.md", "tenants/acme/..%2Fglobex%2Fx.md", "tenants/*/x.md"],
)
def test_keys_outside_the_tenant_layout_are_refused_and_never_indexed(pipeline: Any, key: str) -> None:
    _, ingestor, blobs = pipeline
    [event] = parse_notification(notification("Created", key))
    with pytest.raises(ValidationError):
        apply(event, ingestor, blobs, key_to_location)
    assert ingestor.registry.list("acme").items == []


@pytest.mark.parametrize(
    ("key", "event_key", "reason"),
    [
        ("tenants/acme/j\u0456ra/PROJ-7.md", "tenants/acme/j%D1%96ra/PROJ-7.md", "mixes the scripts CYRILLIC, LATIN"),
        ("tenants/acme/notes\u202edm.md", "tenants/acme/notes%E2%80%AEdm.md", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("tenants/acme/" + "x" * 250 + ".md", "tenants/acme/" + "x" * 250 + ".md", "longer than 200 bytes"),
    ],
    ids=["homoglyph", "bidi override", "long segment"],
)
def test_an_object_written_straight_to_the_bucket_under_a_refused_name_is_failed_with_the_reason(
    pipeline: Any, key: str, event_key: str, reason: str
) -> None:
    # Given an object another S3 client wrote under a name presign would have refused
    s3, ingestor, blobs = pipeline
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"# PROJ-7\n\nThe release is approved.")
    # When its notification is applied
    result = apply(parse_notification(notification("Created", event_key))[0], ingestor, blobs, key_to_location)
    # Then it is recorded FAILED with the reason, not dropped, and never searchable
    assert result is not None and result.outcome is Outcome.FAILED
    assert result.document.status is DocumentStatus.FAILED and result.document.path == key.removeprefix("tenants/acme/")
    assert result.document.error is not None and reason in result.document.error
    assert result.document.error.startswith("VALIDATION_ERROR: invalid document path: ")
    assert _found(ingestor, "acme", "release approved") == []


def test_the_test_event_carries_nothing_and_garbage_is_refused() -> None:
    assert parse_notification(json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": BUCKET})) == []
    for body in ("not json", "[1]", '{"Records": [{"eventName": "ObjectCreated:Put"}]}', '{"Records": 1}'):
        with pytest.raises(ValidationError):
            parse_notification(body)


def test_an_object_deleted_before_its_created_event_is_processed_is_skipped(pipeline: Any) -> None:
    _, ingestor, blobs = pipeline
    [event] = parse_notification(notification("Created", "tenants/acme/gone.md"))
    assert apply(event, ingestor, blobs, key_to_location) is None


def test_a_late_removed_event_for_a_recreated_object_keeps_the_document(pipeline: Any) -> None:
    # Given an object deleted and uploaded again before the removal's notification is processed
    s3, ingestor, blobs = pipeline
    s3.put_object(Bucket=BUCKET, Key="tenants/acme/a.md", Body=b"Otters float.")
    s3.delete_object(Bucket=BUCKET, Key="tenants/acme/a.md")
    s3.put_object(Bucket=BUCKET, Key="tenants/acme/a.md", Body=b"Otters float on their backs.")
    # When the removal arrives (after or before the creations)
    result = apply(
        parse_notification(notification("Removed", "tenants/acme/a.md"))[0], ingestor, blobs, key_to_location
    )
    # Then the current object is what the index holds
    assert result is not None and result.outcome is Outcome.NEW
    assert _found(ingestor, "acme", "backs") == ["a.md"]


def test_a_removed_sidecar_reingests_its_document_without_the_metadata(pipeline: Any) -> None:
    s3, ingestor, blobs = pipeline
    s3.put_object(Bucket=BUCKET, Key="tenants/acme/a.md", Body=b"Otters float.")
    sidecar = json.dumps({"metadataAttributes": {"team": "rivers"}}).encode()
    s3.put_object(Bucket=BUCKET, Key="tenants/acme/a.md.metadata.json", Body=sidecar)
    first = apply(parse_notification(notification("Created", "tenants/acme/a.md"))[0], ingestor, blobs, key_to_location)
    assert first is not None and first.document.attributes.get("team") == "rivers"
    s3.delete_object(Bucket=BUCKET, Key="tenants/acme/a.md.metadata.json")
    result = apply(
        parse_notification(notification("Removed", "tenants/acme/a.md.metadata.json"))[0],
        ingestor,
        blobs,
        key_to_location,
    )
    assert result is not None and result.outcome is Outcome.MODIFIED
    assert "team" not in result.document.attributes


def test_a_removal_for_a_path_the_store_never_held_leaves_a_folder_document_alone(pipeline: Any) -> None:
    # Given a document ingested from a local folder (not from this bucket) at acme's notes.md
    _, ingestor, blobs = pipeline
    folder_doc = source("acme", "notes.md", b"# Notes\n\nThe heron nests by the river.")
    ingestor.ingest(dataclasses.replace(folder_doc, channel="folder"))
    # When the bucket reports notes.md (or its sidecar) gone
    for key in ("tenants/acme/notes.md", "tenants/acme/notes.md.metadata.json"):
        [event] = parse_notification(notification("Removed", key))
        assert apply(event, ingestor, blobs, key_to_location) is None
    # Then the folder's document is still there and found
    assert _found(ingestor, "acme", "heron river") == ["notes.md"]


# --- deletes racing with ingestion: the registry's tombstones, on both registries ----------------------


class Versioned:
    """A versioned bucket (reads pinned to a VersionId still work after a delete), an ingestor on the
    local index and the given registry, a clock that ticks a millisecond a call, and `when_read`: what
    happens right after the next `get` of the blob store, between a worker's read and its first write."""

    def __init__(self, tmp_path: Path, registry: DocumentRegistry) -> None:
        self.s3 = boto3.client("s3", region_name="us-east-1")
        self.s3.create_bucket(Bucket=BUCKET)
        self.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        ticks = iter(datetime(2026, 3, 1, tzinfo=UTC) + timedelta(milliseconds=n) for n in range(10_000))
        self.ingestor = Ingestor(
            LocalIndex(tmp_path / "index.db"), registry, CountingEmbedder(), Chunker(), clock=lambda: next(ticks)
        )
        self.when_read: Callable[[], None] = lambda: None
        outer = self

        class Store(S3BlobStore):
            def get(self, tenant_id: str, path: str) -> SourceObject:
                stored = super().get(tenant_id, path)
                hook, outer.when_read = outer.when_read, lambda: None
                hook()
                return stored

        self.blobs = Store(BUCKET, client=self.s3)

    def created(self, key: str, data: bytes) -> Any:
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=data, Metadata={"owner": "alice"})
        [event] = parse_notification(notification("Created", key))
        return apply(event, self.ingestor, self.blobs, key_to_location)

    def delete_through_the_api(self, doc_id: str) -> None:
        """What DELETE /v1/documents/{id} does: the object, then the chunks and the record."""
        delete_document(self.ingestor, self.blobs, Caller(tenant_id="acme", user_id="alice"), doc_id)


@pytest.fixture(params=["local", "dynamodb"])
def versioned(request: pytest.FixtureRequest, aws_credentials: None, tmp_path: Path) -> Iterator[Versioned]:
    with mock_aws():
        if request.param == "local":
            registry: DocumentRegistry = LocalRegistry(tmp_path / "registry.db")
        else:
            boto3.client("dynamodb", region_name="us-east-1").create_table(TableName="registry", **TABLE_SCHEMA)
            registry = DynamoRegistry("registry", client=boto3.client("dynamodb", region_name="us-east-1"))
        yield Versioned(tmp_path, registry)


def test_an_ingest_that_read_the_object_before_a_delete_does_not_bring_it_back(versioned: Versioned) -> None:
    # Given an indexed document
    first = versioned.created("tenants/acme/a.md", b"Otters float in kelp.")
    assert first is not None and first.outcome is Outcome.NEW
    doc_id = first.document.doc_id
    # When a new version's worker reads the object, and the document is deleted before it records anything
    versioned.when_read = lambda: versioned.delete_through_the_api(doc_id)
    result = versioned.created("tenants/acme/a.md", b"Otters float in kelp and sleep holding hands.")
    # Then the worker's write is refused as stale and skipped (no failure to retry): the document stays
    # deleted, although the version it read can still be loaded from the versioned bucket
    assert result is not None and result.outcome is Outcome.SUPERSEDED
    assert versioned.ingestor.registry.get("acme", doc_id) is None
    assert _found(versioned.ingestor, "acme", "otters") == []


def test_a_document_deleted_while_it_is_indexed_leaves_no_chunk_behind(versioned: Versioned) -> None:
    # Given a new object whose worker has recorded it PENDING and is reading it when it is deleted
    key = "tenants/acme/a.md"
    versioned.s3.put_object(Bucket=BUCKET, Key=key, Body=b"Otters float in kelp.", Metadata={"owner": "alice"})
    stored = versioned.blobs.get("acme", "a.md")

    def load_then_delete() -> bytes:
        data = stored.load()
        versioned.delete_through_the_api(document_id("acme", "a.md"))
        return data

    # When the worker goes on to index the chunks and mark the record INDEXED
    result = versioned.ingestor.ingest(dataclasses.replace(stored, load=load_then_delete))
    # Then the INDEXED write is refused, and the chunks it had written are removed again
    assert result.outcome is Outcome.SUPERSEDED
    assert versioned.ingestor.registry.get("acme", document_id("acme", "a.md")) is None
    assert versioned.ingestor.registry.list("acme").items == []
    assert _found(versioned.ingestor, "acme", "otters kelp") == []


def test_an_upload_after_a_delete_is_indexed_again(versioned: Versioned) -> None:
    # Given a document deleted through the API
    first = versioned.created("tenants/acme/a.md", b"Otters float in kelp.")
    assert first is not None
    versioned.delete_through_the_api(first.document.doc_id)
    # When the same bytes are uploaded again and their event applied (and the old event redelivered)
    again = versioned.created("tenants/acme/a.md", b"Otters float in kelp.")
    # Then it is a new document again, recorded and found
    assert again is not None and again.outcome is Outcome.NEW
    assert _found(versioned.ingestor, "acme", "otters") == ["a.md"]
    record = versioned.ingestor.registry.get("acme", first.document.doc_id)
    assert record is not None and record.status is DocumentStatus.INDEXED
