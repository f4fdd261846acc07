"""The environments of `cdk.json` (`citewise:environments`), validated before any construct is built.

Each block describes one deployment (`-c env=dev`): where it goes, how big it is, which models it uses,
how callers authenticate, and what happens to data when the stack is deleted. Every field has a
default that suits a small, cheap deployment except where the choice must be deliberate (region).
A bad value fails the synth with the environment and field named, never a half-built stack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from citewise.aws import bedrock_models, bedrock_rerank
from citewise.aws.bedrock_embeddings import COHERE_DIMENSION, COHERE_ENGLISH_V3, COHERE_MULTILINGUAL_V3, TITAN_V2
from citewise.aws.tenant_keys import MAX_DELETION_DAYS, MIN_DELETION_DAYS
from citewise.domain.errors import CitewiseError
from citewise.domain.models import TENANT_ID_PATTERN
from citewise.domain.quotas import Quotas
from citewise.ports.usage import PriceTable
from citewise_infra.constants import (
    API_FUNCTION_MAX_TIMEOUT_S,
    API_FUNCTIONS,
    API_GATEWAY_TIMEOUT_S,
    COLD_START_MARGIN_S,
    CONTEXT_ALARM_EMAIL,
)

# Retention periods CloudWatch Logs accepts, in days, and their names in CDK's RetentionDays.
LOG_RETENTION_DAYS: dict[int, str] = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}
EMBEDDING_MODELS: dict[str, str] = {
    "titan": TITAN_V2,
    "cohere-english": COHERE_ENGLISH_V3,
    "cohere-multilingual": COHERE_MULTILINGUAL_V3,
}
TITAN_DIMENSIONS = frozenset({256, 512, 1024})
# A Bedrock model id (`amazon.nova-lite-v1:0`) or a cross-region inference profile id
# (`us.amazon.nova-lite-v1:0`); ARNs are refused so the IAM policy can be derived from the id.
MODEL_ID_PATTERN = r"^[a-z0-9-]+\.[A-Za-z0-9._:-]+$"
# Environment names end up in resource names with tight limits (Serverless policy names: 32 characters).
ENVIRONMENT_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,15}$"
REGION_PATTERN = r"^[a-z]{2}(-[a-z]+)+-\d$"
PRINCIPAL_ARN_PATTERN = r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:[A-Za-z0-9+=,.@_/:-]+$"


def _log_retention_days(value: int) -> int:
    if value not in LOG_RETENTION_DAYS:
        raise ValueError(f"CloudWatch Logs keeps logs for one of {sorted(LOG_RETENTION_DAYS)} days")
    return value


LogRetentionDays = Annotated[int, AfterValidator(_log_retention_days)]
"""A number of days CloudWatch Logs can keep a log group's events (its retention is one of a fixed set)."""


class ConfigError(ValueError):
    """An environment is missing from cdk.json or one of its values is invalid."""


class _Block(BaseModel):
    # Unknown keys are errors: a misspelt setting must not silently fall back to its default.
    model_config = ConfigDict(extra="forbid", frozen=True)


