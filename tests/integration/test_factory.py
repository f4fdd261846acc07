"""The factory: settings choose the adapters; building them contacts nothing."""

from __future__ import annotations

import re
from importlib.metadata import EntryPoints
from pathlib import Path

import boto3
import pytest

from citewise.aws.bedrock_embeddings import CohereEmbedder, TitanEmbedder
from citewise.aws.bedrock_rerank import BedrockReranker
from citewise.aws.bedrock_synthesis import BedrockSynthesizer
from citewise.aws.dynamodb import DynamoRegistry
from citewise.aws.opensearch import OpenSearchIndex
from citewise.aws.s3 import S3BlobStore
from citewise.aws.s3vectors import S3VectorsIndex
from citewise.builtin.extractive import ExtractiveSynthesizer
from citewise.domain.errors import ValidationError
from citewise.runtime import services as factory
from citewise.runtime.services import Services, build_embedder, build_services
from citewise.runtime.settings import (
    BootstrapSettings,
    DocumentsSettings,
    ErasureSettings,
    IngestSettings,
    McpSettings,
    QuerySettings,
    Settings,
    load_settings,
)
from citewise_local.blobstore import LocalBlobStore
from citewise_local.index import LocalIndex
from citewise_local.registry import LocalRegistry

AWS_ENV = {
    "CITEWISE_BACKEND": "aws",
    "CITEWISE_AWS_REGION": "eu-west-1",
    "CITEWISE_OPENSEARCH_ENDPOINT": "https://search-citewise.eu-west-1.es.amazonaws.com",
    "CITEWISE_REGISTRY_TABLE": "citewise-documents",
    "CITEWISE_DOCUMENTS_BUCKET": "citewise-docs",
    "CITEWISE_EMBEDDER": "titan",
    "CITEWISE_EMBEDDING_DIMENSION": "512",
    "CITEWISE_SYNTHESIZER": "bedrock",
    "CITEWISE_GENERATION_MODEL_ID": "anthropic.claude-3-haiku-20240307-v1:0",
}
SEARCH_INDEX_NAMED = "CITEWISE_OPENSEARCH_ENDPOINT (or CITEWISE_VECTOR_BUCKET)"
"""How a function that reads the index names a missing one: either backend's setting serves."""


def test_the_aws_backend_is_wired_from_environment_variables_without_a_network_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the variables a deployed function gets (and fake credentials: nothing may be contacted)
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # When the services are built
    services = build_services(load_settings())
    # Then every port has its AWS adapter, configured as asked
    assert isinstance(services.index, OpenSearchIndex)
    assert isinstance(services.registry, DynamoRegistry) and services.registry.table_name == "citewise-documents"
    assert isinstance(services.blobs, S3BlobStore)
    assert isinstance(services.embedder, TitanEmbedder) and services.embedder.dimension == 512
    assert isinstance(services.synthesizer, BedrockSynthesizer)
    assert services.synthesizer.model_id == "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The service of every boto3 client created from now on, in order."""
    services: list[str] = []
    real_client = boto3.session.Session.client

    def recording(self: boto3.session.Session, service_name: str, *args: object, **kwargs: object) -> object:
        services.append(service_name)
        return real_client(self, service_name, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(boto3.session.Session, "client", recording)
    return services


def test_each_adapter_is_built_on_first_use_only(monkeypatch: pytest.MonkeyPatch, created: list[str]) -> None:
    # Given a deployed function's environment, and every AWS client creation recorded
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # When the services are built, nothing is
    services = build_services(load_settings())
    assert created == []
    # When what a query needs is used: the retriever (index, embedder) and the synthesizer
    retriever, synthesizer = services.retriever, services.synthesizer
    # Then no registry or bucket client exists, and each adapter was built once
    assert "dynamodb" not in created and "s3" not in created
    assert retriever is services.retriever and services.index is retriever.index
    assert synthesizer is services.synthesizer
    # And a documents request that needs the registry builds it then
    assert isinstance(services.registry, DynamoRegistry) and created.count("dynamodb") == 1


def test_a_reranking_function_makes_its_rerank_client_on_the_first_reranked_query_only(
    monkeypatch: pytest.MonkeyPatch, created: list[str]
) -> None:
    # Given a deployed query function's environment with reranking on
    for name, value in {**AWS_ENV, "CITEWISE_RERANKER": "bedrock"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # When the services and the retriever are built
    retriever = build_services(load_settings(QuerySettings)).retriever
    # Then the reranker is configured, but its client waits for the first reranked query
    assert isinstance(retriever.reranker, BedrockReranker) and retriever.reranker.name == "amazon.rerank-v1:0"
    assert "bedrock-agent-runtime" not in created


def test_adapters_passed_in_are_used_as_they_are(tmp_path: Path) -> None:
    embedder = build_embedder(Settings(embedder="hashing"))
    services = Services(Settings(home=tmp_path, embedder="hashing"), embedder=embedder)
    assert services.embedder is embedder and services.ingestor.embedder is embedder
    with pytest.raises(TypeError, match="no such adapter: indexer"):
        Services(Settings(home=tmp_path), indexer=embedder)
    services.close()


def test_cohere_is_chosen_by_language() -> None:
    embedder = build_embedder(Settings(embedder="cohere-multilingual"))
    assert isinstance(embedder, CohereEmbedder) and embedder.name.startswith("bedrock:cohere.embed-multilingual-v3")


def test_the_local_backend_is_the_default(tmp_path: Path) -> None:
    services = build_services(Settings(home=tmp_path, embedder="hashing"))
    assert isinstance(services.index, LocalIndex) and isinstance(services.registry, LocalRegistry)
    assert isinstance(services.blobs, LocalBlobStore) and isinstance(services.synthesizer, ExtractiveSynthesizer)
    services.close()


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        (Settings(embedder="hashing"), "CITEWISE_BACKEND=local"),
        (
            Settings(
                backend="aws",
                opensearch_endpoint=AWS_ENV["CITEWISE_OPENSEARCH_ENDPOINT"],
                registry_table="citewise-documents",
                documents_bucket="citewise-docs",
                embedder="minilm",
            ),
            "CITEWISE_EMBEDDER=minilm",
        ),
    ],
    ids=["backend", "embedder"],
)
def test_without_the_local_package_a_local_adapter_fails_the_cold_start(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, refused: str
) -> None:
    # Given the library alone, as the Lambda layer ships it: no package registers a backend or embedder
    monkeypatch.setattr(factory, "entry_points", lambda **_: EntryPoints(()))
    # When a function's services are built (at cold start), before any adapter is used
    # Then the setting that needs the local package is named, and so is the package
    with pytest.raises(ValidationError, match=f"^{refused} is not installed here: .*citewise_local"):
        build_services(settings)


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        ("CITEWISE_OPENSEARCH_ENDPOINT", SEARCH_INDEX_NAMED),
        ("CITEWISE_REGISTRY_TABLE", "CITEWISE_REGISTRY_TABLE"),
        ("CITEWISE_DOCUMENTS_BUCKET", "CITEWISE_DOCUMENTS_BUCKET"),
    ],
)
def test_a_missing_aws_setting_is_named(monkeypatch: pytest.MonkeyPatch, missing: str, named: str) -> None:
    for name, value in AWS_ENV.items():
        if name != missing:
            monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=f"CITEWISE_BACKEND=aws needs {re.escape(named)}$"):
        load_settings()


