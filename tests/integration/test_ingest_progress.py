"""Durable progress of a long ingest: each embedding batch is staged in the index as it is embedded, so
an attempt that fails, is stopped by its time budget or is killed loses at most the batch in flight, and
the previous version stays searchable until the new one is written whole (`citewise.ingest.pipeline`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from citewise.aws.opensearch import OpenSearchIndex
from citewise.aws.opensearch_queries import STAGED_GENERATION
from citewise.domain.errors import IngestDeferredError, ThrottledError
from citewise.domain.models import Caller, DocumentStatus, Vector
from citewise.domain.tenancy import document_id
from citewise.ingest import pipeline
from citewise.ingest.chunking import Chunker
from citewise.ingest.pipeline import Ingestor, Outcome
from citewise.ports.index import VectorIndex
from citewise_local.index import LocalIndex
from citewise_local.registry import LocalRegistry
from tests.factories import CountingEmbedder, source
from tests.opensearch_node import NODE, fresh_index_name

CALLER = Caller(tenant_id="acme", user_id="alice")
BATCH = 4
DOC_ID = document_id("acme", "big.md")


def long_text(word: str, sections: int = 12) -> bytes:
    """A document of about three chunks a section, every chunk's text its own, mentioning `word`."""
    return "\n\n".join(
        f"## Part {i}\n\n" + " ".join(f"{word} fact {i}.{j} about item {i * 100 + j}." for j in range(60))
        for i in range(sections)
    ).encode()


V1, V2 = long_text("widgets"), long_text("gizmos")


