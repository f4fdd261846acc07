"""The ingestion pipeline on the local stack: idempotency, vector reuse, updates, deletes, failures."""

from __future__ import annotations

import dataclasses
import io
import random
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from citewise.aws.dynamodb import TABLE_SCHEMA, DynamoRegistry
from citewise.domain.errors import ConflictError, SearchBackendError, ThrottledError, ValidationError
from citewise.domain.models import Caller, Document, DocumentStatus, Filter, SearchRequest
from citewise.domain.tenancy import document_id
from citewise.ingest.chunking import Chunker
from citewise.ingest.pipeline import Ingestor, Limits, Outcome
from citewise.runtime.services import Services
from citewise_local.index import LocalIndex
from citewise_local.registry import LocalRegistry
from tests.builders import make_blank_pdf, make_docx, make_docx_body, make_pdf
from tests.factories import CountingEmbedder, source

CALLER = Caller(tenant_id="acme", user_id="alice")
GUIDE = "\n\n".join(
    f"## Section {i}\n\n" + " ".join(f"Topic{i} sentence {j} about widgets." for j in range(40)) for i in range(6)
).encode()


def _stack(home: Path, embedder: CountingEmbedder | None = None, **limits: int) -> tuple[Ingestor, LocalIndex]:
    index = LocalIndex(home / "index.db")
    ingestor = Ingestor(
        index,
        LocalRegistry(home / "registry.db"),
        embedder or CountingEmbedder(),
        Chunker(120, 20),
        limits=Limits(**limits),
    )
    return ingestor, index


def _paths(services: Services, query: str) -> list[str]:
    hits = services.retriever.search(CALLER, SearchRequest(query=query, top_k=50))
    return [hit.chunk.document.path for hit in hits if hit.keyword_score is not None]


def test_unchanged_reingest_costs_no_embedding(tmp_path: Path) -> None:
    # Given a document ingested once
    embedder = CountingEmbedder()
    ingestor, _ = _stack(tmp_path, embedder)
    first = ingestor.ingest(source("acme", "guide.md", GUIDE))
    calls_after_first = embedder.embedded_texts
    # When the same version is ingested again
    again = ingestor.ingest(source("acme", "guide.md", GUIDE))
    # Then it is unchanged and nothing was embedded
    assert first.outcome is Outcome.NEW and first.document.status is DocumentStatus.INDEXED
    assert first.embedded == first.document.chunk_count == calls_after_first > 1
    assert again.outcome is Outcome.UNCHANGED
    assert embedder.embedded_texts == calls_after_first


def test_an_edit_embeds_only_the_changed_chunks(tmp_path: Path) -> None:
    # Given an indexed document
    embedder = CountingEmbedder()
    ingestor, _ = _stack(tmp_path, embedder)
    first = ingestor.ingest(source("acme", "guide.md", GUIDE))
    before = embedder.embedded_texts
    # When one sentence of the last section changes
    edited = GUIDE.replace(b"Topic5 sentence 39 about widgets.", b"Topic5 sentence 39 about gadgets.")
    result = ingestor.ingest(source("acme", "guide.md", edited))
    # Then only the chunk holding it is embedded; every other vector is reused
    assert result.outcome is Outcome.MODIFIED
    assert result.embedded == embedder.embedded_texts - before == 1
    assert result.reused == first.document.chunk_count - 1


def test_an_update_leaves_no_stale_chunk(services: Services) -> None:
    # Given a document mentioning "zeppelin"
    services.ingestor.ingest(source("acme", "a.md", b"# A\n\nThe zeppelin lands at noon."))
    assert _paths(services, "zeppelin") == ["a.md"]
    # When it is replaced by text without it
    services.ingestor.ingest(source("acme", "a.md", b"# A\n\nThe balloon lands at noon."))
    # Then the old text is gone and the new one is found
    assert _paths(services, "zeppelin") == []
    assert _paths(services, "balloon") == ["a.md"]


