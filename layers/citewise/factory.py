"""Builds the set of adapters the settings ask for, once per process."""

from __future__ import annotations

from dataclasses import dataclass

from citewise.chunking import Chunker
from citewise.config import Settings
from citewise.embeddings.base import Embedder
from citewise.embeddings.hashing import HashingEmbedder
from citewise.index.local import LocalIndex
from citewise.ingestion import Ingestor, Limits
from citewise.registry.local import LocalRegistry
from citewise.retrieval import Retriever
from citewise.synthesis.extractive import ExtractiveSynthesizer


@dataclass(frozen=True)
class Services:
    """The wired pipeline: what the CLI, the local server and the handlers call."""

    settings: Settings
    index: LocalIndex
    registry: LocalRegistry
    embedder: Embedder
    ingestor: Ingestor
    retriever: Retriever
    synthesizer: ExtractiveSynthesizer

    def close(self) -> None:
        """Release the database connections."""
        self.index.close()
        self.registry.close()


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder; the MiniLM model is imported only when chosen (it pulls numpy models)."""
    if settings.embedder == "hashing":
        return HashingEmbedder(settings.hashing_dimension)
    from citewise.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


def build_local(settings: Settings) -> Services:
    """The embedded local stack under `settings.home`: one index file and one registry file."""
    home = settings.home_dir
    embedder = build_embedder(settings)
    index = LocalIndex(home / "index.db")
    registry = LocalRegistry(home / "registry.db")
    ingestor = Ingestor(
        index,
        registry,
        embedder,
        Chunker(settings.chunk_tokens, settings.chunk_overlap),
        limits=Limits(max_document_bytes=settings.max_document_bytes, max_pages=settings.max_pages),
        embed_batch_size=settings.embed_batch_size,
    )
    retriever = Retriever(
        index, embedder, mode=settings.search_mode, rrf_k=settings.rrf_k, candidates=settings.candidates
    )
    return Services(settings, index, registry, embedder, ingestor, retriever, ExtractiveSynthesizer())
