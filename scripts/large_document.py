"""Time the largest document the caps allow (CITEWISE_MAX_CHUNKS chunks) through the ingest pipeline.

    .venv/bin/python scripts/large_document.py [--opensearch-url URL] [--chunks 10000] [--runs 3]

Ingests a generated Markdown document that makes `--chunks` chunks of the default size (400 tokens)
with the deterministic hashing embedder at Titan v2's 1,024 dimensions, on the local index or an
index of the given OpenSearch node (created, then deleted), and prints the median seconds of each
phase: parse + chunk, embedding (with the staging of each batch), and the index write (commit), and of
an attempt that finds every vector by hash (the last of a document embedded over several). The
embedding time of Bedrock Titan is estimated from its throughput, not measured (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from citewise.aws.opensearch import OpenSearchIndex
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import Vector
from citewise.domain.objects import SourceObject
from citewise.ingest.chunking import Chunker
from citewise.ingest.pipeline import Ingestor
from citewise.ports.index import VectorIndex
from citewise.runtime.settings import IngestSettings
from citewise_local.index import LocalIndex
from citewise_local.registry import LocalRegistry

WORDS_PER_SECTION = 300  # with the default 400-token chunks: one chunk a section


class TimedEmbedder(HashingEmbedder):
    """The hashing embedder, adding up the time spent embedding."""

    seconds = 0.0

    def embed_documents(self, texts: list[str]) -> list[Vector]:  # type: ignore[override]
        began = time.perf_counter()
        try:
            return super().embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - began


def document(chunks: int) -> bytes:
    return "\n\n".join(
        f"## Section {i}\n\n" + " ".join(f"term{i}x{j}" for j in range(WORDS_PER_SECTION)) for i in range(chunks)
    ).encode()


def run(index: VectorIndex, home: Path, data: bytes) -> dict[str, float]:
    settings = IngestSettings()
    embedder = TimedEmbedder(1024)
    ingestor = Ingestor(
        index,
        LocalRegistry(home / f"registry-{uuid.uuid4().hex}.db"),
        embedder,
        Chunker(settings.chunk_tokens, settings.chunk_overlap, settings.chunk_chars),
        embed_batch_size=settings.embed_batch_size,
    )
    ingestor.ensure_index()
    commits: list[float] = []
    replace = index.replace_document

    def timed_replace(*args: object) -> None:
        began = time.perf_counter()
        replace(*args)  # type: ignore[arg-type]
        commits.append(time.perf_counter() - began)

    index.replace_document = timed_replace  # type: ignore[method-assign]
    obj = SourceObject(
        tenant_id="bench", path=f"large-{uuid.uuid4().hex}.md", version="1", size=len(data), load=lambda: data
    )
    began = time.perf_counter()
    result = ingestor.ingest(obj)
    total = time.perf_counter() - began
    # The last attempt of a document embedded over several: every vector is found by hash.
    began = time.perf_counter()
    again = ingestor.ingest(dataclasses.replace(obj, version="2"))
    reused = time.perf_counter() - began
    assert again.embedded == 0, again
    index.replace_document = replace  # type: ignore[method-assign]
    index.delete_document("bench", result.document.doc_id)
    return {
        "chunks": result.document.chunk_count,
        "total": total,
        "embed": embedder.seconds,
        "commit": commits[0],
        "rest (parse, chunk, staging, registry)": total - embedder.seconds - commits[0],
        "again, every vector reused (lookup + commit)": reused,
        "again: its commit (replacing every chunk)": commits[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--opensearch-url")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    data = document(args.chunks)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        if args.opensearch_url:
            from opensearchpy import OpenSearch

            client = OpenSearch(hosts=[args.opensearch_url], timeout=300)
            name = f"citewise-large-{uuid.uuid4().hex[:8]}"
            index: VectorIndex = OpenSearchIndex(client, name, serverless=False, replicas=0, timeout=300)
        else:
            index = LocalIndex(home / "index.db")
        try:
            runs = [run(index, home, data) for _ in range(args.runs)]
        finally:
            if args.opensearch_url:
                client.indices.delete(index=name, ignore_unavailable=True)
    for key in runs[0]:
        print(f"{key}: {statistics.median(r[key] for r in runs):.2f}")


if __name__ == "__main__":
    main()
