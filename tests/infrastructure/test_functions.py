"""The functions: runtime, layer, roles, and environment variables that their settings classes accept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pydantic
import pytest
from aws_cdk import App
from citewise_infra.app import build
from citewise_infra.constants import (
    API_FUNCTIONS,
    API_GATEWAY_TIMEOUT_S,
    COLD_START_MARGIN_S,
    FUNCTION_KEYS,
    FUNCTIONS_ID,
    HANDLER,
    METRICS_NAMESPACE,
    SERVICE_NAMES,
    FunctionKey,
)
from citewise_infra.functions import FunctionsFactory, settings_environment

from citewise.domain.quotas import Quotas
from citewise.runtime.settings import (
    ApiSettings,
    BootstrapSettings,
    DocumentsSettings,
    ErasureSettings,
    IngestSettings,
    McpSettings,
    QuerySettings,
    Settings,
    load_settings,
)
from citewise_local.emulator import API_TIMEOUT_S, INGEST_TIMEOUT_S

from .conftest import MANAGED, OPERATOR_ROLE, SERVERLESS_IAM, Synth, cdk_context, synthesize
from .templates import flat

SETTINGS: dict[FunctionKey, type[Settings]] = {
    "ingest": IngestSettings,
    "query": QuerySettings,
    "documents": DocumentsSettings,
    "mcp": McpSettings,
    "bootstrap": BootstrapSettings,
    "erasure": ErasureSettings,
}
# What each function must be told (the handlers contract): the index and its vector space for all...
SEARCH = {
    "CITEWISE_BACKEND",
    "CITEWISE_OPENSEARCH_ENDPOINT",
    "CITEWISE_OPENSEARCH_SERVICE",
    "CITEWISE_INDEX_NAME",
    "CITEWISE_EMBEDDER",
    "CITEWISE_EMBEDDING_DIMENSION",
}
# ... where documents and records are for those that read or write them, and nothing else.
DOCUMENTS = {
    "CITEWISE_REGISTRY_TABLE",
    "CITEWISE_DOCUMENTS_BUCKET",
    "CITEWISE_MAX_DOCUMENT_BYTES",
    "CITEWISE_TOMBSTONE_RETENTION_DAYS",
}
CREDENTIAL_ISSUING = {"CITEWISE_USER_POOL_ID", "CITEWISE_CREDENTIAL_TOKEN_URL"}
REQUIRED: dict[FunctionKey, set[str]] = {
    "ingest": SEARCH | DOCUMENTS,
    "query": SEARCH | {"CITEWISE_SYNTHESIZER", "CITEWISE_GENERATION_MODEL_ID", "CITEWISE_AUTH_MODE"},
    "documents": SEARCH | DOCUMENTS | {"CITEWISE_AUTH_MODE", "CITEWISE_UPLOAD_URL_TTL"},
    "mcp": SEARCH
    | {"CITEWISE_REGISTRY_TABLE", "CITEWISE_SYNTHESIZER", "CITEWISE_GENERATION_MODEL_ID", "CITEWISE_AUTH_MODE"},
    "bootstrap": SEARCH,
    "erasure": SEARCH | DOCUMENTS | {"CITEWISE_ERASURE_QUEUE_URL"},
}
NOT_GIVEN: dict[FunctionKey, set[str]] = {
    "ingest": {"CITEWISE_AUTH_MODE", "CITEWISE_SYNTHESIZER"},
    # The query function is told the registry table for the tenants' settings documents (and the programs'
    # credentials) only (its role reads nothing else of it, test_iam.py); never the bucket. Only the
    # documents function makes and revokes credentials (the user pool's app clients).
    "query": DOCUMENTS - {"CITEWISE_REGISTRY_TABLE"} | CREDENTIAL_ISSUING,
    "documents": {"CITEWISE_SYNTHESIZER", "CITEWISE_GENERATION_MODEL_ID"},
    "mcp": {"CITEWISE_DOCUMENTS_BUCKET", "CITEWISE_UPLOAD_URL_TTL"} | CREDENTIAL_ISSUING,
    "bootstrap": DOCUMENTS | {"CITEWISE_AUTH_MODE"},
    "erasure": {"CITEWISE_AUTH_MODE", "CITEWISE_SYNTHESIZER"},
}
# Stand-ins for values CloudFormation fills in at deploy time.
DEPLOY_TIME = {
    "CITEWISE_OPENSEARCH_ENDPOINT": "https://search-citewise-dev-abc.us-east-1.es.amazonaws.com",
    "CITEWISE_REGISTRY_TABLE": "citewise-dev-Registry-ABC",
    "CITEWISE_DOCUMENTS_BUCKET": "citewise-dev-documents-abc",
    "CITEWISE_SWEEP_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/citewise-dev-Queue-ABC",
    "CITEWISE_ERASURE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/citewise-dev-Erasure-ABC",
    "CITEWISE_INGEST_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/citewise-dev-Queue-ABC",
    "CITEWISE_PUBLIC_URL": "https://abc123.execute-api.us-east-1.amazonaws.com/dev",
    "CITEWISE_AUTHORIZATION_SERVER": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_ABC",
    "CITEWISE_AUDIT_LOG_GROUP": "citewise-dev-AuditTrail-ABC",
    "CITEWISE_AUDIT_HASH_KEY": "a-generated-secret-of-64-characters",
    "CITEWISE_USER_POOL_ID": "us-east-1_ABC",
    "CITEWISE_CREDENTIAL_TOKEN_URL": "https://citewise-dev-123456789012.auth.us-east-1.amazoncognito.com/oauth2/token",
}
CONSOLE_DOMAIN = "d111111abcdef8.cloudfront.net"
"""A stand-in for the console's distribution's domain, in the origins the API functions answer."""


def deploy_time(name: str, value: Any) -> str:
    """The value of variable `name` once deployed: `value` itself, or a stand-in for what CloudFormation fills in."""
    if isinstance(value, str):
        return value
    if name == "CITEWISE_CORS_ALLOW_ORIGINS":  # the configured origins and the console's distribution
        return re.sub(r"<[A-Za-z0-9]+\.DomainName>", CONSOLE_DOMAIN, flat(value))
    return DEPLOY_TIME[name]


def function_properties(synth: Synth, key: FunctionKey) -> dict[str, Any]:
    fn = getattr(synth.stack.functions, key)
    return synth.resources[synth.logical_id(fn.function)]["Properties"]  # type: ignore[no-any-return]


def variables(synth: Synth, key: FunctionKey) -> dict[str, Any]:
    return function_properties(synth, key)["Environment"]["Variables"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("key", FUNCTION_KEYS)
def test_each_function_is_python_312_on_arm64_with_the_layer_tracing_and_its_own_logs(
    synth: Synth, key: FunctionKey
) -> None:
    properties = function_properties(synth, key)
    fn = getattr(synth.stack.functions, key)
    assert (properties["Runtime"], properties["Architectures"], properties["Handler"]) == (
        "python3.12",
        ["arm64"],
        HANDLER,
    )
    assert properties["Layers"] == [{"Ref": synth.logical_id(synth.stack.layer)}]
    assert properties["TracingConfig"] == {"Mode": "Active"}
    assert properties["LoggingConfig"]["LogGroup"] == {"Ref": synth.logical_id(fn.log_group)}
    assert properties["Role"] == {"Fn::GetAtt": [synth.logical_id(fn.role), "Arn"]}
    assert properties["Timeout"] == getattr(synth.stack.config, key).timeout_s


def test_citewise_serve_stops_invocations_at_the_timeouts_the_stack_gives_the_functions(synth: Synth) -> None:
    # The local server's deadlines are the deployed functions' timeouts (the API routes' functions, and ingest)
    config = synth.stack.config
    assert {config.query.timeout_s, config.documents.timeout_s, config.mcp.timeout_s} == {API_TIMEOUT_S}
    assert config.ingest.timeout_s == INGEST_TIMEOUT_S


@pytest.mark.parametrize("key", API_FUNCTIONS)
def test_an_api_function_times_out_with_a_margin_under_the_gateway(synth: Synth, key: FunctionKey) -> None:
    # A cold start's init runs inside the gateway's 29 s, not the function's: 5 s are kept for it
    assert function_properties(synth, key)["Timeout"] <= API_GATEWAY_TIMEOUT_S - COLD_START_MARGIN_S == 24
    methods = [method["Properties"] for method in synth.of_type("AWS::ApiGateway::Method").values()]
    integrations = [m["Integration"] for m in methods if m["Integration"].get("Type") == "AWS_PROXY"]
    # A streamed integration (POST /v1/query, docs/aws.md) is not held to the 29 s: its function's own timeout is
    buffered = [i for i in integrations if i.get("ResponseTransferMode") != "STREAM"]
    assert buffered and all(i.get("TimeoutInMillis", 29_000) == API_GATEWAY_TIMEOUT_S * 1000 for i in buffered)


def code_directory(synth: Synth, key: FunctionKey) -> Path:
    """The staged asset directory of `key`'s code in the cloud assembly."""
    code = function_properties(synth, key)["Code"]
    return synth.outdir / f"asset.{flat(code['S3Key']).removesuffix('.zip')}"