@pytest.fixture(params=["local", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def backend(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The index the tests run on: the local one, or a fresh index on the real OpenSearch node (its name)."""
    if request.param == "local":
        yield None
        return
    name = fresh_index_name()
    yield name
    with NODE.client() as client:
        client.indices.delete(index=name, ignore_unavailable=True)


def stack(
    home: Path,
    embedder: CountingEmbedder,
    *,
    commit_reserve: float = 0.0,
    stage_seconds: float = 0.0,
    opensearch: str | None = None,
) -> tuple[Ingestor, VectorIndex]:
    """An ingestor over a local registry and the local index, or the OpenSearch index named `opensearch`;
    it stages every batch unless `stage_seconds` says otherwise."""
    index: VectorIndex = (
        LocalIndex(home / "index.db")
        if opensearch is None
        else OpenSearchIndex(NODE.client(), opensearch, serverless=False)
    )
    registry = LocalRegistry(home / "registry.db")
    ingestor = Ingestor(
        index,
        registry,
        embedder,
        Chunker(120, 20),
        embed_batch_size=BATCH,
        commit_reserve=commit_reserve,
        stage_seconds=stage_seconds,
    )
    return ingestor, index


def found(index: VectorIndex, word: str) -> set[str]:
    return {hit.chunk.chunk_id for hit in index.keyword_search(CALLER, word, None, 1000)}


def staged_left(index: VectorIndex) -> int:
    """How many staged vectors the index holds."""
    if isinstance(index, LocalIndex):
        return int(index._writer.execute("SELECT count(*) FROM staged_vectors").fetchone()[0])
    assert isinstance(index, OpenSearchIndex)
    index._client.indices.refresh(index=index._index)
    query = {"query": {"term": {"generation": STAGED_GENERATION}}}
    return int(index._client.count(index=index._index, body=query)["count"])


class FailsAtCall(CountingEmbedder):
    """Embeds like the hashing embedder, and fails (as `fail` does) on call number `at` (from 1)."""

    def __init__(self, at: int, fail: type[Exception] = ThrottledError) -> None:
        super().__init__()
        self.at, self.fail = at, fail

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        if self.calls + 1 == self.at:
            self.calls += 1
            raise self.fail("slow down")
        return super().embed_documents(texts)


def test_a_retry_after_a_failure_at_batch_k_embeds_only_the_chunks_not_yet_embedded(
    tmp_path: Path, backend: str | None
) -> None:
    # Given a long document whose first attempt is throttled at its 5th embedding batch
    interrupted = FailsAtCall(5)
    ingestor, index = stack(tmp_path, interrupted, opensearch=backend)
    with pytest.raises(ThrottledError):
        ingestor.ingest(source("acme", "big.md", V2))
    assert interrupted.embedded_texts == 4 * BATCH

    # When the queue retries it with a fresh process's embedder
    retry = CountingEmbedder()
    ingestor, index = stack(tmp_path, retry, opensearch=backend)
    result = ingestor.ingest(source("acme", "big.md", V2))

    # Then only the chunks the first attempt had not embedded are embedded, in the retry's own batches
    chunks = result.document.chunk_count
    assert chunks > 10 * BATCH
    assert retry.embedded_texts == result.embedded == chunks - 4 * BATCH
    assert result.reused == 4 * BATCH
    assert result.document.status is DocumentStatus.INDEXED
    assert len(found(index, "gizmos")) == chunks
    # and nothing staged is left behind: the vectors are the chunks' now
    assert staged_left(index) == 0


def test_a_budget_running_low_defers_the_document_with_progress_kept_and_the_old_version_searchable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str | None
) -> None:
    # Given version 1 indexed, and an invocation whose budget leaves room for 3 batches of version 2
    ingestor, index = stack(tmp_path, CountingEmbedder(), opensearch=backend)
    ingestor.ingest(source("acme", "big.md", V1))
    v1_chunks = found(index, "widgets")
    embedder = CountingEmbedder()
    # (staging only every 1,000 s: what a deferral keeps, it stages as it stops)
    ingestor, index = stack(tmp_path, embedder, commit_reserve=60.0, stage_seconds=1000.0, opensearch=backend)
    monkeypatch.setattr(pipeline.deadline, "remaining", lambda: 100.0 - 10 * embedder.calls)

    # When version 2 is ingested / Then it stops before the 4th batch, saying so, instead of timing out
    with pytest.raises(IngestDeferredError) as deferred:
        ingestor.ingest(source("acme", "big.md", V2))
    assert deferred.value.code == "INGEST_DEFERRED"
    assert deferred.value.details["embedded"] == embedder.embedded_texts == 4 * BATCH
    # and readers still see version 1 whole; the record waits as PENDING
    assert found(index, "widgets") == v1_chunks and found(index, "gizmos") == set()
    record = ingestor.registry.get("acme", DOC_ID)
    assert record is not None and record.status is DocumentStatus.PENDING and record.error is None

    # When it is redelivered to an invocation with time enough
    monkeypatch.undo()
    retry = CountingEmbedder()
    ingestor, index = stack(tmp_path, retry, opensearch=backend)
    result = ingestor.ingest(source("acme", "big.md", V2))

    # Then the rest is embedded, nothing twice, and version 2 replaces version 1
    assert result.outcome is Outcome.MODIFIED and result.document.status is DocumentStatus.INDEXED
    assert retry.embedded_texts == result.document.chunk_count - 4 * BATCH
    assert found(index, "widgets") == set() and len(found(index, "gizmos")) == result.document.chunk_count


def test_a_permanent_failure_drops_the_staged_vectors(tmp_path: Path, backend: str | None) -> None:
    # Given a long document whose embedder fails with a bug at its 3rd batch (FAILED for good)
    ingestor, index = stack(tmp_path, FailsAtCall(3, RuntimeError), opensearch=backend)
    result = ingestor.ingest(source("acme", "big.md", V2))

    # Then the record is FAILED and none of its staged vectors is kept
    assert result.outcome is Outcome.FAILED
    assert staged_left(index) == 0


def test_a_kill_9_in_the_middle_loses_nothing(tmp_path: Path) -> None:
    # Given version 1 of a long document indexed
    ingestor, index = stack(tmp_path, CountingEmbedder())
    ingestor.ingest(source("acme", "big.md", V1))
    v1_chunks = found(index, "widgets")
    index.close()

    # When a worker process ingesting version 2 is SIGKILLed during its 6th embedding batch
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from tests.factories import CountingEmbedder, source
        from tests.integration.test_ingest_progress import V2, stack

        class DiesAtBatch6(CountingEmbedder):
            def embed_documents(self, texts):
                if self.calls == 5:
                    os.kill(os.getpid(), signal.SIGKILL)
                return super().embed_documents(texts)

        ingestor, _ = stack(Path({str(tmp_path)!r}), DiesAtBatch6())
        ingestor.ingest(source("acme", "big.md", V2))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[2], check=False)
    assert done.returncode == -9

    # Then until redelivery readers see version 1 whole and nothing of version 2
    retry = CountingEmbedder()
    ingestor, index = stack(tmp_path, retry)
    assert found(index, "widgets") == v1_chunks and found(index, "gizmos") == set()

    # When the message is redelivered to a new process
    result = ingestor.ingest(source("acme", "big.md", V2))

    # Then the document ends INDEXED with every chunk, and the 5 batches embedded before the kill are
    # not embedded again
    assert result.document.status is DocumentStatus.INDEXED
    assert retry.embedded_texts == result.document.chunk_count - 5 * BATCH
    assert len(found(index, "gizmos")) == result.document.chunk_count
    assert found(index, "widgets") == set()