def test_delete_removes_chunks_and_record(services: Services) -> None:
    result = services.ingestor.ingest(source("acme", "a.md", b"Quokkas are marsupials."))
    assert services.ingestor.delete("acme", result.document.doc_id) is True
    assert _paths(services, "quokkas") == []
    assert services.registry.get("acme", result.document.doc_id) is None
    assert services.ingestor.delete("acme", result.document.doc_id) is False


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("empty.txt", b"", "PARSE_ERROR"),
        ("garbage.pdf", bytes(range(256)) * 40, "PARSE_ERROR"),
        ("truncated.pdf", make_pdf(["Page one text.", "Page two text."])[:300], "PARSE_ERROR"),
        ("photo.png", b"\x89PNG\r\n\x1a\n....", "UNSUPPORTED_MEDIA_TYPE"),
        ("huge.pdf", make_blank_pdf(5000), "PAYLOAD_TOO_LARGE"),
        # Ingest bombs: more chunks than CITEWISE_MAX_CHUNKS (10,000), more blocks than 20 a chunk, a zip
        # whose XML inflates over CITEWISE_MAX_EXPANSION (100) times the upload
        ("sections.md", b"# a\nb\n" * 10_001, "PAYLOAD_TOO_LARGE"),
        ("lines.txt", b"a\n\n" * 200_001, "PAYLOAD_TOO_LARGE"),
        ("inflated.docx", make_docx([(None, "a")] * 100_000), "PAYLOAD_TOO_LARGE"),
    ],
)
def test_bad_documents_fail_with_a_reason_and_lose_nothing_else(
    services: Services, name: str, data: bytes, code: str
) -> None:
    # Given a good document already indexed, and an older good version of the bad one
    services.ingestor.ingest(source("acme", "good.md", b"Wombats dig burrows."))
    services.ingestor.ingest(source("acme", name, b"Platypus facts.", version="v1"))
    # When the bad bytes arrive as a new version
    result = services.ingestor.ingest(source("acme", name, data, version="v2"))
    # Then it is FAILED with a coded reason, its old chunks are gone, and the good document is intact
    assert result.outcome is Outcome.FAILED
    record = services.registry.get("acme", document_id("acme", name))
    assert record is not None and record.status is DocumentStatus.FAILED
    assert record.error is not None and record.error.startswith(f"{code}: ")
    assert record.chunk_count == 0
    assert _paths(services, "platypus") == []
    assert _paths(services, "wombats") == ["good.md"]


def test_a_docx_nested_past_the_recursion_limit_is_indexed(services: Services) -> None:
    # Given a .docx whose paragraph sits in 5,000 nested content controls (once INTERNAL_ERROR:
    # RecursionError), with an image's worth of incompressible bytes as real documents have
    depth = 5000
    body = "<w:sdt><w:sdtContent>" * depth + "<w:p><w:r><w:t>Wombats dig.</w:t></w:r></w:p>"
    data = make_docx_body(body + "</w:sdtContent></w:sdt>" * depth)
    buffer = io.BytesIO(data)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("word/media/image1.png", random.Random(7).randbytes(20_000))
    # When it is ingested
    result = services.ingestor.ingest(source("acme", "deep.docx", buffer.getvalue()))
    # Then it is indexed and found like any other document
    assert result.outcome is Outcome.NEW and result.document.status is DocumentStatus.INDEXED
    assert _paths(services, "wombats") == ["deep.docx"]


def test_a_too_large_document_is_refused_without_being_read(tmp_path: Path) -> None:
    ingestor, _ = _stack(tmp_path, max_document_bytes=1000)
    obj = source("acme", "big.txt", b"x" * 1001)
    unread = type(obj)(**{**obj.__dict__, "load": lambda: pytest.fail("the content was read")})
    result = ingestor.ingest(unread)
    assert result.outcome is Outcome.FAILED
    assert result.document.error == "PAYLOAD_TOO_LARGE: document is 1001 bytes; the limit is 1000"


def test_a_non_utf8_text_file_is_decoded(services: Services) -> None:
    data = "Café prices rose “sharply” in 2024.".encode("cp1252")
    result = services.ingestor.ingest(source("acme", "prices.txt", data))
    assert result.outcome is Outcome.NEW
    hits = services.retriever.search(CALLER, SearchRequest(query="café prices"))
    assert hits[0].chunk.text == "Café prices rose “sharply” in 2024."


@pytest.mark.parametrize(("tenant", "path"), [("a/b", "x.md"), ("*", "x.md"), ("acme", "../x.md"), ("acme", "/etc/x")])
def test_invalid_tenant_or_path_is_refused_before_anything_is_written(
    services: Services, tenant: str, path: str
) -> None:
    with pytest.raises(ValidationError):
        services.ingestor.ingest(source(tenant, path, b"text"))
    assert services.registry.list("acme").items == []


