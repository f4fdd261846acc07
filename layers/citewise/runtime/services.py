"""Builds the adapters the settings ask for (AWS services, or a backend installed beside the library),
each once per process, lazily.

The logic modules never choose adapters: they receive ports. This is the one place that maps
`CITEWISE_BACKEND`, `CITEWISE_EMBEDDER` and `CITEWISE_SYNTHESIZER` (with `CITEWISE_GENERATION_FALLBACK`)
to classes, importing each AWS adapter only when it is chosen so a Lambda loads no client it does not
use. Each adapter is built on first use: a function builds only what its requests touch (the query
function never creates an S3 client), and a cold start pays for no client it does not need.

The library ships the AWS backend and the embedders and synthesizers Lambda runs. Any other backend,
embedder or synthesizer (the local platform's folder, SQLite and MiniLM adapters, its OpenAI-compatible
chat endpoint) is found through a Python entry point, in the groups `citewise.backends`,
`citewise.embedders` and `citewise.synthesizers`, registered by the package that provides it. So the
library never imports that package, the Lambda layer does not contain it, and on Lambda
`CITEWISE_BACKEND=local` fails at cold start saying what is missing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from functools import cached_property
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, cast

from citewise.domain import deadline
from citewise.domain.errors import ValidationError
from citewise.domain.provenance import ProvenanceKeys
from citewise.domain.sources import RefreshSummary
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports.audit import AuditLog, Auditor
from citewise.ports.credentials import CredentialIssuer, CredentialStore, TenantCredentials
from citewise.ports.embedder import Embedder
from citewise.ports.erasure import (
    Erasure,
    ErasureLog,
    ErasureQueue,
    TenantErasingError,
    TenantStore,
    check_not_erasing,
    erased_stores,
    kept_stores,
    run_erasure,
)
from citewise.ports.index import VectorIndex
from citewise.ports.quotas import QuotaGate, RateLimiter
from citewise.ports.registry import DocumentRegistry
from citewise.ports.reranker import Reranker
from citewise.ports.rewriter import Rewriter
from citewise.ports.router import Router
from citewise.ports.synthesizer import Synthesizer
from citewise.ports.usage import Meter, UsageMeter
from citewise.runtime.settings import Settings

if TYPE_CHECKING:
    # Imported where they are built: the ingest function never loads the query side, nor the API
    # functions the ingest pipeline (`Services.ingestor`, `Services.retriever`); the query function
    # never loads the blob store's rules (sidecars, object metadata).
    from citewise.aws.tenant_keys import TenantKeys
    from citewise.builtin.web_fetch import WebPageFetcher
    from citewise.ingest.pipeline import Ingestor
    from citewise.ingest.sources import DocumentWriter, Refresher
    from citewise.ports.blobstore import BlobStore
    from citewise.ports.conversations import ConversationStore
    from citewise.ports.feedback import FeedbackStore, SourceTally
    from citewise.ports.requeue import IngestQueue
    from citewise.ports.sources import RefreshQueue, SourceRegistry
    from citewise.ports.web import PageFetcher
    from citewise.query.conversations import Conversations
    from citewise.query.feedback import FeedbackService
    from citewise.query.ranking import FeedbackPrior
    from citewise.query.retrieval import Retriever
    from citewise.runtime.identity import CredentialCache

logger = logging.getLogger(__name__)
BACKENDS_GROUP = "citewise.backends"
EMBEDDERS_GROUP = "citewise.embedders"
SYNTHESIZERS_GROUP = "citewise.synthesizers"
REWRITERS_GROUP = "citewise.rewriters"


class Backend(Protocol):
    """The storage adapters of one backend for one `Settings`, each built when first asked for.

    A backend the library does not ship registers a callable `(Settings) -> Backend` in the entry-point
    group `citewise.backends` under its `CITEWISE_BACKEND` name.
    """

    def index(self) -> VectorIndex: ...

    def registry(self) -> DocumentRegistry: ...

    def blobs(self) -> BlobStore: ...

    def usage(self) -> UsageMeter: ...

    def erasures(self) -> ErasureLog: ...

    def erasure_queue(self, run: Callable[[str], object]) -> ErasureQueue:
        """Where a started erasure goes to run; `run(tenant_id)` runs it here and now (a backend without
        a queue calls it in place)."""
        ...

    def rates(self) -> RateLimiter: ...

    def audit(self) -> AuditLog: ...

    def audit_key(self) -> bytes:
        """The key of the questions' hashes when the settings give none (`citewise.ports.audit`)."""
        ...

    def credentials(self) -> CredentialStore: ...

    def credential_issuer(self) -> CredentialIssuer: ...

    def conversations(self) -> ConversationStore: ...

    def sources(self) -> SourceRegistry: ...

    def refresh_queue(self) -> RefreshQueue: ...
    def feedback(self) -> FeedbackStore: ...

    def close(self) -> None:
        """Release what the adapters built so far hold open (database connections)."""
        ...


