"""Ingest throughput: parse + chunk + embed, per format, without the index and registry.

The same steps as `citewise.ingest.pipeline.Ingestor` (parse, `Chunker.split`, `embedding_text`, embedding in
batches of `embed_batch_size`), timed stage by stage. With the hashing embedder the embedding costs
little, so the figures show what our own parsing and chunking cost; the same pipeline with the local
MiniLM model, on smaller inputs, shows what a real model adds.

Pages are PDF pages; for Markdown and HTML they are page equivalents: parsed characters divided by the
PDF's parsed characters per page, so the three formats share one unit.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks import inputs
from benchmarks.common import Section, log, timed
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.errors import EmbeddingServiceError
from citewise.domain.textutil import embedding_text
from citewise.ingest.chunking import Chunker
from citewise.ingest.parsing import parse
from citewise.ports.embedder import Embedder
from citewise.runtime.settings import Settings

EMBED_BATCH = int(Settings.model_fields["embed_batch_size"].default)
KINDS = ("pdf", "md", "html")  # pdf first: its characters per page define the others' pages
SMALL_PDF_PAGES = 10


@dataclass(frozen=True)
class Stages:
    """One pass of the pipeline over one input."""

    parse_s: float
    chunk_s: float
    embed_s: float
    chunks: int
    characters: int
    pages: int | None

    @property
    def total_s(self) -> float:
        return self.parse_s + self.chunk_s + self.embed_s


def pipeline(data: bytes, filename: str, embedder: Embedder) -> Stages:
    """Parse, chunk and embed `data` as the ingestor does, timing each stage."""
    parsed, parse_s = timed(lambda: parse(data, filename))
    chunks, chunk_s = timed(lambda: Chunker().split(parsed, inputs.metadata(filename, parsed.title)))

    def embed() -> None:
        for start in range(0, len(chunks), EMBED_BATCH):
            batch = chunks[start : start + EMBED_BATCH]
            embedder.embed_documents([embedding_text(c.document.title, c.heading_path, c.text) for c in batch])

    _, embed_s = timed(embed)
    return Stages(parse_s, chunk_s, embed_s, len(chunks), len(parsed.text), parsed.page_count)


def small_sample(kind: str) -> tuple[bytes, str]:
    """One copy of the corpus file(s) of a kind, or a 10-page PDF: inputs a real model gets through quickly."""
    if kind == "md":
        return inputs.markdown(copies=1), "corpus.md"
    if kind == "html":
        return inputs.html(copies=1), "corpus.html"
    return inputs.handbook_pdf(SMALL_PDF_PAGES), "handbook.pdf"


def run(repeats: int = 5, pdf_repeats: int = 3, model_repeats: int = 3) -> Section:
    """Hashing embedder on ~1 MB md/html and the 1,000-page PDF; MiniLM on one corpus copy and 10 pages."""
    section = Section("ingest_throughput", "Ingest throughput: parse + chunk + embed (no index)")
    hashing = HashingEmbedder()
    samples = {kind: inputs.sample(kind) for kind in KINDS}
    runs: dict[str, list[Stages]] = {kind: [] for kind in KINDS}
    for repetition in range(max(repeats, pdf_repeats)):
        for kind in KINDS:
            if repetition < (pdf_repeats if kind == "pdf" else repeats):
                log(f"  ingest throughput: {kind}, hashing, run {repetition + 1}")
                runs[kind].append(pipeline(*samples[kind], hashing))
    chars_per_page = runs["pdf"][0].characters / (runs["pdf"][0].pages or 1)
    section.context["chars_per_page"] = round(chars_per_page)
    for kind in KINDS:
        _add(section, kind, "hashing", len(samples[kind][0]), runs[kind], chars_per_page)
    _minilm(section, model_repeats, chars_per_page)
    return section


def _minilm(section: Section, repeats: int, chars_per_page: float) -> None:
    from citewise_local.minilm import MiniLMEmbedder, find_model_dir

    try:
        find_model_dir()
    except EmbeddingServiceError as exc:  # the model wheel is missing: say so instead of failing the run
        section.context["minilm"] = f"not measured: {exc.message}"
        return
    samples = {kind: small_sample(kind) for kind in KINDS}
    runs: dict[str, list[Stages]] = {kind: [] for kind in KINDS}
    loads: list[float] = []
    for repetition in range(repeats):
        model = MiniLMEmbedder()
        # The weights load on first use (~90 MB): time that apart, then every format sees a warm model.
        _, load_s = timed(functools.partial(model.embed_query, "warm up"))
        loads.append(load_s)
        for kind in KINDS:
            log(f"  ingest throughput: {kind}, minilm, run {repetition + 1}")
            runs[kind].append(pipeline(*samples[kind], model))
    for kind in KINDS:
        _add(section, kind, "minilm", len(samples[kind][0]), runs[kind], chars_per_page)
    section.add("minilm_load_s", "MiniLM: load weights + first query (per process)", "s", loads)


def _add(section: Section, kind: str, embedder: str, size: int, runs: Sequence[Stages], chars_per_page: float) -> None:
    pages = [r.pages if r.pages is not None else r.characters / chars_per_page for r in runs]
    prefix = f"{kind} {embedder}"
    section.add(
        f"{kind}_{embedder}_mb_s",
        f"{prefix}: MB/s ({size / 1e6:.3f} MB)",
        "MB/s",
        [size / 1e6 / r.total_s for r in runs],
    )
    section.add(
        f"{kind}_{embedder}_pages_s",
        f"{prefix}: pages/s" if kind == "pdf" else f"{prefix}: page equivalents/s",
        "pages/s",
        [p / r.total_s for p, r in zip(pages, runs, strict=True)],
    )
    section.add(
        f"{kind}_{embedder}_chunks_s",
        f"{prefix}: chunks/s ({runs[0].chunks} chunks)",
        "chunks/s",
        [r.chunks / r.total_s for r in runs],
    )
    for stage in ("parse", "chunk", "embed"):
        section.add(
            f"{kind}_{embedder}_{stage}_share",
            f"{prefix}: {stage} share of the time",
            "%",
            [100 * getattr(r, f"{stage}_s") / r.total_s for r in runs],
        )
    section.context[f"{kind}_{embedder}"] = {
        "bytes": size,
        "chunks": runs[0].chunks,
        "parsed_characters": runs[0].characters,
        "pages": round(pages[0], 1),
        "pages_are": "pdf pages" if kind == "pdf" else f"page equivalents of {round(chars_per_page)} parsed characters",
    }