def test_a_tenant_map_beyond_the_variables_limit_deploys(tmp_path: Path, _no_default_account: None) -> None:
    # Given IAM mode with a map of 400 principals (about 24 KB as JSON: six times Lambda's 4 KB for all variables)
    tenant_map = {f"arn:aws:iam::123456789012:role/app-{n:04d}": f"tenant-{n:04d}" for n in range(400)}
    assert len(json.dumps(tenant_map)) > 4 * 1024
    synth = synthesize(
        tmp_path, "dev", {**SERVERLESS_IAM, "auth": {**SERVERLESS_IAM["auth"], "tenant_map": tenant_map}}
    )
    for key in API_FUNCTIONS:
        # Then every API function's variables stay small, and its code holds the whole map
        assert len(json.dumps(variables(synth, key))) < 4 * 1024, key
        shipped = (code_directory(synth, key) / "tenant_map.json").read_text(encoding="utf-8")
        assert json.loads(shipped) == tenant_map


def test_every_function_has_a_role_of_its_own(synth: Synth) -> None:
    roles = [json.dumps(function_properties(synth, key)["Role"]) for key in FUNCTION_KEYS]
    assert len(set(roles)) == len(FUNCTION_KEYS)


def test_the_layer_targets_the_functions_runtime(synth: Synth) -> None:
    layer = synth.resources[synth.logical_id(synth.stack.layer)]
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def citewise_layers(synth: Synth) -> set[str]:
    """The logical ids of citewise's layers (the console's deployment brings CDK's AWS CLI layer too)."""
    layers = synth.of_type("AWS::Lambda::LayerVersion")
    return {key for key, layer in layers.items() if layer["Properties"].get("Description", "").startswith("citewise ")}