class Services:
    """The wired pipeline, what the CLI, the local server and the handlers call: each adapter is built on
    first use and kept. Adapters passed in are used as they are (a test's doubles)."""

    def __init__(self, settings: Settings, **adapters: object) -> None:
        self.settings = settings
        unknown = set(adapters) - _ADAPTERS
        if unknown:
            raise TypeError(f"no such adapter: {', '.join(sorted(unknown))}")
        self.__dict__.update(adapters)  # what `cached_property` would have built
        # Found now, not on first use: an adapter that is not installed fails the cold start.
        self._backend = backend_for(settings)
        self.closers: list[Callable[[], None]] = [self._backend.close]
        """What `close` calls, in order."""
        if "embedder" not in adapters:
            self._embedder_factory = embedder_factory(settings)
        if "synthesizer" not in adapters:
            check_synthesizer(settings)
            self._synthesizer_factory = synthesizer_factory(settings, lambda: self.embedder)

    @cached_property
    def embedder(self) -> Embedder:
        return self._embedder_factory()

    @cached_property
    def index(self) -> VectorIndex:
        index = self._backend.index()
        if self.settings.backend != "aws":
            # Cheap on an embedded index, and it makes a query against an index of another embedder fail
            # loudly instead of ranking by meaningless similarities. On AWS the deploy-time bootstrap owns
            # this check.
            index.ensure(self.embedder.name, self.embedder.dimension)
        return index

    @cached_property
    def registry(self) -> DocumentRegistry:
        return self._backend.registry()

    @cached_property
    def blobs(self) -> BlobStore:
        return self._backend.blobs()

    @cached_property
    def usage(self) -> UsageMeter:
        return self._backend.usage()

    @cached_property
    def credentials(self) -> CredentialStore:
        return self._backend.credentials()

    @cached_property
    def credential_issuer(self) -> CredentialIssuer:
        return self._backend.credential_issuer()

    @cached_property
    def credential_lookup(self) -> CredentialCache:
        """A credential's record by id, kept `credential_cache_ttl` seconds (`citewise.runtime.identity`)."""
        from citewise.runtime.identity import CredentialCache

        return CredentialCache(
            lambda credential_id: self.credentials.credential(credential_id), ttl=self.settings.credential_cache_ttl
        )

    @cached_property
    def erasures(self) -> ErasureLog:
        return self._backend.erasures()

    @cached_property
    def erasure_queue(self) -> ErasureQueue:
        return self._backend.erasure_queue(self.run_erasure)

    def erased_stores(self) -> dict[str, TenantStore]:
        """The stores an erasure empties (`citewise.ports.erasure.erased_stores`)."""
        credentials = TenantCredentials(self.credentials, lambda: self.credential_issuer)
        return erased_stores(
            credentials=credentials,
            registry=self.registry,
            index=self.index,
            blobs=self.blobs,
            rates=self.rates,
            conversations=self.conversation_store,
            sources=self.sources,
            feedback=self.feedback_store,
        )

    def run_erasure(self, tenant_id: str) -> Erasure:
        """Continue the tenant's erasure within the invocation's time budget (unbounded outside one)."""
        return run_erasure(
            self.erasures,
            tenant_id,
            self.erased_stores(),
            kept_stores(usage=self.usage),
            time_left=deadline.remaining,
            limit=self.settings.erasure_batch,
        )

    def check_not_erasing(self, tenant_id: str) -> None:
        """Refuse the tenant's request while its erasure runs (TenantErasingError): one point read of its
        erasure record. Skipped where the function has no registry table (the record lives there).

        A record that cannot be read lets the request through (logged): the refusal spares the tenant's
        users a half-erased view and keeps uploads out of the way, but what proves the erasure is the
        job's final count, which finds anything written meanwhile and erases it too. Failing every
        request of every tenant whenever the read fails would turn a hiccup into an outage.
        """
        if self.settings.backend == "aws" and not self.settings.registry_table:
            return
        try:
            check_not_erasing(self.erasures, tenant_id)
        except TenantErasingError:
            raise
        except Exception:  # noqa: BLE001 - see the docstring
            logger.warning("could not read the erasure record of tenant %s", tenant_id, exc_info=True)

    @cached_property
    def meter(self) -> Meter:
        """Records the usage of the work done (`citewise.ports.usage.Meter`: never fails that work); records
        nothing where the function has no registry table (on AWS the counters live there)."""
        if self.settings.backend == "aws" and not self.settings.registry_table:
            return Meter(None)
        return Meter(lambda: self.usage)

    @cached_property
    def rates(self) -> RateLimiter:
        return self._backend.rates()

    @cached_property
    def quotas(self) -> QuotaGate:
        """The tenants' quota checks (`citewise.ports.quotas.QuotaGate`): the settings' defaults and each
        tenant's overrides from the registry. Where the function has no registry table (on AWS every store
        of quotas and counters is there) every tenant has the defaults and nothing is counted or checked."""
        settings = self.settings
        if settings.backend == "aws" and not settings.registry_table:
            return QuotaGate(settings.default_quotas(), lambda _: None)
        return QuotaGate(
            settings.default_quotas(),
            lambda tenant_id: self.registry.tenant_quotas(tenant_id),
            totals=lambda tenant_id: self.registry.stored_totals(tenant_id),
            usage=lambda: self.usage,
            rates=lambda: self.rates,
            ttl=settings.quota_ttl,
        )

    @cached_property
    def audit_log(self) -> AuditLog:
        return self._backend.audit()

    @cached_property
    def auditor(self) -> Auditor:
        """Writes the audit trail (`citewise.ports.audit.Auditor`: never fails the access it records, counts
        and logs what it could not write); records nothing on AWS without a trail's log group."""
        settings = self.settings
        if settings.backend == "aws" and not settings.audit_log_group:
            return Auditor(None)
        secret = settings.audit_hash_key
        return Auditor(
            lambda: self.audit_log,
            key=(lambda: secret.get_secret_value().encode()) if secret else self._backend.audit_key,
            questions=settings.audit_questions,
            on_failure=_count_audit_failure,
        )

    @cached_property
    def ingestor(self) -> Ingestor:
        from citewise.ingest.chunking import Chunker
        from citewise.ingest.parsing import BLOCKS_PER_CHUNK, ParseLimits
        from citewise.ingest.pipeline import Ingestor, Limits

        settings = self.settings
        return Ingestor(
            self.index,
            self.registry,
            self.embedder,
            Chunker(settings.chunk_tokens, settings.chunk_overlap, settings.chunk_chars),
            limits=Limits(
                max_document_bytes=settings.max_document_bytes,
                parse=ParseLimits(
                    max_pages=settings.max_pages,
                    max_expansion=settings.max_expansion,
                    max_seconds=settings.max_parse_seconds,
                    max_blocks=BLOCKS_PER_CHUNK * settings.max_chunks,
                ),
                max_chunks=settings.max_chunks,
            ),
            embed_batch_size=settings.embed_batch_size,
            provenance_keys=ProvenanceKeys(source=settings.source_key, date=settings.source_date_key),
            meter=self.meter,
            quotas=self.quotas,
        )

    @cached_property
    def ingest_queue(self) -> IngestQueue:
        """Where the operator's re-queue sends quota-refused documents: the ingest queue on AWS, the
        pipeline itself locally."""
        if self.settings.backend == "aws":
            from citewise.aws import clients as aws
            from citewise.aws.sqs_requeue import SqsIngestQueue

            settings = self.settings
            if settings.ingest_queue_url is None or settings.documents_bucket is None:
                raise ValidationError("re-queueing needs CITEWISE_INGEST_QUEUE_URL and CITEWISE_DOCUMENTS_BUCKET")
            client = aws.client("sqs", region=settings.aws_region)
            return SqsIngestQueue(settings.ingest_queue_url, settings.documents_bucket, client=client)
        from citewise.ingest.requeue import DirectIngestQueue

        return DirectIngestQueue(self.ingestor, self.blobs)

    @cached_property
    def retriever(self) -> Retriever:
        from citewise.query.ranking import Signals
        from citewise.query.retrieval import Retriever, RoutingOptions
        from citewise.query.tenant_config import TenantSettingsCache

        settings = self.settings
        return Retriever(
            self.index,
            self.embedder,
            mode=settings.search_mode,
            rrf_k=settings.rrf_k,
            candidates=settings.candidates,
            keyword_weight=settings.keyword_weight,
            vector_weight=settings.vector_weight,
            fusion=settings.fusion_method,
            routing=RoutingOptions(
                router=build_router(settings) if settings.route else None,
                time_zone=settings.routing_time_zone,
                id_patterns=tuple(settings.routing_id_patterns),
                aliases=settings.routing_aliases,
            ),
            signals=Signals(
                freshness_weight=settings.ranking_freshness_weight,
                half_life_days=settings.ranking_half_life_days,
                credibility_weight=settings.ranking_credibility_weight,
                feedback_weight=settings.ranking_feedback_weight,
                feedback_prior=self.feedback_prior,
            ),
            tenant_settings=TenantSettingsCache(self._tenant_settings, ttl=settings.tenant_settings_ttl),
            feedback_tallies=TenantSettingsCache(self._feedback_tallies, ttl=settings.tenant_settings_ttl),
            reranker=build_reranker(settings),
            rerank_candidates=settings.rerank_candidates,
        )

    def _tenant_settings(self, tenant_id: str) -> TenantSettings | None:
        """The tenant's settings document from the registry; None where the function has no registry (a
        query function deployed without `CITEWISE_REGISTRY_TABLE`: the deployment's defaults apply)."""
        if self.settings.backend == "aws" and not self.settings.registry_table:
            return None
        return self.registry.tenant_settings(tenant_id)

    def _feedback_tallies(self, tenant_id: str) -> dict[str, SourceTally] | None:
        """The tenant's feedback per source; None where the function has no registry (as `_tenant_settings`)."""
        if self.settings.backend == "aws" and not self.settings.registry_table:
            return None
        return self.feedback_store.tallies(tenant_id)

    @cached_property
    def feedback_prior(self) -> FeedbackPrior:
        from citewise.query.ranking import FeedbackPrior

        settings = self.settings
        return FeedbackPrior(
            prior_votes=settings.ranking_feedback_prior_votes, min_votes=settings.ranking_feedback_min_votes
        )

    @cached_property
    def feedback_store(self) -> FeedbackStore:
        return self._backend.feedback()

    @cached_property
    def feedback(self) -> FeedbackService:
        """Feedback on the callers' answers and the sources' stats (`citewise.query.feedback`)."""
        from citewise.query.feedback import FeedbackService

        return FeedbackService(
            self.feedback_store, self.conversation_store, lambda: self.retriever, self.feedback_prior
        )

    @cached_property
    def synthesizer(self) -> Synthesizer:
        return self._synthesizer_factory()

    @cached_property
    def conversation_store(self) -> ConversationStore:
        return self._backend.conversations()

    @cached_property
    def rewriter(self) -> Rewriter:
        return build_rewriter(self.settings)

    @cached_property
    def conversations(self) -> Conversations:
        """The callers' conversations (`citewise.query.conversations`): turns kept in the registry (a SQLite
        file locally) for `conversation_ttl_days`, follow-ups rewritten by `rewriter`."""
        from citewise.ports.rewriter import HistoryBudget
        from citewise.query.conversations import Conversations

        settings = self.settings
        return Conversations(
            self.conversation_store,
            self.rewriter,
            ttl=timedelta(days=settings.conversation_ttl_days),
            budget=HistoryBudget(turns=settings.conversation_history_turns, chars=settings.conversation_history_chars),
        )

    @cached_property
    def sources(self) -> SourceRegistry:
        """The tenants' web sources and their pages' states (`citewise.ports.sources`)."""
        return self._backend.sources()

    @cached_property
    def refresh_queue(self) -> RefreshQueue:
        """Where a source's refresh goes to run: the refresh function's queue on AWS, `citewise serve`'s
        refresh loop locally."""
        return self._backend.refresh_queue()

    @cached_property
    def page_fetcher(self) -> PageFetcher:
        """The web fetcher (`citewise.builtin.web_fetch`, docs/web-fetch.md), closed with the services: its
        connection pools and the robots.txt it read are kept for every refresh of this process."""
        fetcher = page_fetcher(self.settings)
        self.closers.append(fetcher.close)
        return fetcher

    @cached_property
    def document_writer(self) -> DocumentWriter:
        """Where a refreshed page's document goes: the bucket on AWS (its notifications ingest it, as an
        upload), and locally the blob store and then the pipeline, as no notification follows a write."""
        from citewise.ingest.sources import BlobWriter, IngestingWriter

        if self.settings.backend == "aws":
            return BlobWriter(self.blobs)
        return IngestingWriter(self.blobs, self.ingestor)

    def refresher(self, progress: Callable[[RefreshSummary], None] | None = None) -> Refresher:
        """The refresh of web sources (`citewise.ingest.sources.Refresher`), reporting to `progress`."""
        from citewise.ingest.sources import Refresher

        return Refresher(
            self.sources,
            self.page_fetcher,
            self.document_writer,
            source_key=self.settings.source_key,
            source_date_key=self.settings.source_date_key,
            progress=progress or (lambda _: None),
        )

    def close(self) -> None:
        """Release what the adapters built so far hold open (the local database connections)."""
        for close in self.closers:
            close()