@pytest.mark.parametrize(
    ("kind", "needs"),
    [
        (QuerySettings, {"CITEWISE_OPENSEARCH_ENDPOINT"}),
        (BootstrapSettings, {"CITEWISE_OPENSEARCH_ENDPOINT"}),
        (DocumentsSettings, {"CITEWISE_OPENSEARCH_ENDPOINT", "CITEWISE_REGISTRY_TABLE", "CITEWISE_DOCUMENTS_BUCKET"}),
        (IngestSettings, {"CITEWISE_OPENSEARCH_ENDPOINT", "CITEWISE_REGISTRY_TABLE", "CITEWISE_DOCUMENTS_BUCKET"}),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_each_function_needs_only_its_own_resources(
    monkeypatch: pytest.MonkeyPatch, kind: type[Settings], needs: set[str]
) -> None:
    resources = {"CITEWISE_OPENSEARCH_ENDPOINT", "CITEWISE_REGISTRY_TABLE", "CITEWISE_DOCUMENTS_BUCKET"}
    for name, value in AWS_ENV.items():
        if name not in resources:
            monkeypatch.setenv(name, value)
    # Given only the resources the function uses, its settings load
    for name in needs:
        monkeypatch.setenv(name, AWS_ENV[name])
    assert load_settings(kind).backend == "aws"
    # And without any one of them, its cold start fails naming it
    for name in needs:
        monkeypatch.delenv(name)
        named = SEARCH_INDEX_NAMED if name == "CITEWISE_OPENSEARCH_ENDPOINT" and kind is not BootstrapSettings else name
        with pytest.raises(ValidationError, match=f"CITEWISE_BACKEND=aws needs {re.escape(named)}$"):
            load_settings(kind)
        monkeypatch.setenv(name, AWS_ENV[name])


def test_a_half_configured_guardrail_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_GUARDRAIL_ID", "gr-1")
    with pytest.raises(ValidationError, match="CITEWISE_GUARDRAIL_ID and CITEWISE_GUARDRAIL_VERSION go together"):
        load_settings()


S3VECTORS_ENV = {
    **{name: value for name, value in AWS_ENV.items() if name != "CITEWISE_OPENSEARCH_ENDPOINT"},
    "CITEWISE_VECTOR_BUCKET": "citewise-dev-vectors",
}


@pytest.mark.parametrize(
    "kind", [QuerySettings, McpSettings, DocumentsSettings, IngestSettings, ErasureSettings], ids=lambda k: k.__name__
)
def test_search_mode_s3vectors_needs_a_vector_bucket_instead_of_an_opensearch_endpoint(
    monkeypatch: pytest.MonkeyPatch, kind: type[Settings]
) -> None:
    # Given a function's variables in search mode s3vectors (a vector bucket, no OpenSearch endpoint)
    for name, value in {**S3VECTORS_ENV, "CITEWISE_ERASURE_QUEUE_URL": "https://sqs.example/erasure"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # When its services are built and its index asked for
    settings = load_settings(kind)
    index = Services(settings).index
    # Then the index is the S3 Vectors adapter of that bucket, built without a call
    assert isinstance(index, S3VectorsIndex) and index._bucket == "citewise-dev-vectors"


def test_the_bootstrap_still_needs_an_opensearch_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in S3VECTORS_ENV.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match="needs CITEWISE_OPENSEARCH_ENDPOINT$"):
        load_settings(BootstrapSettings)


def test_two_chunk_indexes_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**AWS_ENV, **S3VECTORS_ENV, "CITEWISE_OPENSEARCH_ENDPOINT": "https://x.example"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match="CITEWISE_OPENSEARCH_ENDPOINT or CITEWISE_VECTOR_BUCKET"):
        load_settings()