def test_no_stack_has_the_web_layer_while_no_function_extracts_pages(synth: Synth) -> None:
    # The web layer is built at its first use: the templates have the base layer only, and bundle nothing more
    assert citewise_layers(synth) == {synth.logical_id(synth.stack.layer)}


def test_add_web_layer_gives_one_function_the_web_layer_on_top_of_the_base_layer(
    tmp_path: Path, _no_default_account: None
) -> None:
    # Given a stack whose factory is asked to let the ingest function extract pages
    app = App(context=cdk_context("dev"), outdir=str(tmp_path))
    stack = build(app)
    factory = stack.node.find_child(FUNCTIONS_ID)
    assert isinstance(factory, FunctionsFactory)
    factory.add_web_layer(stack.functions.ingest)
    synth = Synth(stack, app.synth().get_stack_artifact(stack.artifact_id).template, tmp_path)
    # Then the template has one web layer, for the functions' runtime and architecture
    base, web = synth.logical_id(stack.layer), synth.logical_id(factory.web_layer)
    assert citewise_layers(synth) == {base, web}
    properties = synth.resources[web]["Properties"]
    assert (properties["CompatibleRuntimes"], properties["CompatibleArchitectures"]) == (["python3.12"], ["arm64"])
    # And the ingest function carries both, the base layer first; every other function only the base layer
    assert function_properties(synth, "ingest")["Layers"] == [{"Ref": base}, {"Ref": web}]
    for key in FUNCTION_KEYS:
        if key != "ingest" and getattr(stack.functions, key) is not None:
            assert function_properties(synth, key)["Layers"] == [{"Ref": base}], key