_ADAPTERS = frozenset(
    {
        "embedder",
        "index",
        "registry",
        "blobs",
        "usage",
        "erasures",
        "erasure_queue",
        "meter",
        "rates",
        "quotas",
        "ingest_queue",
        "audit_log",
        "auditor",
        "ingestor",
        "retriever",
        "synthesizer",
        "credentials",
        "credential_issuer",
        "conversation_store",
        "rewriter",
        "conversations",
        "sources",
        "refresh_queue",
        "page_fetcher",
        "document_writer",
        "feedback_store",
        "feedback",
    }
)


def _count_audit_failure() -> None:
    """Count an audit record that could not be written as the metric `AuditWriteFailures` (an alarm
    watches it). Imported here: the CLI, which audits too, loads Powertools' metrics only on a failure."""
    from aws_lambda_powertools.metrics import MetricUnit

    from citewise.runtime.observability import metrics

    metrics.add_metric(name="AuditWriteFailures", unit=MetricUnit.Count, value=1)


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder."""
    return embedder_factory(settings)()


def embedder_factory(settings: Settings) -> Callable[[], Embedder]:
    """What builds the configured embedder: the library's own, or a callable `(Settings) -> Embedder`
    registered in the entry-point group `citewise.embedders` under its `CITEWISE_EMBEDDER` name.

    Each model's module is imported only when it is built.
    """
    if settings.embedder == "hashing":
        return lambda: _hashing_embedder(settings)
    if settings.embedder in ("titan", "cohere-english", "cohere-multilingual"):
        return lambda: _bedrock_embedder(settings)
    make = cast(Callable[[Settings], Embedder], _plugin(EMBEDDERS_GROUP, settings.embedder, "CITEWISE_EMBEDDER"))
    return lambda: make(settings)


def _hashing_embedder(settings: Settings) -> Embedder:
    from citewise.builtin.hashing import HashingEmbedder

    return HashingEmbedder(settings.hashing_dimension)


def _bedrock_embedder(settings: Settings) -> Embedder:
    from citewise.aws.bedrock_embeddings import CohereEmbedder, TitanEmbedder

    if settings.embedder == "titan":
        return TitanEmbedder(dimension=settings.embedding_dimension, region=settings.aws_region)
    language = settings.embedder.removeprefix("cohere-")
    return CohereEmbedder(model_id=f"cohere.embed-{language}-v3", region=settings.aws_region)


def build_synthesizer(settings: Settings) -> Synthesizer:
    """The configured synthesizer."""
    return synthesizer_factory(settings, embedder_factory(settings))()


def synthesizer_factory(settings: Settings, embedder: Callable[[], Embedder]) -> Callable[[], Synthesizer]:
    """What builds the configured synthesizer: the extractive one, Bedrock Converse, or a callable
    `(Settings) -> Synthesizer` registered in the entry-point group `citewise.synthesizers` under its
    `CITEWISE_SYNTHESIZER` name; wrapped in the extractive fallback when `CITEWISE_GENERATION_FALLBACK`
    asks for it. The extractive one reads passages with `embedder` (the one retrieval uses).
    """
    if settings.synthesizer == "extractive":
        return lambda: _extractive_synthesizer(embedder())
    if settings.synthesizer == "bedrock":
        make: Callable[[Settings], Synthesizer] = _bedrock_synthesizer
    else:
        make = cast(
            Callable[[Settings], Synthesizer], _plugin(SYNTHESIZERS_GROUP, settings.synthesizer, "CITEWISE_SYNTHESIZER")
        )
    if settings.generation_fallback == "extractive":
        from citewise.query.fallback import FallbackSynthesizer

        return lambda: FallbackSynthesizer(make(settings), _extractive_synthesizer(embedder()))
    return lambda: make(settings)


def _extractive_synthesizer(embedder: Embedder) -> Synthesizer:
    from citewise.builtin.extractive import ExtractiveSynthesizer

    return ExtractiveSynthesizer(embedder)


def _bedrock_synthesizer(settings: Settings) -> Synthesizer:
    from citewise.aws.bedrock_synthesis import BedrockSynthesizer

    return BedrockSynthesizer(
        settings.generation_model_id,
        region=settings.aws_region,
        max_tokens=settings.generation_max_tokens,
        temperature=settings.generation_temperature,
        guardrail_identifier=settings.guardrail_id,
        guardrail_version=settings.guardrail_version,
    )


def check_synthesizer(settings: Settings) -> None:
    """Refuse, at cold start, a Bedrock generation model lacking a Converse feature the configuration
    needs (`citewise.aws.bedrock_models`): every question would fail otherwise."""
    if settings.synthesizer == "bedrock":
        from citewise.aws import bedrock_models

        bedrock_models.require(settings.generation_model_id, guardrail=settings.guardrail_id is not None)


def build_rewriter(settings: Settings) -> Rewriter:
    """The configured follow-up rewriter (`citewise.ports.rewriter`). `auto` rewrites with the synthesizer's
    model when it is one (Bedrock, or the OpenAI-compatible endpoint), and deterministically otherwise. The
    OpenAI-compatible one is registered in the entry-point group `citewise.rewriters` by the local package."""
    name = settings.rewriter
    if name == "auto":
        name = "deterministic" if settings.synthesizer == "extractive" else settings.synthesizer
    if name == "deterministic":
        from citewise.builtin.rewriter import DeterministicRewriter

        return DeterministicRewriter()
    if name == "bedrock":
        from citewise.aws.bedrock_rewriter import BedrockRewriter

        return BedrockRewriter(
            settings.generation_model_id, timeout=settings.rewrite_timeout, region=settings.aws_region
        )
    make = cast(Callable[[Settings], Rewriter], _plugin(REWRITERS_GROUP, name, "CITEWISE_REWRITER"))
    return make(settings)


def build_router(settings: Settings) -> Router:
    """The configured router: the deterministic one, or the Bedrock LLM router with it as the fallback
    (its module and client are loaded only when chosen, the client on the first routed question)."""
    from citewise.query.routing import DeterministicRouter

    if settings.router == "deterministic":
        return DeterministicRouter()
    from citewise.aws.bedrock_router import BedrockRouter

    return BedrockRouter(
        settings.router_model_id or settings.generation_model_id,
        fallback=DeterministicRouter(),
        region=settings.aws_region,
    )


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None (the default: reranking is opt-in, a reranker without model access
    would cost every query a failed call). Its module is loaded only when chosen, its client on the first
    reranked query."""
    if settings.reranker == "none":
        return None
    from citewise.aws.bedrock_rerank import BedrockReranker

    return BedrockReranker(
        settings.rerank_model_id,
        region=settings.rerank_region or settings.aws_region,
        read_timeout=settings.rerank_timeout,
    )


