"""What tenant erasure costs locally: the per-request check, and the time to erase a tenant of N chunks.

1. The check every tenant request makes (`Services.check_not_erasing`: one point read of the tenant's
   erasure record in `erasures.db`), median over `calls` calls, with another tenant's record present.
2. A tenant of `documents` × `chunks` chunks (384-dimension vectors, MiniLM's) with a record and an
   object per document, beside a neighbour of the same size, erased by the job in steps of the default
   batch: the wall time, and chunks per second. The neighbour is checked whole afterwards.

`python -m benchmarks.erasure [--documents D --chunks C --calls N]` runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from citewise.domain.models import Chunk, Document, DocumentMetadata, DocumentStatus
from citewise.domain.tenancy import document_id
from citewise.ports.erasure import run_erasure, start_erasure
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings

DIMENSION = 384
NOW = datetime(2026, 11, 27, tzinfo=UTC)


def _fill(services: object, tenant_id: str, documents: int, chunks: int, rng: np.random.Generator) -> None:
    registry, index, blobs = services.registry, services.index, services.blobs  # type: ignore[attr-defined]
    for n in range(documents):
        path = f"doc{n:05d}.md"
        doc_id = document_id(tenant_id, path)
        blobs.put(tenant_id, path, f"# Doc {n}\n\nText.\n".encode(), owner="alice")
        for status in (DocumentStatus.PENDING, DocumentStatus.INDEXED):
            registry.put(
                Document(
                    tenant_id=tenant_id,
                    doc_id=doc_id,
                    path=path,
                    source="local",
                    owner="alice",
                    status=status,
                    version="v1",
                    created_at=NOW,
                    updated_at=NOW,
                )
            )
        meta = DocumentMetadata(
            tenant_id=tenant_id,
            doc_id=doc_id,
            owner="alice",
            source="local",
            path=path,
            title=path,
            created_at=NOW,
            updated_at=NOW,
        )
        texts = [f"chunk {i} of document {n} about rotation keys" for i in range(chunks)]
        index.replace_document(
            tenant_id,
            doc_id,
            [
                Chunk(
                    chunk_id=f"{doc_id}-{i:05d}",
                    ordinal=i,
                    text=t,
                    start=0,
                    end=len(t),
                    content_hash=f"{n}:{i}",
                    document=meta,
                )
                for i, t in enumerate(texts)
            ],
            rng.standard_normal((chunks, DIMENSION)).astype(np.float32).tolist(),
        )


def run(documents: int = 100, chunks: int = 100, calls: int = 5000) -> dict[str, float]:
    """The figures: the check's median in microseconds, the erasure's seconds and chunks per second."""
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as home:
        services = build_services(Settings(home=Path(home), embedder="hashing", hashing_dimension=DIMENSION))
        try:
            for tenant_id in ("acme", "acme2"):
                _fill(services, tenant_id, documents, chunks, rng)
            start_erasure(services.erasures, "globex", operator="ops", known=True)
            timings = []
            for _ in range(calls):
                started = time.perf_counter()
                services.check_not_erasing("acme")
                timings.append(time.perf_counter() - started)
            start_erasure(services.erasures, "acme", operator="ops", known=True)
            stores = services.erased_stores()
            started = time.perf_counter()
            receipt = run_erasure(services.erasures, "acme", stores, {"usage": services.usage})
            seconds = time.perf_counter() - started
            assert all(part.remaining == 0 for part in receipt.stores)
            assert services.index.count_tenant("acme2") == documents * chunks
        finally:
            services.close()
    return {
        "check_p50_us": statistics.median(timings) * 1e6,
        "chunks": documents * chunks,
        "erase_seconds": seconds,
        "chunks_per_second": documents * chunks / seconds,
        "steps": receipt.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    print(json.dumps(run(args.documents, args.chunks, args.calls), indent=2))


if __name__ == "__main__":
    main()
