"""Sources, channels and source dates through the pipeline, the registry and the local index."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from citewise.domain.models import Caller, DocumentStatus, Filter, SearchRequest
from citewise.domain.provenance import ProvenanceKeys
from citewise.ingest.chunking import Chunker
from citewise.ingest.pipeline import Ingestor, Outcome
from citewise.query.retrieval import Retriever
from citewise_local.index import LocalIndex
from citewise_local.registry import LocalRegistry
from tests.factories import CountingEmbedder, source

CALLER = Caller(tenant_id="acme", user_id="alice")
STORED_AT = datetime(2026, 2, 2, 12, 0, tzinfo=UTC)


def _ingestor(home: Path, keys: ProvenanceKeys | None = None) -> Ingestor:
    return Ingestor(
        LocalIndex(home / "index.db"),
        LocalRegistry(home / "registry.db"),
        CountingEmbedder(),
        Chunker(120, 20),
        provenance_keys=keys,
    )


def _paths(ingestor: Ingestor, flt: dict[str, object]) -> list[str]:
    retriever = Retriever(ingestor.index, ingestor.embedder)
    request = SearchRequest(query="rollback steps", top_k=20, filters=Filter.model_validate(flt))
    return sorted({hit.chunk.document.path for hit in retriever.search(CALLER, request)})


def test_source_date_comes_from_metadata_then_format_then_the_object(tmp_path: Path) -> None:
    # Given one document of each kind
    ingestor = _ingestor(tmp_path)
    text = b"# Rollback\n\nRollback steps for the deployment.\n"
    dated = source("acme", "jira/PROJ-1.md", text, attributes={"updated_at": "2025-11-30", "source": "Jira"})
    front = source("acme", "runbooks/deploy.md", b"---\nupdated: 2026-01-15\n---\n" + text)
    plain = dataclasses.replace(source("acme", "notes.md", text), last_modified=STORED_AT, channel="s3")
    # When they are ingested
    results = [ingestor.ingest(obj) for obj in (dated, front, plain)]
    # Then each has its date and source, on the record and on every chunk
    assert [(r.document.source, r.document.source_date) for r in results] == [
        ("Jira", datetime(2025, 11, 30, tzinfo=UTC)),
        ("runbooks", datetime(2026, 1, 15, tzinfo=UTC)),
        ("", STORED_AT),
    ]
    assert [r.document.channel for r in results] == ["local", "local", "s3"]
    assert "updated_at" not in results[0].document.attributes and "source" not in results[0].document.attributes
    # And both are filterable with the filter grammar
    assert _paths(ingestor, {"greaterThanOrEquals": {"key": "source_date", "value": "2026-01-01"}}) == [
        "notes.md",
        "runbooks/deploy.md",
    ]
    assert _paths(ingestor, {"lessThan": {"key": "source_date", "value": "2026-01-01T00:00:00+00:00"}}) == [
        "jira/PROJ-1.md"
    ]
    assert _paths(ingestor, {"in": {"key": "source", "value": ["Jira", "runbooks"]}}) == [
        "jira/PROJ-1.md",
        "runbooks/deploy.md",
    ]
    assert _paths(ingestor, {"equals": {"key": "channel", "value": "s3"}}) == ["notes.md"]


def test_a_metadata_date_that_is_not_a_date_is_failed_with_the_reason(tmp_path: Path) -> None:
    ingestor = _ingestor(tmp_path)
    result = ingestor.ingest(source("acme", "a.md", b"Text.", attributes={"updated_at": "last week"}))
    assert result.outcome is Outcome.FAILED and result.document.status is DocumentStatus.FAILED
    assert result.document.error == (
        "VALIDATION_ERROR: metadata 'updated_at' is not a date: 'last week' (use ISO 8601, e.g. 2026-03-03 or "
        "2026-03-03T10:00:00Z)"
    )
    # And fixing the metadata ingests it
    fixed = ingestor.ingest(source("acme", "a.md", b"Text.", attributes={"updated_at": "2026-01-01"}))
    assert fixed.outcome is Outcome.MODIFIED and fixed.document.source_date == datetime(2026, 1, 1, tzinfo=UTC)


def test_the_metadata_keys_are_settings(tmp_path: Path) -> None:
    ingestor = _ingestor(tmp_path, ProvenanceKeys(source="system", date="modified"))
    result = ingestor.ingest(source("acme", "x/a.md", b"Text.", attributes={"system": "crm", "modified": "2024-05-06"}))
    assert (result.document.source, result.document.source_date) == ("crm", datetime(2024, 5, 6, tzinfo=UTC))


def test_a_record_from_before_the_channel_split_is_re_derived_on_its_next_ingest(tmp_path: Path) -> None:
    # Given a record and chunks as the previous version wrote them: the channel in `source`, no date
    ingestor = _ingestor(tmp_path)
    obj = dataclasses.replace(source("acme", "jira/PROJ-2.md", b"Rollback steps."), channel="s3")
    first = ingestor.ingest(obj)
    legacy = first.document.model_copy(update={"source": "s3", "channel": "", "source_date": None})
    ingestor.registry.delete("acme", legacy.doc_id)
    ingestor.registry.put(legacy.model_copy(update={"status": DocumentStatus.PENDING}))
    ingestor.registry.put(legacy)
    # When the same version is delivered again
    again = ingestor.ingest(obj)
    # Then it is not skipped as unchanged: both fields are re-derived, the vectors reused, nothing lost
    assert again.outcome is Outcome.MODIFIED and (again.embedded, again.reused) == (0, 1)
    assert (again.document.source, again.document.channel) == ("jira", "s3")
    assert again.document.source_date is not None
    assert _paths(ingestor, {"equals": {"key": "source", "value": "jira"}}) == ["jira/PROJ-2.md"]
    # And a third delivery is unchanged
    assert ingestor.ingest(obj).outcome is Outcome.UNCHANGED