def test_transient_failures_are_recorded_then_raised_for_retry(tmp_path: Path) -> None:
    # Given an embedder that is throttled once
    class ThrottledOnce(CountingEmbedder):
        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            if self.calls == 0:
                self.calls += 1
                raise ThrottledError("slow down")
            return super().embed_documents(texts)

    ingestor, _ = _stack(tmp_path, ThrottledOnce())
    # When ingesting, the throttle is raised (so a queue would retry) and the document shows FAILED
    with pytest.raises(ThrottledError):
        ingestor.ingest(source("acme", "a.md", b"Text."))
    record = ingestor.registry.get("acme", document_id("acme", "a.md"))
    assert record is not None and record.status is DocumentStatus.FAILED
    assert record.error == "THROTTLED: slow down"
    # Then the retry indexes it
    assert ingestor.ingest(source("acme", "a.md", b"Text.")).outcome is Outcome.MODIFIED


def test_sidecar_attributes_are_filterable(services: Services) -> None:
    services.ingestor.ingest(source("acme", "a.md", b"Otters hold hands.", attributes={"year": 2024, "tags": ["zoo"]}))
    services.ingestor.ingest(source("acme", "b.md", b"Otters sleep floating.", attributes={"year": 2019}))
    recent = Filter.model_validate({"greaterThan": {"key": "year", "value": 2020}})
    hits = services.retriever.search(CALLER, SearchRequest(query="otters", filters=recent))
    assert [h.chunk.document.path for h in hits] == ["a.md"]
    assert hits[0].chunk.document.tags == ("zoo",)


def test_an_index_refuses_vectors_of_another_embedder(tmp_path: Path) -> None:
    first, _ = _stack(tmp_path, CountingEmbedder(384))
    first.ingest(source("acme", "a.md", b"Text."))
    second, _ = _stack(tmp_path, CountingEmbedder(64))
    with pytest.raises(SearchBackendError, match="hashing-384"):
        second.ingest(source("acme", "b.md", b"Text."))


def test_a_killed_ingest_never_leaves_a_half_replaced_document(tmp_path: Path) -> None:
    # Given version 1 of a document indexed
    ingestor, index = _stack(tmp_path)
    ingestor.ingest(source("acme", "guide.md", GUIDE))
    before = sorted(h.chunk.chunk_id for h in index.keyword_search(CALLER, "widgets", None, 500))
    index.close()
    # When another process is SIGKILLed halfway through writing version 2's chunks
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from tests.integration.test_ingestion import _stack, GUIDE
        from tests.factories import source

        class DiesHalfway(list):
            def __iter__(self):
                for i, item in enumerate(list.__iter__(self)):
                    if i == len(self) // 2:
                        os.kill(os.getpid(), signal.SIGKILL)
                    yield item

        ingestor, index = _stack(Path({str(tmp_path)!r}))
        original = index.replace_document
        index.replace_document = lambda t, d, chunks, vectors: original(t, d, DiesHalfway(chunks), vectors)
        ingestor.ingest(source("acme", "guide.md", GUIDE.replace(b"widgets", b"gizmos")))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[2], check=False)
    assert done.returncode == -9
    # Then the index still holds exactly version 1
    _, reopened = _stack(tmp_path)
    after = sorted(h.chunk.chunk_id for h in reopened.keyword_search(CALLER, "widgets", None, 500))
    assert after == before and len(before) > 2
    assert reopened.keyword_search(CALLER, "gizmos", None, 500) == []


def test_a_worker_whose_failure_lost_to_a_newer_version_flags_it_for_reingest(tmp_path: Path) -> None:
    # Given a registry where a newer version takes the record while this worker fails on a bad document
    class NewerWins(LocalRegistry):
        def put(self, document: Document) -> None:
            if document.status is DocumentStatus.FAILED:
                super().put(
                    document.model_copy(update={"status": DocumentStatus.PENDING, "version": "v2", "error": None})
                )
                raise ConflictError("a newer version was recorded")
            super().put(document)

    registry = NewerWins(tmp_path / "registry.db")
    ingestor = Ingestor(LocalIndex(tmp_path / "index.db"), registry, CountingEmbedder(), Chunker(120, 20))
    # When its FAILED write loses (after it removed the document's chunks from the index)
    with pytest.raises(ConflictError):
        ingestor.ingest(source("acme", "a.md", b""))
    # Then no FAILED status hides the newer version: the record is PENDING for a re-ingest
    record = registry.get("acme", document_id("acme", "a.md"))
    assert record is not None and record.status is DocumentStatus.PENDING and record.error is None


