"""A 1,000-page PDF ingested end to end through `Ingestor` on a temporary home (hashing embedder).

Everything the CLI's `ingest` does for one file: registry PENDING, parse, chunk, embed, the atomic swap
into the SQLite index (FTS5 + vectors), registry INDEXED. Each run gets a fresh home, so every run is a
NEW document; a second ingest of the same version is then timed too (the idempotent skip). Before each
ingest, `parse` alone is timed on the same bytes: the PDF library's share, apart from chunking, embedding
and the index.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from benchmarks import inputs
from benchmarks.common import Section, log, timed
from citewise.domain.objects import SourceObject
from citewise.ingest.parsing import parse
from citewise.ingest.pipeline import IngestResult, Outcome
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings


def ingest_once(data: bytes, path: str) -> tuple[IngestResult, float, float]:
    """Ingest `data` into a new temporary home; the result, its wall time, and the unchanged re-ingest's."""
    source = SourceObject(
        tenant_id="bench",
        path=path,
        size=len(data),
        version=hashlib.sha256(data).hexdigest(),
        load=lambda: data,
        content_type="application/pdf",
    )
    with tempfile.TemporaryDirectory(prefix="citewise-bench-") as home:
        services = build_services(Settings(home=Path(home), embedder="hashing"))
        try:
            result, wall_s = timed(lambda: services.ingestor.ingest(source))
            again, again_s = timed(lambda: services.ingestor.ingest(source))
        finally:
            services.close()
    if result.outcome is not Outcome.NEW or again.outcome is not Outcome.UNCHANGED:
        raise RuntimeError(f"unexpected outcomes {result.outcome}, {again.outcome}: {result.document.error}")
    return result, wall_s, again_s


def run(repeats: int = 3, pages: int = inputs.HANDBOOK_PAGES) -> Section:
    section = Section("ingest_pdf", f"{pages:,}-page PDF through Ingestor (hashing embedder, local index)")
    data = inputs.handbook_pdf(pages)
    walls: list[float] = []
    skips: list[float] = []
    documents = []
    parses: list[float] = []
    for repetition in range(repeats):
        _parsed, parse_s = timed(lambda: parse(data, "handbook.pdf"))
        parses.append(parse_s)
        log(f"  {pages}-page pdf: run {repetition + 1}")
        result, wall_s, skip_s = ingest_once(data, "handbook.pdf")
        documents.append(result.document)
        walls.append(wall_s)
        skips.append(skip_s)
    document = documents[-1]
    section.add("wall_s", f"{pages:,}-page pdf: ingest wall time", "s", walls)
    section.add("pages_s", f"{pages:,}-page pdf: pages/s", "pages/s", [(document.page_count or 0) / w for w in walls])
    section.add("parse_pages_s", f"{pages:,}-page pdf: parse alone, pages/s", "pages/s", [pages / p for p in parses])
    section.add(
        "mb_s", f"{pages:,}-page pdf: MB/s ({len(data) / 1e6:.2f} MB)", "MB/s", [len(data) / 1e6 / w for w in walls]
    )
    section.add("chunks", f"{pages:,}-page pdf: chunks indexed", "chunks", [document.chunk_count])
    section.add(
        "unchanged_ms", f"{pages:,}-page pdf: re-ingest of the same version (skipped)", "ms", [s * 1000 for s in skips]
    )
    section.context.update({"bytes": len(data), "pages": document.page_count, "chunks": document.chunk_count})
    return section