class SearchConfig(_Block):
    """The chunk index: an OpenSearch managed domain (default), an OpenSearch Serverless vector collection,
    or Amazon S3 Vectors (`s3vectors`: a vector bucket, an index per tenant, nothing billed while idle;
    `citewise_infra.vectors`). The sizes below apply to a domain only."""

    mode: Literal["managed", "serverless", "s3vectors"] = "managed"
    index_name: str = Field(default="citewise-chunks", pattern=r"^[a-z0-9][a-z0-9_-]{0,254}$")
    # Managed domain only.
    engine_version: str = Field(default="2.19", pattern=r"^\d+\.\d+$")
    data_node_type: str = Field(default="t3.small.search", pattern=r"^[a-z0-9]+\.[a-z0-9]+\.search$")
    data_nodes: int = Field(default=1, ge=1, le=80)
    volume_gib: int = Field(default=10, ge=10, le=16384)
    availability_zones: Literal[1, 2, 3] = 1
    master_node_type: str | None = Field(default=None, pattern=r"^[a-z0-9]+\.[a-z0-9]+\.search$")
    master_nodes: Literal[0, 3, 5] = 0
    # Serverless only: standby replicas double the OCUs (and the bill) for availability-zone redundancy.
    standby_replicas: bool = False
    # s3vectors only: a KMS key per tenant (citewise.aws.tenant_keys), created with the tenant's index and
    # destroyed by its erasure ($1 a month per tenant, docs/deploy.md); off: every index uses the stack's key.
    key_per_tenant: bool = False
    # How long KMS waits before deleting an erased tenant's key (the key is unusable from the erasure on).
    key_deletion_days: int = Field(default=MIN_DELETION_DAYS, ge=MIN_DELETION_DAYS, le=MAX_DELETION_DAYS)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.key_per_tenant and self.mode != "s3vectors":
            raise ValueError(
                f"key_per_tenant applies to search mode s3vectors only (an index per tenant), not {self.mode!r}"
            )
        if (self.master_nodes == 0) != (self.master_node_type is None):
            raise ValueError("master_nodes and master_node_type go together")
        if self.availability_zones > 1 and self.data_nodes % self.availability_zones:
            raise ValueError("data_nodes must be a multiple of availability_zones")
        return self


class ModelsConfig(_Block):
    """Bedrock models: the embedder of every chunk and query, and the answer model."""

    embedder: Literal["titan", "cohere-english", "cohere-multilingual"] = "titan"
    embedding_dimension: int = 1024
    generation_model_id: str = Field(default="us.amazon.nova-lite-v1:0", pattern=MODEL_ID_PATTERN)
    # The query router (docs/routing.md): `bedrock` asks `router_model_id` (None: the generation model)
    # through Converse tool use, the deterministic router being its fallback.
    router: Literal["deterministic", "bedrock"] = "deterministic"
    router_model_id: str | None = Field(default=None, pattern=MODEL_ID_PATTERN)
    guardrail_id: str | None = Field(default=None, pattern=r"^[a-z0-9]+$")
    guardrail_version: str | None = Field(default=None, pattern=r"^(DRAFT|[1-9][0-9]{0,7})$")

    @property
    def routing_model_id(self) -> str | None:
        """The model the query router calls, if it calls one."""
        return (self.router_model_id or self.generation_model_id) if self.router == "bedrock" else None

    @property
    def embedding_model_id(self) -> str:
        """The Bedrock model id behind `embedder` (the one the library's embedder calls)."""
        return EMBEDDING_MODELS[self.embedder]

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.embedder == "titan" and self.embedding_dimension not in TITAN_DIMENSIONS:
            raise ValueError("Titan v2 embeds in 256, 512 or 1024 dimensions")
        if self.embedder != "titan" and self.embedding_dimension != COHERE_DIMENSION:
            raise ValueError(f"Cohere embed v3 embeds in {COHERE_DIMENSION} dimensions")
        if (self.guardrail_id is None) != (self.guardrail_version is None):
            raise ValueError("guardrail_id and guardrail_version go together")
        try:  # the query function would refuse it at cold start; refuse it at synth already
            bedrock_models.require(self.generation_model_id, guardrail=self.guardrail_id is not None)
        except CitewiseError as exc:
            raise ValueError(exc.message) from exc
        return self