def backend_for(settings: Settings) -> Backend:
    """The adapters of `settings.backend`: the AWS services, or a backend registered in `citewise.backends`."""
    if settings.backend == "aws":
        return AwsBackend(settings)
    make = cast(Callable[[Settings], Backend], _plugin(BACKENDS_GROUP, settings.backend, "CITEWISE_BACKEND"))
    return make(settings)


def _plugin(group: str, name: str, variable: str) -> object:
    """The object registered as `name` in the entry-point `group`; a clear error when none is installed."""
    found = entry_points(group=group, name=name)
    if not found:
        raise ValidationError(
            f"{variable}={name} is not installed here: it comes with the citewise_local package "
            "(pip install 'citewise[local]'), which the Lambda layer does not ship"
        )
    (entry,) = found  # one distribution provides each name
    loaded: object = entry.load()
    return loaded


class AwsBackend:
    """The managed services: OpenSearch (or S3 Vectors), DynamoDB and S3, from the settings of a deployed
    function."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def index(self) -> VectorIndex:
        from citewise.aws import clients as aws

        settings = self._settings
        if settings.vector_bucket is not None:
            from citewise.aws.s3vectors import S3VectorsIndex

            bucket = settings.vector_bucket
            own = aws.client("s3vectors", region=settings.aws_region)
            return S3VectorsIndex(
                own, bucket, reader=s3vectors_reader(settings, bucket), keys=s3vectors_tenant_keys(settings)
            )
        from citewise.aws.opensearch import OpenSearchIndex, connect

        endpoint = _required(settings.opensearch_endpoint)
        client = connect(endpoint, settings.aws_region or aws.region(), settings.opensearch_service)
        sweeps = None
        if settings.sweep_queue_url is not None:
            from citewise.aws.sqs_sweeps import SqsSweepScheduler

            sweeps = SqsSweepScheduler(settings.sweep_queue_url, client=aws.client("sqs", region=settings.aws_region))
        return OpenSearchIndex(
            client,
            settings.index_name,
            serverless=settings.opensearch_service == "aoss",
            sweeps=sweeps,
            replicas=settings.index_replicas,
        )

    @cached_property
    def _dynamodb(self) -> Any:
        """One DynamoDB client for the registry and the erasure log (a client costs a cold start ~tens of ms)."""
        from citewise.aws import clients as aws

        return aws.client("dynamodb", region=self._settings.aws_region)

    def registry(self) -> DocumentRegistry:
        from citewise.aws.dynamodb import DynamoRegistry

        settings = self._settings
        return DynamoRegistry(
            _required(settings.registry_table),
            client=self._dynamodb,
            tombstone_retention=timedelta(days=settings.tombstone_retention_days),
        )

    def usage(self) -> UsageMeter:
        from citewise.aws import clients as aws
        from citewise.aws.dynamodb_usage import DynamoUsage

        settings = self._settings
        # A client of its own, with one retry and a short read timeout: a query waits for its metering
        # write, so a slow table may cost an answer at most a few seconds (the Meter logs the failure).
        client = aws.client("dynamodb", region=settings.aws_region, max_attempts=2, read_timeout=2)
        return DynamoUsage(_required(settings.registry_table), client=client)

    def erasures(self) -> ErasureLog:
        from citewise.aws.dynamodb_erasure import DynamoErasureLog

        return DynamoErasureLog(_required(self._settings.registry_table), client=self._dynamodb)

    def erasure_queue(self, run: Callable[[str], object]) -> ErasureQueue:
        """The erasure function's queue (`citewise.aws.sqs_erasure`): the job outlives one invocation."""
        from citewise.aws import clients as aws
        from citewise.aws.sqs_erasure import SqsErasureQueue

        settings = self._settings
        return SqsErasureQueue(
            _required(settings.erasure_queue_url), client=aws.client("sqs", region=settings.aws_region)
        )

    def rates(self) -> RateLimiter:
        from citewise.aws import clients as aws
        from citewise.aws.dynamodb_rates import DynamoRates

        settings = self._settings
        # As the usage meter's: a query waits for its bucket, so a slow table costs it seconds at most.
        client = aws.client("dynamodb", region=settings.aws_region, max_attempts=2, read_timeout=2)
        return DynamoRates(_required(settings.registry_table), client=client)

    def audit(self) -> AuditLog:
        from citewise.aws import clients as aws
        from citewise.aws.cloudwatch_audit import CloudWatchAudit

        settings = self._settings
        # Like the meter's: one retry and short timeouts, as a request waits for its record.
        client = aws.client("logs", region=settings.aws_region, max_attempts=2, read_timeout=2)
        return CloudWatchAudit(_required(settings.audit_log_group), client=client)

    def audit_key(self) -> bytes:
        # The settings refuse a trail without its key on AWS: this is never reached there.
        raise ValidationError("CITEWISE_AUDIT_LOG_GROUP needs CITEWISE_AUDIT_HASH_KEY")

    def credentials(self) -> CredentialStore:
        from citewise.aws import clients as aws
        from citewise.aws.dynamodb_credentials import DynamoCredentials

        settings = self._settings
        return DynamoCredentials(
            _required(settings.registry_table), client=aws.client("dynamodb", region=settings.aws_region)
        )

    def credential_issuer(self) -> CredentialIssuer:
        from citewise.aws import clients as aws
        from citewise.aws.cognito_credentials import CognitoIssuer

        settings = self._settings
        if settings.user_pool_id is None or settings.credential_token_url is None:
            raise ValidationError(
                "credentials need a Cognito user pool: this function has no CITEWISE_USER_POOL_ID and "
                "CITEWISE_CREDENTIAL_TOKEN_URL (an IAM-mode stack maps IAM roles to tenants instead)"
            )
        return CognitoIssuer(
            settings.user_pool_id,
            token_url=settings.credential_token_url,
            token_minutes=settings.credential_token_minutes,
            client=aws.client("cognito-idp", region=settings.aws_region),
        )

    def conversations(self) -> ConversationStore:
        from citewise.aws.dynamodb_conversations import DynamoConversations

        return DynamoConversations(_required(self._settings.registry_table), client=self._dynamodb)

    def sources(self) -> SourceRegistry:
        from citewise.aws.dynamodb_sources import DynamoSources

        return DynamoSources(_required(self._settings.registry_table), client=self._dynamodb)

    def refresh_queue(self) -> RefreshQueue:
        """The refresh function's queue (`citewise.aws.sqs_refresh`): a refresh outlives one invocation."""
        from citewise.aws import clients as aws
        from citewise.aws.sqs_refresh import SqsRefreshQueue

        settings = self._settings
        return SqsRefreshQueue(
            _required(settings.refresh_queue_url), client=aws.client("sqs", region=settings.aws_region)
        )

    def feedback(self) -> FeedbackStore:
        from citewise.aws.dynamodb_feedback import DynamoFeedback

        return DynamoFeedback(_required(self._settings.registry_table), client=self._dynamodb)

    def blobs(self) -> BlobStore:
        from citewise.aws.s3 import S3BlobStore, s3_client

        settings = self._settings
        return S3BlobStore(
            _required(settings.documents_bucket),
            client=s3_client(settings.aws_region),
            max_bytes=settings.max_document_bytes,
            url_ttl=settings.upload_url_ttl,
        )

    def close(self) -> None:
        """The AWS clients hold nothing that needs closing."""