@pytest.mark.parametrize("key", FUNCTION_KEYS)
def test_every_citewise_variable_is_a_field_of_the_functions_settings(synth: Synth, key: FunctionKey) -> None:
    fields = SETTINGS[key].model_fields
    names = {name for name in variables(synth, key) if name.startswith("CITEWISE_")}
    assert REQUIRED[key] <= names
    assert not NOT_GIVEN[key] & names  # a function is told only what it uses
    assert {name.removeprefix("CITEWISE_").lower() for name in names} <= set(fields)


@pytest.mark.parametrize("key", FUNCTION_KEYS)
def test_the_environment_validates_as_the_functions_settings(
    synth: Synth, key: FunctionKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the function's variables, deploy-time values stood in for, in its code's directory (the
    # working directory on Lambda)
    for name, value in variables(synth, key).items():
        monkeypatch.setenv(name, deploy_time(name, value))
    monkeypatch.chdir(code_directory(synth, key))
    # When the function loads its settings at cold start, they validate, and mean what the stack meant
    settings = load_settings(SETTINGS[key])
    config = synth.stack.config
    assert settings.backend == "aws"
    assert settings.opensearch_service == synth.stack.search.service
    assert (settings.embedder, settings.embedding_dimension) == (
        config.models.embedder,
        config.models.embedding_dimension,
    )
    assert settings.index_name == config.search.index_name
    if key in ("ingest", "documents"):
        assert settings.tombstone_retention_days == config.data.tombstone_retention_days
    # only the ingest function of a Serverless stack sends delayed sweeps; only the documents function re-queues
    assert (settings.sweep_queue_url is not None) == (key == "ingest" and config.search.mode == "serverless")
    assert (settings.ingest_queue_url is not None) == (key == "documents")
    # every function that checks quotas has the deployment's defaults
    if key in ("ingest", "documents", "query", "mcp"):
        assert settings.default_quotas().model_dump(exclude_none=True) == config.quotas.model_dump(exclude_none=True)
    if isinstance(settings, ApiSettings):
        assert settings.auth_mode == config.auth.mode
        assert settings.tenant_map == config.auth.tenant_map
        console = (f"https://{CONSOLE_DOMAIN}",) if config.console.enabled else ()
        assert settings.cors_allow_origins == (*config.api.cors_allow_origins, *console)
    # the usage routes (the documents function's) estimate costs at the environment's prices; no other function
    assert settings.prices == (config.prices if key == "documents" else None)


def test_the_query_function_synthesizes_with_the_configured_model_and_guardrail(
    dev: Synth, serverless_iam: Synth
) -> None:
    assert variables(dev, "query")["CITEWISE_GENERATION_MODEL_ID"] == "us.amazon.nova-lite-v1:0"
    assert "CITEWISE_GUARDRAIL_ID" not in variables(dev, "query")
    query = variables(serverless_iam, "query")
    assert (query["CITEWISE_GUARDRAIL_ID"], query["CITEWISE_GUARDRAIL_VERSION"]) == ("gr0abc123", "3")
    # IAM mode's tenant map is a file in the code, read at the cold start: no 4 KB variable limit
    assert "CITEWISE_TENANT_MAP" not in query and query["CITEWISE_TENANT_MAP_FILE"] == "tenant_map.json"
    for key in API_FUNCTIONS:
        shipped = json.loads((code_directory(serverless_iam, key) / "tenant_map.json").read_text(encoding="utf-8"))
        assert shipped == {"arn:aws:iam::123456789012:role/acme-app": "acme"}, key
        assert (code_directory(serverless_iam, key) / "handler.py").is_file()
    assert variables(dev, "query")["CITEWISE_TENANT_CLAIM"] == "custom:tenant_id"
    # The platform operator's principals (IAM mode), for the functions that tell it from a tenant
    for key in API_FUNCTIONS:
        assert json.loads(variables(serverless_iam, key)["CITEWISE_OPERATOR_PRINCIPALS"]) == [OPERATOR_ROLE], key
    assert "CITEWISE_OPERATOR_PRINCIPALS" not in variables(dev, "documents")


@pytest.mark.parametrize("key", FUNCTION_KEYS)
def test_powertools_names_the_service_and_namespace(dev: Synth, key: FunctionKey) -> None:
    env = variables(dev, key)
    assert env["POWERTOOLS_SERVICE_NAME"] == SERVICE_NAMES[key]
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == METRICS_NAMESPACE
    assert env["POWERTOOLS_LOG_LEVEL"] == dev.stack.config.log_level


def test_the_stack_refuses_a_variable_its_settings_would_ignore() -> None:
    assert settings_environment(Settings, {"index_name": "x"}) == {"CITEWISE_INDEX_NAME": "x"}
    with pytest.raises(ValueError, match="Settings has no field tenant_map"):
        settings_environment(Settings, {"tenant_map": "{}"})


def test_the_index_has_no_replica_on_a_one_node_domain_and_one_on_more(
    dev: Synth, prod: Synth, serverless_iam: Synth
) -> None:
    # Given dev's one data node and prod's two: a replica on one node could never be placed (yellow forever)
    assert dev.stack.config.search.data_nodes == 1 and prod.stack.config.search.data_nodes == 2
    for key in ("bootstrap", "ingest"):
        assert variables(dev, key)["CITEWISE_INDEX_REPLICAS"] == "0"
        assert variables(prod, key)["CITEWISE_INDEX_REPLICAS"] == "1"
    # Serverless manages its own replicas: the functions are told nothing
    assert all("CITEWISE_INDEX_REPLICAS" not in variables(serverless_iam, key) for key in FUNCTION_KEYS)


def test_the_quota_defaults_of_cdk_json_reach_every_function_that_checks_them(
    tmp_path: Path, _no_default_account: None
) -> None:
    # Given an environment whose tenants may store 10,000 documents and send 600 queries a minute (on a
    # domain, so that the index bootstrap exists to be told nothing)
    synth = synthesize(tmp_path, "dev", {**MANAGED, "quotas": {"max_documents": 10_000, "queries_per_minute": 600}})
    for key in ("ingest", "documents", "query", "mcp"):
        # Then each function that checks quotas is told them, and only the limits that are set
        quota_variables = {name: value for name, value in variables(synth, key).items() if "QUOTA" in name}
        assert quota_variables == {"CITEWISE_QUOTA_MAX_DOCUMENTS": "10000", "CITEWISE_QUOTA_QUERIES_PER_MINUTE": "600"}
    assert not any("QUOTA" in name for name in variables(synth, "bootstrap"))


@pytest.mark.parametrize("value", [-1, "many", 10**20])
def test_a_bad_quota_default_fails_the_synthesis_naming_it(value: object) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        Quotas.model_validate({"max_documents": value})
    assert caught.value.errors()[0]["loc"][0] == "max_documents"
