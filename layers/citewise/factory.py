"""Builds the adapters the settings ask for (local files or AWS services), each once per process, lazily.

The logic modules never choose adapters: they receive ports. This is the one place that maps
`CITEWISE_BACKEND`, `CITEWISE_EMBEDDER` and `CITEWISE_SYNTHESIZER` to classes, importing each AWS
adapter only when it is chosen so the local mode needs no AWS packages and a Lambda loads no numpy.
Each adapter is built on first use: a function builds only what its requests touch (the query function
never creates a DynamoDB or S3 client), and a cold start pays for no client it does not need.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
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


class Services:
    """The wired pipeline, what the CLI, the local server and the handlers call: each adapter is built on
    first use and kept. Adapters passed in are used as they are (a test's doubles)."""

    def __init__(self, settings: Settings, **adapters: object) -> None:
        self.settings = settings
        self.closers: list[Callable[[], None]] = []
        unknown = set(adapters) - _ADAPTERS
        if unknown:
            raise TypeError(f"no such adapter: {', '.join(sorted(unknown))}")
        self.__dict__.update(adapters)  # what `cached_property` would have built

    @cached_property
    def embedder(self) -> Embedder:
        return build_embedder(self.settings)

    @cached_property
    def index(self) -> VectorIndex:
        index = _index(self.settings, self.closers)
        if self.settings.backend == "local":
            # Cheap locally, and it makes a query against an index of another embedder fail loudly instead
            # of ranking by meaningless similarities. On AWS the deploy-time bootstrap owns this check.
            index.ensure(self.embedder.name, self.embedder.dimension)
        return index

    @cached_property
    def registry(self) -> DocumentRegistry:
        return _registry(self.settings, self.closers)

    @cached_property
    def blobs(self) -> BlobStore:
        return _blobs(self.settings)

    @cached_property
    def ingestor(self) -> Ingestor:
        settings = self.settings
        return Ingestor(
            self.index,
            self.registry,
            self.embedder,
            Chunker(settings.chunk_tokens, settings.chunk_overlap),
            limits=Limits(max_document_bytes=settings.max_document_bytes, max_pages=settings.max_pages),
            embed_batch_size=settings.embed_batch_size,
        )

    @cached_property
    def retriever(self) -> Retriever:
        settings = self.settings
        return Retriever(
            self.index,
            self.embedder,
            mode=settings.search_mode,
            rrf_k=settings.rrf_k,
            candidates=settings.candidates,
            keyword_weight=settings.keyword_weight,
            vector_weight=settings.vector_weight,
        )

    @cached_property
    def synthesizer(self) -> Synthesizer:
        return build_synthesizer(self.settings)

    def close(self) -> None:
        """Release what the adapters built so far hold open (the local database connections)."""
        for close in self.closers:
            close()


_ADAPTERS = frozenset({"embedder", "index", "registry", "blobs", "ingestor", "retriever", "synthesizer"})


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


def _index(settings: Settings, closers: list[Callable[[], None]]) -> VectorIndex:
    if settings.backend == "aws":
        from citewise import aws
        from citewise.index.opensearch import OpenSearchIndex, connect

        endpoint = _required(settings.opensearch_endpoint)
        client = connect(endpoint, settings.aws_region or aws.region(), settings.opensearch_service)
        return OpenSearchIndex(client, settings.index_name, serverless=settings.opensearch_service == "aoss")
    from citewise.index.local import LocalIndex

    index = LocalIndex(settings.home_dir / "index.db")
    closers.append(index.close)
    return index


def _registry(settings: Settings, closers: list[Callable[[], None]]) -> DocumentRegistry:
    if settings.backend == "aws":
        from citewise import aws
        from citewise.registry.dynamodb import DynamoRegistry

        return DynamoRegistry(
            _required(settings.registry_table), client=aws.client("dynamodb", region=settings.aws_region)
        )
    from citewise.registry.local import LocalRegistry

    registry = LocalRegistry(settings.home_dir / "registry.db")
    closers.append(registry.close)
    return registry


def _blobs(settings: Settings) -> BlobStore:
    if settings.backend == "aws":
        from citewise.blobstore.s3 import S3BlobStore, s3_client

        return S3BlobStore(
            _required(settings.documents_bucket),
            client=s3_client(settings.aws_region),
            max_bytes=settings.max_document_bytes,
            url_ttl=settings.upload_url_ttl,
        )
    return local_blob_store(settings)


def _required(value: str | None) -> str:
    if value is None:  # the settings validator refuses this already
        raise ValidationError("CITEWISE_BACKEND=aws needs the endpoint, table and bucket settings")
    return value


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
    """The pipeline for `settings.backend`, the embedded local stack or the AWS adapters, built on use."""
    return Services(settings)
