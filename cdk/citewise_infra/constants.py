"""Names shared by the CDK app, its tests, the Makefile and the docs: construct ids, output keys,
context keys, function directories, metric names.

One module so that a test asserting on "the ingest function" or "the ApiUrl output" and the construct
that creates it cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from citewise.ports.blobstore import DEFAULT_PREFIX

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR: Final = REPO_ROOT / "functions"
LIBRARY_DIR: Final = REPO_ROOT / "layers" / "citewise"
PYPROJECT: Final = REPO_ROOT / "pyproject.toml"
LAYER_REQUIREMENTS: Final = REPO_ROOT / "cdk" / "layer" / "requirements.txt"
WEB_LAYER_REQUIREMENTS: Final = REPO_ROOT / "cdk" / "layer" / "web-requirements.txt"
"""The web layer's pins: what pyproject's `web` extra adds on top of the base layer (`citewise_infra.layer`)."""
CDK_JSON: Final = REPO_ROOT / "cdk.json"
CONSOLE_ASSETS: Final = REPO_ROOT / "local" / "citewise_local" / "console"
"""The web console's built files (the local package serves them too); `-c console_assets=DIR` overrides."""
CONSOLE_ENTRY: Final = "index.html"
CONSOLE_CONFIG_FILE: Final = "config.json"
"""What the console's page reads first, beside its entry page: the API's URL and how to sign in."""

# --- context -------------------------------------------------------------------------------------------
CONTEXT_ENV: Final = "env"  # `cdk synth -c env=dev`
CONTEXT_ENVIRONMENTS: Final = "citewise:environments"  # the per-environment blocks in cdk.json
CONTEXT_ALARM_EMAIL: Final = "alarm_email"  # `-c alarm_email=ops@example.com`: overrides alarms.email
CONTEXT_SEARCH_MODE: Final = "search_mode"  # `-c search_mode=s3vectors`: overrides search.mode
CONTEXT_CONSOLE_ASSETS: Final = "console_assets"  # `-c console_assets=DIR`: the console's built files
# CDK's own key: stacks whose assets are bundled (`[]` skips bundling: the tests synthesize that way).
CONTEXT_BUNDLING_STACKS: Final = "aws:cdk:bundling-stacks"

# --- functions -----------------------------------------------------------------------------------------
FunctionKey = Literal["ingest", "query", "documents", "mcp", "bootstrap", "erasure"]
FUNCTION_KEYS: Final[tuple[FunctionKey, ...]] = ("ingest", "query", "documents", "mcp", "bootstrap", "erasure")
HANDLER: Final = "handler.lambda_handler"
STREAM_RUNTIME: Final = "/var/task/stream_runtime.sh"
"""The query function's `AWS_LAMBDA_EXEC_WRAPPER`: citewise's runtime loop, which streams (docs/aws.md)."""
STREAMED_TIMEOUT_S: Final = 300
"""The integration timeout of a streamed route: API Gateway allows up to 15 minutes once it streams; a
streamed answer ends well within the query function's own timeout, which is what bounds it."""
API_FUNCTIONS: Final[tuple[FunctionKey, ...]] = ("query", "documents", "mcp")
API_GATEWAY_TIMEOUT_S: Final = 29
"""API Gateway's integration timeout (REST APIs' default and, without a quota increase, its maximum)."""
COLD_START_MARGIN_S: Final = 5
"""Kept between an API function's timeout and the gateway's: a cold start's init runs before the
function's own clock starts but inside the gateway's, so a function allowed the gateway's full 29 s could
still be cut off by the gateway (a bare 504) instead of answering its structured error in time. The
handlers' budget (`citewise.domain.deadline`) is the function's remaining time less 1 s, so it follows."""
API_FUNCTION_MAX_TIMEOUT_S: Final = API_GATEWAY_TIMEOUT_S - COLD_START_MARGIN_S
# Construct ids of the functions (so tests find them by path) and their Powertools service names, which
# are also the `service` dimension of the custom metrics.
FUNCTION_IDS: Final[dict[FunctionKey, str]] = {
    "ingest": "IngestFunction",
    "query": "QueryFunction",
    "documents": "DocumentsFunction",
    "mcp": "McpFunction",
    "bootstrap": "IndexBootstrapFunction",
    "erasure": "ErasureFunction",
}
SERVICE_NAMES: Final[dict[FunctionKey, str]] = {key: f"citewise-{key}" for key in FUNCTION_KEYS}
METRICS_NAMESPACE: Final = "Citewise"

# --- custom metrics (emitted by the handlers through Powertools, dimension `service`) -------------------
INGEST_METRICS: Final = ("IngestFailures", "DocumentsIndexed", "ChunksIndexed")
AUDIT_FAILURES: Final = "AuditWriteFailures"
"""An audit record the API functions could not write (`citewise.runtime.services`)."""
QUERY_METRICS: Final = ("QueryLatency", "RetrievalLatency", "SynthesisLatency", "InputTokens", "OutputTokens")

# --- construct ids ---------------------------------------------------------------------------------------
STORAGE_ID: Final = "Storage"
SEARCH_ID: Final = "Search"
VECTORS_ID: Final = "Vectors"
FUNCTIONS_ID: Final = "Functions"
INGESTION_ID: Final = "Ingestion"
API_ID: Final = "Api"
INDEX_BOOTSTRAP_ID: Final = "IndexBootstrap"
OBSERVABILITY_ID: Final = "Observability"
ERASURE_ID: Final = "Erasure"
AUDIT_ID: Final = "Audit"
TENANT_READER_ID: Final = "TenantReader"
CONSOLE_ID: Final = "Console"
LAYER_ID: Final = "CitewiseLayer"
WEB_LAYER_ID: Final = "CitewiseWebLayer"

INDEX_RESOURCE_TYPE: Final = "Custom::CitewiseIndex"
COGNITO_TENANT_ATTRIBUTE: Final = "tenant_id"  # a custom attribute: `custom:tenant_id` in the ID token
DOCUMENTS_PREFIX: Final = DEFAULT_PREFIX  # the object layout: tenants/{tenant_id}/{path}


# --- stack outputs (the docs and `make deploy` users read these) ------------------------------------------
class Outputs:
    """Output keys of the stack."""

    API_URL: Final = "ApiUrl"
    USER_POOL_ID: Final = "UserPoolId"
    USER_POOL_CLIENT_ID: Final = "UserPoolClientId"
    CREDENTIAL_TOKEN_URL: Final = "CredentialTokenUrl"  # noqa: S105 - an output key, not a secret
    DOCUMENTS_BUCKET: Final = "DocumentsBucketName"
    REGISTRY_TABLE: Final = "RegistryTableName"
    SEARCH_ENDPOINT: Final = "SearchEndpoint"
    VECTOR_BUCKET: Final = "VectorBucketName"  # search mode s3vectors, instead of the endpoint
    INGEST_QUEUE_URL: Final = "IngestQueueUrl"
    DEAD_LETTER_QUEUE_URL: Final = "DeadLetterQueueUrl"
    ERASURE_QUEUE_URL: Final = "ErasureQueueUrl"
    ALARM_TOPIC_ARN: Final = "AlarmTopicArn"
    DASHBOARD_NAME: Final = "DashboardName"
    AUDIT_LOG_GROUP: Final = "AuditLogGroupName"
    CONSOLE_URL: Final = "ConsoleUrl"
    CONSOLE_CLIENT_ID: Final = "ConsoleClientId"
    CONSOLE_BUCKET: Final = "ConsoleBucketName"


def stack_name(environment: str) -> str:
    """The CloudFormation stack name of an environment."""
    return f"citewise-{environment}"