def s3vectors_reader(settings: Settings, bucket: str) -> Callable[[str], Any] | None:
    """The seam of search mode s3vectors' reads (`S3VectorsIndex(client, bucket, reader=...)`): clients on
    per-tenant session credentials of the tenant-reader role when the stack gives the function that role
    (the query and MCP functions, `citewise.aws.tenant_sessions`); None elsewhere (the writing functions
    and local runs read with their own client)."""
    if settings.tenant_reader_role_arn is None:
        return None
    from citewise.aws import clients as aws
    from citewise.aws.tenant_sessions import TenantSessions

    region = settings.aws_region or aws.region()
    sessions = TenantSessions(
        aws.client("sts", region=region),
        settings.tenant_reader_role_arn,
        bucket,
        region=region,
        make_client=lambda credentials: aws.session_client("s3vectors", credentials, region=region),
        key_per_tenant=settings.tenant_key_scope is not None,
    )
    return sessions.client


def page_fetcher(settings: Settings) -> WebPageFetcher:
    """The web sources' fetcher for `settings` (docs/web-fetch.md): its page size cap, its per-host delay, its
    User-Agent contact, and loopback addresses only where the local settings allow them."""
    from citewise.builtin.web_fetch import FetchLimits, WebPageFetcher, user_agent

    return WebPageFetcher(
        limits=FetchLimits(max_bytes=settings.web_max_page_bytes, host_delay=settings.web_host_delay),
        agent=user_agent(settings.web_contact_url),
        allow_loopback=settings.web_allow_loopback,
    )


def s3vectors_tenant_keys(settings: Settings) -> TenantKeys | None:
    """Search mode s3vectors with a key per tenant (`CITEWISE_TENANT_KEY_SCOPE`): the tenants' KMS keys,
    whose client is made on first use (only the ingest and erasure functions create or destroy one)."""
    if settings.tenant_key_scope is None:
        return None
    from citewise.aws import clients as aws
    from citewise.aws.tenant_keys import TenantKeys

    return TenantKeys(
        lambda: aws.client("kms", region=settings.aws_region),
        scope=settings.tenant_key_scope,
        bucket_arn=_required(settings.vector_bucket_arn),
        deletion_days=settings.tenant_key_deletion_days,
    )


def _required(value: str | None) -> str:
    if value is None:  # the settings validator refuses this already
        raise ValidationError("CITEWISE_BACKEND=aws needs the endpoint, table and bucket settings")
    return value


def build_services(settings: Settings) -> Services:
    """The pipeline for `settings.backend` (the AWS adapters or an installed backend), built on use."""
    return Services(settings)