class RerankConfig(_Block):
    """Reranking of the best fused hits by the Bedrock Rerank API (docs/deploy.md, "Reranking"): off unless
    an environment turns it on, since a reranker without model access would fail (and fall back) on every
    query."""

    enabled: bool = False
    model_id: Literal["amazon.rerank-v1:0", "cohere.rerank-v3-5:0"] = "amazon.rerank-v1:0"
    # Where the reranker runs; None: the stack's region. Not every region offers the models.
    region: str | None = Field(default=None, pattern=REGION_PATTERN)
    candidates: int = Field(default=50, ge=1, le=1000)
    timeout_s: int = Field(default=5, ge=1, le=60)

    def check_region(self, stack_region: str) -> None:
        """Refuse a model in a region that does not offer it, naming those that do."""
        region = self.region or stack_region
        offered = bedrock_rerank.REGIONS[self.model_id]
        if self.enabled and region not in offered:
            raise ValueError(
                f"{self.model_id} is not offered in {region}: set rerank.region to one of {', '.join(sorted(offered))}"
            )


class AuthConfig(_Block):
    """How API callers authenticate and get their tenant."""

    mode: Literal["cognito", "iam"] = "cognito"
    # IAM mode: principal (or role) ARN -> tenant id. Cognito mode: the `custom:tenant_id` claim.
    tenant_map: dict[str, str] = Field(default_factory=dict)
    # IAM mode: the platform operator's principal (or role) ARNs, none of them in the tenant map (the
    # /v1/admin/ routes; docs/operations.md). Cognito mode: members of the `operators` group without a tenant.
    operator_principals: tuple[str, ...] = ()
    mfa: Literal["optional", "required"] = "required"
    # Allow USER_PASSWORD_AUTH (username and password sent over TLS to Cognito) next to SRP, so a
    # user can sign in with the AWS CLI. Off unless an environment asks for it.
    password_auth: bool = False

    @field_validator("tenant_map")
    @classmethod
    def _valid_map(cls, value: dict[str, str]) -> dict[str, str]:
        for principal, tenant in value.items():
            if not re.fullmatch(PRINCIPAL_ARN_PATTERN, principal):
                raise ValueError(f"not an IAM principal ARN: {principal!r}")
            if not re.fullmatch(TENANT_ID_PATTERN, tenant):
                raise ValueError(f"not a valid tenant id: {tenant!r}")
        return value

    @field_validator("operator_principals")
    @classmethod
    def _valid_operators(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for principal in value:
            if not re.fullmatch(PRINCIPAL_ARN_PATTERN, principal):
                raise ValueError(f"not an IAM principal ARN: {principal!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.mode == "iam" and not self.tenant_map:
            raise ValueError("iam mode needs a tenant_map naming at least one principal")
        if self.mode == "cognito" and self.tenant_map:
            raise ValueError("tenant_map applies to iam mode only (Cognito users carry custom:tenant_id)")
        if self.mode == "cognito" and self.operator_principals:
            raise ValueError("operator_principals applies to iam mode only (Cognito operators are in `operators`)")
        shared = sorted(set(self.operator_principals) & set(self.tenant_map))
        if shared:
            raise ValueError(f"an operator is no tenant member: {', '.join(shared)} is in the tenant_map too")
        return self


class ApiConfig(_Block):
    """The REST API stage."""

    stage_name: str = Field(default="api", pattern=r"^[A-Za-z0-9_]{1,64}$")
    throttle_rate_limit: float = Field(default=20, gt=0, le=10_000, description="Steady requests per second.")
    throttle_burst_limit: int = Field(default=40, ge=1, le=5_000)
    cors_allow_origins: tuple[str, ...] = ()
    upload_url_ttl_s: int = Field(default=900, ge=60, le=3600)

    @field_validator("cors_allow_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if origin != "*" and not re.fullmatch(r"^https?://[A-Za-z0-9.-]+(:\d+)?$", origin):
                raise ValueError(f"not an origin: {origin!r} (scheme://host[:port], or '*')")
        return value


class ConsoleConfig(_Block):
    """The web console on AWS (`citewise_infra.console`): its built files in a private bucket behind a
    CloudFront distribution, people signing in on the user pool's hosted UI. Nothing is billed while nobody
    loads it beyond a few megabytes of S3 storage (docs/deploy.md); off unless an environment turns it on, since
    it needs auth mode cognito."""

    enabled: bool = False


class FunctionConfig(_Block):
    """Size of one Lambda function (an API function's timeout defaults to the most the gateway allows it)."""

    memory_mb: int = Field(default=1024, ge=128, le=10240)
    timeout_s: int = Field(default=API_FUNCTION_MAX_TIMEOUT_S, ge=1, le=900)


class IngestConfig(FunctionConfig):
    """The ingest function and its queue."""

    timeout_s: int = Field(default=300, ge=30, le=900)
    batch_size: int = Field(default=5, ge=1, le=100)
    max_batching_window_s: int = Field(default=5, ge=0, le=300)
    # Event source mapping maximum concurrency (SQS: 2-1000): how many batches embed at once. Size it
    # to the embedding model's requests-per-minute quota (docs/deploy.md).
    max_concurrency: int = Field(default=2, ge=2, le=1000)
    max_receive_count: int = Field(default=5, ge=1, le=1000)
    max_document_bytes: int = Field(default=50 * 1024 * 1024, ge=1, le=5 * 1024**3)


class DataConfig(_Block):
    """What survives a stack deletion, and for how long things are kept."""

    removal_policy: Literal["destroy", "retain"] = "retain"
    log_retention_days: LogRetentionDays = 30
    noncurrent_version_days: int = Field(default=30, ge=1)
    access_log_days: int = Field(default=90, ge=1)
    queue_retention_days: int = Field(default=14, ge=1, le=14)
    # Longer than any queue keeps a message (14 days at most), so no event a delete must refuse outlives it.
    tombstone_retention_days: int = Field(default=90, ge=15, le=3650)
    # A conversation is deleted (the registry table's time to live) this long after its last turn.
    conversation_ttl_days: int = Field(default=30, ge=1, le=3650)

    @property
    def log_retention(self) -> logs.RetentionDays:
        """`log_retention_days` as CDK's enum."""
        return logs.RetentionDays[LOG_RETENTION_DAYS[self.log_retention_days]]


def quota_environment(quotas: Quotas) -> dict[str, str]:
    """The functions' `quota_*` settings of the default limits that are set (null: no limit)."""
    return {f"quota_{name}": str(value) for name, value in quotas.model_dump().items() if value is not None}


class AuditConfig(_Block):
    """The audit trail (docs/operations.md, "Audit trail"): how long CloudWatch Logs keeps it."""

    retention_days: LogRetentionDays = 365

    @property
    def log_retention(self) -> logs.RetentionDays:
        """`retention_days` as CDK's enum."""
        return logs.RetentionDays[LOG_RETENTION_DAYS[self.retention_days]]


class AlarmsConfig(_Block):
    """Alarm thresholds and who hears about them."""

    email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    # An environment whose alarms must reach someone: synthesis fails without `email`.
    require_subscriber: bool = False
    api_p99_latency_ms: int = Field(default=10_000, ge=100)
    query_p99_latency_ms: int = Field(default=10_000, ge=100)
    ingest_queue_age_s: int = Field(default=3600, ge=60)

    @model_validator(mode="after")
    def _subscribed(self) -> Self:
        if self.require_subscriber and self.email is None:
            raise ValueError(
                "this environment requires an alarm subscriber: set alarms.email in cdk.json, or pass "
                f"-c {CONTEXT_ALARM_EMAIL}=ops@example.com"
            )
        return self


class EnvironmentConfig(_Block):
    """One deployment target (`-c env=NAME`)."""

    name: str = Field(pattern=ENVIRONMENT_NAME_PATTERN)
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str = Field(pattern=REGION_PATTERN)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    search: SearchConfig = SearchConfig()
    models: ModelsConfig = ModelsConfig()
    auth: AuthConfig = AuthConfig()
    api: ApiConfig = ApiConfig()
    console: ConsoleConfig = ConsoleConfig()
    ingest: IngestConfig = IngestConfig()
    query: FunctionConfig = FunctionConfig()
    documents: FunctionConfig = FunctionConfig(memory_mb=512)
    mcp: FunctionConfig = FunctionConfig()
    bootstrap: FunctionConfig = FunctionConfig(memory_mb=512, timeout_s=600)
    # A tenant's erasure runs in steps until 15 minutes are nearly spent, then re-queues itself.
    erasure: FunctionConfig = FunctionConfig(memory_mb=512, timeout_s=900)
    data: DataConfig = DataConfig()
    audit: AuditConfig = AuditConfig()
    alarms: AlarmsConfig = AlarmsConfig()
    rerank: RerankConfig = RerankConfig()
    quotas: Quotas = Quotas()
    """The deployment's default quotas per tenant; the operator overrides them per tenant."""
    prices: PriceTable | None = None
    """What the environment's models cost per million units of each usage counter: the usage routes'
    cost estimate (docs/operations.md, Cost, says where each default comes from); none: no estimate."""

    @model_validator(mode="after")
    def _reranker_is_offered(self) -> Self:
        self.rerank.check_region(self.region)
        return self

    @model_validator(mode="after")
    def _console_signs_in_with_cognito(self) -> Self:
        if self.console.enabled and self.auth.mode != "cognito":
            raise ValueError(
                "the console signs people in on the Cognito hosted UI, which auth mode iam has none of: set "
                "console.enabled to false, or auth.mode to cognito"
            )
        return self

    @model_validator(mode="after")
    def _api_functions_answer_before_the_gateway(self) -> Self:
        for key in API_FUNCTIONS:
            timeout = getattr(self, key).timeout_s
            if timeout > API_FUNCTION_MAX_TIMEOUT_S:
                raise ValueError(
                    f"{key}.timeout_s is {timeout}: an API function must time out by {API_FUNCTION_MAX_TIMEOUT_S} s, "
                    f"{COLD_START_MARGIN_S} s under API Gateway's {API_GATEWAY_TIMEOUT_S} s integration timeout "
                    "(a cold start's init counts against the gateway, not the function)"
                )
        return self

    @property
    def destroy_on_delete(self) -> bool:
        """Whether deleting the stack deletes the data too (dev environments)."""
        return self.data.removal_policy == "destroy"

    @property
    def removal(self) -> RemovalPolicy:
        """The removal policy of the stateful resources. `retain` keeps them on delete and replacement,
        but not when their own creation fails (`RetainExceptOnCreate`): a failed first deployment must
        not leave a fixed-name resource (the `citewise-<env>` domain, user pool) behind for the retry to
        collide with."""
        return RemovalPolicy.DESTROY if self.destroy_on_delete else RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE


def load_environment(
    environments: Mapping[str, Any] | None,
    name: str | None,
    alarm_email: str | None = None,
    search_mode: str | None = None,
) -> EnvironmentConfig:
    """The validated block `name` of `environments` (the `citewise:environments` context); `alarm_email`
    (`-c alarm_email=...`) overrides the block's `alarms.email`, so an address need not be committed;
    `search_mode` (`-c search_mode=s3vectors`) its `search.mode`, to build an environment in another mode."""
    available = sorted(environments or {})
    if not name:
        raise ConfigError(f"choose an environment with -c env=NAME (one of: {', '.join(available) or 'none'})")
    if environments is None or name not in environments:
        raise ConfigError(f"unknown environment {name!r}: cdk.json defines {', '.join(available) or 'none'}")
    block = environments[name]
    if not isinstance(block, Mapping):
        raise ConfigError(f"environment {name!r} must be a JSON object")
    if alarm_email:
        block = {**block, "alarms": {**block.get("alarms", {}), "email": alarm_email}}
    if search_mode:
        block = {**block, "search": {**block.get("search", {}), "mode": search_mode}}
    try:
        return EnvironmentConfig.model_validate({**block, "name": name})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'environment'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ConfigError(f"environment {name!r} in cdk.json is invalid: {problems}") from exc