def test_a_worker_that_lost_before_touching_the_index_is_superseded(tmp_path: Path) -> None:
    # Given a registry where a newer version already owns the record when this worker starts
    class NewerWins(LocalRegistry):
        def put(self, document: Document) -> None:
            if document.version == "v1":
                raise ConflictError("a newer version was recorded")
            super().put(document)

    registry = NewerWins(tmp_path / "registry.db")
    ingestor = Ingestor(LocalIndex(tmp_path / "index.db"), registry, CountingEmbedder(), Chunker(120, 20))
    ingestor.ingest(source("acme", "a.md", b"Version two.", version="v2"))
    # When the older version's worker tries to start, it is refused before it touches anything
    with pytest.raises(ConflictError):
        ingestor.ingest(source("acme", "a.md", b"Version one.", version="v1"))
    record = registry.get("acme", document_id("acme", "a.md"))
    assert record is not None and record.status is DocumentStatus.INDEXED and record.version == "v2"


def test_an_older_version_committed_last_is_reingested_not_left_in_the_index(aws_credentials: None) -> None:
    # Given two workers on one DynamoDB registry (ordered writes) and one index, and a clock that ticks
    with mock_aws():
        boto3.client("dynamodb").create_table(TableName="registry", **TABLE_SCHEMA)
        registry = DynamoRegistry("registry", client=boto3.client("dynamodb"))
        index = LocalIndex(Path(tempfile.mkdtemp()) / "index.db")
        ticks = iter(datetime(2026, 11, 22, tzinfo=UTC) + timedelta(seconds=n) for n in range(100))
        workers = [
            Ingestor(index, registry, CountingEmbedder(), Chunker(120, 20), clock=lambda: next(ticks)) for _ in "ab"
        ]
        newer = source("acme", "a.md", b"Version two mentions gizmos.", version="v2")

        def load_old_while_the_newer_version_is_ingested() -> bytes:
            # Worker B ingests version 2 completely while worker A is still reading version 1
            assert workers[1].ingest(newer).outcome in (Outcome.NEW, Outcome.MODIFIED)
            return b"Version one mentions widgets."

        older = dataclasses.replace(newer, version="v1", load=load_old_while_the_newer_version_is_ingested)
        # When worker A, which started first, commits last: its chunks replace version 2's in the index
        with pytest.raises(ConflictError):
            workers[0].ingest(older)
        # Then the record is flagged, so the redelivered message re-ingests the current object (v2)
        record = registry.get("acme", document_id("acme", "a.md"))
        assert record is not None and record.status is DocumentStatus.PENDING and record.version == "v2"
        assert workers[0].ingest(newer).outcome is Outcome.MODIFIED
        assert [c.chunk.document.path for c in index.keyword_search(CALLER, "gizmos", None, 10)] == ["a.md"]
        assert index.keyword_search(CALLER, "widgets", None, 10) == []
        final = registry.get("acme", document_id("acme", "a.md"))
        assert final is not None and final.status is DocumentStatus.INDEXED and final.version == "v2"


def test_many_documents_are_embedded_together_and_one_bad_one_spoils_nothing(tmp_path: Path) -> None:
    # Given ten small documents and one corrupt pdf among them
    embedder = CountingEmbedder()
    ingestor, _ = _stack(tmp_path, embedder)
    objects = [source("acme", f"doc{i}.md", f"Document {i} about topic{i}.".encode()) for i in range(10)]
    objects.insert(5, source("acme", "broken.pdf", b"%PDF-1.4 garbage"))
    # When ingested as a stream
    outcomes = {obj.path: result for obj, result in ingestor.ingest_many(objects)}
    # Then all ten good ones were embedded in a single call, and only the pdf failed
    assert embedder.calls == 1 and embedder.embedded_texts == 10
    assert outcomes["broken.pdf"].outcome is Outcome.FAILED  # type: ignore[union-attr]
    assert all(outcomes[f"doc{i}.md"].outcome is Outcome.NEW for i in range(10))  # type: ignore[union-attr]
