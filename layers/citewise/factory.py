"""Builds the set of adapters the settings ask for (local files or AWS services), once per process.

The logic modules never choose adapters: they receive ports. This is the one place that maps
`CITEWISE_BACKEND`, `CITEWISE_EMBEDDER` and `CITEWISE_SYNTHESIZER` to classes, importing each AWS
adapter only when it is chosen so the local mode needs no AWS packages and a Lambda loads no numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from citewise.blobstore.base import BlobStore
from citewise.chunking import Chunker
from citewise.config import Settings
from citewise.embeddings.base import Embedder
from citewise.embeddings.hashing import HashingEmbedder
from citewise.errors import ValidationError
from citewise.index.base import VectorIndex
from citewise.ingestion import Ingestor, Limits
from citewise.registry.base import DocumentRegistry
from citewise.retrieval import Retriever
from citewise.synthesis.base import Synthesizer
from citewise.synthesis.extractive import ExtractiveSynthesizer

if TYPE_CHECKING:
    from citewise.blobstore.local import LocalBlobStore


@dataclass(frozen=True)
class Services:
    """The wired pipeline: what the CLI, the local server and the handlers call."""

    settings: Settings
    index: VectorIndex
    registry: DocumentRegistry
    embedder: Embedder
    ingestor: Ingestor
    retriever: Retriever
    synthesizer: Synthesizer
    blobs: BlobStore
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        """Release what the adapters hold open (the local database connections)."""
        for close in self.closers:
            close()


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder; each model's module is imported only when chosen."""
    if settings.embedder == "hashing":
        return HashingEmbedder(settings.hashing_dimension)
    if settings.embedder == "minilm":
        from citewise.embeddings.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    from citewise.embeddings.bedrock import CohereEmbedder, TitanEmbedder

    if settings.embedder == "titan":
        return TitanEmbedder(dimension=settings.embedding_dimension, region=settings.aws_region)
    language = settings.embedder.removeprefix("cohere-")
    return CohereEmbedder(model_id=f"cohere.embed-{language}-v3", region=settings.aws_region)


def build_synthesizer(settings: Settings) -> Synthesizer:
    """The extractive synthesizer, or Bedrock Converse with the configured model and guardrail."""
    if settings.synthesizer == "extractive":
        return ExtractiveSynthesizer()
    from citewise.synthesis.bedrock import BedrockSynthesizer

    return BedrockSynthesizer(
        settings.generation_model_id,
        region=settings.aws_region,
        max_tokens=settings.generation_max_tokens,
        temperature=settings.generation_temperature,
        guardrail_identifier=settings.guardrail_id,
        guardrail_version=settings.guardrail_version,
    )


def _stores(settings: Settings) -> tuple[VectorIndex, DocumentRegistry, BlobStore, list[Callable[[], None]]]:
    if settings.backend == "aws":
        from citewise import aws
        from citewise.blobstore.s3 import S3BlobStore, s3_client
        from citewise.index.opensearch import OpenSearchIndex, connect
        from citewise.registry.dynamodb import DynamoRegistry

        endpoint, table, bucket = settings.opensearch_endpoint, settings.registry_table, settings.documents_bucket
        if endpoint is None or table is None or bucket is None:  # the settings validator refuses this already
            raise ValidationError("CITEWISE_BACKEND=aws needs the endpoint, table and bucket settings")
        client = connect(endpoint, settings.aws_region or aws.region(), settings.opensearch_service)
        index = OpenSearchIndex(client, settings.index_name, serverless=settings.opensearch_service == "aoss")
        registry = DynamoRegistry(table, client=aws.client("dynamodb", region=settings.aws_region))
        blobs = S3BlobStore(
            bucket,
            client=s3_client(settings.aws_region),
            max_bytes=settings.max_document_bytes,
            url_ttl=settings.upload_url_ttl,
        )
        return index, registry, blobs, []
    from citewise.index.local import LocalIndex
    from citewise.registry.local import LocalRegistry

    local_index = LocalIndex(settings.home_dir / "index.db")
    local_registry = LocalRegistry(settings.home_dir / "registry.db")
    local_blobs = local_blob_store(settings)
    return local_index, local_registry, local_blobs, [local_index.close, local_registry.close]


def local_blob_store(settings: Settings) -> LocalBlobStore:
    """The local blob store of `settings.home`, shared by the handlers and `citewise serve`.

    Its upload URLs point at `settings.public_url` and are signed with the home's persistent upload
    key, so a URL the documents handler issues is redeemable by the server, even after a restart.
    """
    from citewise.blobstore.local import LocalBlobStore
    from citewise.localauth import local_key

    return LocalBlobStore(
        settings.home_dir / "blobs",
        max_bytes=settings.max_document_bytes,
        url_ttl=settings.upload_url_ttl,
        base_url=settings.public_url,
        secret=local_key(settings.home_dir, "uploads"),
    )


def build_services(settings: Settings) -> Services:
    """The pipeline for `settings.backend`: the embedded local stack, or the AWS adapters."""
    embedder = build_embedder(settings)
    index, registry, blobs, closers = _stores(settings)
    if settings.backend == "local":
        # Cheap locally, and it makes a query against an index of another embedder fail loudly instead
        # of ranking by meaningless similarities. On AWS the deploy-time bootstrap owns this check.
        index.ensure(embedder.name, embedder.dimension)
    ingestor = Ingestor(
        index,
        registry,
        embedder,
        Chunker(settings.chunk_tokens, settings.chunk_overlap),
        limits=Limits(max_document_bytes=settings.max_document_bytes, max_pages=settings.max_pages),
        embed_batch_size=settings.embed_batch_size,
    )
    retriever = Retriever(
        index,
        embedder,
        mode=settings.search_mode,
        rrf_k=settings.rrf_k,
        candidates=settings.candidates,
        keyword_weight=settings.keyword_weight,
        vector_weight=settings.vector_weight,
    )
    return Services(
        settings, index, registry, embedder, ingestor, retriever, build_synthesizer(settings), blobs, closers
    )
