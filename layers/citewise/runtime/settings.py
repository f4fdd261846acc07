"""Settings from environment variables (prefix `CITEWISE_`), validated once at start-up.

Logic never reads `os.environ`: it receives a `Settings` object, so tests build one explicitly and a
misconfiguration fails at start with a message naming the variable.

One class per program: `Settings` for the CLI and the local server (everything), and one per Lambda
function (`QuerySettings`, `DocumentsSettings`, `McpSettings`, `IngestSettings`, `BootstrapSettings`) that requires on
AWS only the resources that function uses, so a variable of another function is never needed: the stack
gives each function only its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar
from urllib.parse import urlsplit

import pydantic
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from citewise.domain.errors import ValidationError
from citewise.domain.models import SearchMode
from citewise.domain.quotas import CEILINGS, Quotas
from citewise.domain.tenant_settings import known_time_zone
from citewise.ports.audit import QuestionMode
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.registry import TOMBSTONE_RETENTION
from citewise.ports.usage import PriceTable
from citewise.query.fusion import FusionMethod

Backend = Literal["local", "aws"]
EmbedderName = Literal["minilm", "hashing", "titan", "cohere-english", "cohere-multilingual"]
SynthesizerName = Literal["extractive", "bedrock", "openai"]
GenerationFallback = Literal["none", "extractive"]
OpenSearchService = Literal["es", "aoss"]
RouterName = Literal["deterministic", "bedrock"]
RerankerName = Literal["none", "bedrock"]
RewriterName = Literal["auto", "deterministic", "bedrock", "openai"]
AuthMode = Literal["cognito", "iam"]
SEARCH_INDEX = "search_index"
"""In `aws_requires`: the chunk index, either `opensearch_endpoint` or `vector_bucket`."""


class Settings(BaseSettings):
    """Knobs of the pipeline; every field maps to `CITEWISE_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="CITEWISE_", extra="ignore", frozen=True, defer_build=True)
    aws_requires: ClassVar[tuple[str, ...]] = (SEARCH_INDEX, "registry_table", "documents_bucket")
    """The resources (by field) this program cannot run without on the AWS backend; `SEARCH_INDEX` is
    the chunk index, an OpenSearch endpoint or an S3 Vectors bucket."""

    backend: Backend = Field(default="local", description="`local` (embedded files) or `aws` (managed services).")
    home: Path = Field(default=Path("~/.citewise"), description="Where the local index and registry live.")
    embedder: EmbedderName = "minilm"
    synthesizer: SynthesizerName = Field(
        default="extractive",
        description="`extractive` (quotes, no model), `bedrock` (Converse) or `openai` (a chat-completions endpoint).",
    )
    generation_fallback: GenerationFallback = Field(
        default="none",
        description="`extractive`: when the model fails (GENERATION_ERROR, THROTTLED), answer by quoting instead.",
    )
    # --- an OpenAI-compatible chat-completions endpoint (CITEWISE_SYNTHESIZER=openai; docs/generation.md)
    openai_base_url: str = Field(
        default="http://localhost:11434/v1", description="The API base, up to `/v1` (Ollama's by default)."
    )
    openai_model: str = Field(default="", description="The model name the endpoint serves, e.g. llama3.2.")
    openai_api_key: SecretStr | None = Field(default=None, description="Sent as a bearer token; never logged.")
    openai_timeout: float = Field(
        default=60.0, gt=0, le=900, description="Seconds one answer may take in all (connect to last token)."
    )
    hashing_dimension: int = Field(default=384, ge=16, le=4096)
    chunk_tokens: int = Field(default=400, ge=32, le=4000)
    chunk_overlap: int = Field(default=50, ge=0, le=1000)
    chunk_chars: int = Field(
        default=4000,
        ge=200,
        le=4000,
        description="The most characters a chunk holds, whatever its tokens (a run without spaces is one token); "
        "at most 4000 so a search response stays bounded (docs/security.md, Output bounds).",
    )
    max_document_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    max_pages: int = Field(default=2000, ge=1)
    max_expansion: int = Field(
        default=100,
        ge=1,
        description="A document's text (and a .docx's uncompressed XML) may be at most this many times its size.",
    )
    max_parse_seconds: float = Field(default=120.0, gt=0, le=900, description="Seconds one document may take to parse.")
    max_chunks: int = Field(default=10_000, ge=1, description="A document making more chunks than this is FAILED.")
    # --- web sources: fetching pages (citewise.builtin.web_fetch; docs/web-fetch.md)
    web_allow_loopback: bool = Field(
        default=False,
        description="Local mode and tests only: let web sources fetch from 127.0.0.0/8 and ::1 (every other "
        "non-public address stays refused). Refused by every Lambda function's settings and on the AWS backend.",
    )
    web_max_page_bytes: int = Field(
        default=10 * 1024 * 1024, ge=1024, le=100 * 1024 * 1024, description="The most bytes one fetched page may have."
    )
    web_host_delay: float = Field(
        default=1.0, ge=0.0, le=60.0, description="Seconds between two requests to one host (robots.txt may ask more)."
    )
    web_contact_url: str | None = Field(
        default=None, description="Named in the crawler's User-Agent (`citewise/<version> (+URL)`) for site owners."
    )
    search_mode: SearchMode = "hybrid"
    fusion_method: FusionMethod = Field(
        default="relevance",
        description="How the BM25 and vector lists are fused: `relevance` (by the calibrated relevance estimate; "
        "chosen on SciFact), `rrf` (by rank), `minmax` or `zscore` (by normalised scores, weighted sum); "
        "docs/evaluation.md measures each.",
    )
    rrf_k: int = Field(default=5, ge=1, description="Reciprocal-rank constant (CITEWISE_FUSION_METHOD=rrf only).")
    keyword_weight: float = Field(
        default=1.0, ge=0.0, le=10.0, description="Weight of the BM25 list in the fusion (not with `relevance`)."
    )
    vector_weight: float = Field(
        default=1.0, ge=0.0, le=10.0, description="Weight of the vector list in the fusion (not with `relevance`)."
    )
    candidates: int = Field(
        default=100, ge=1, le=1000, description="Depth of each ranked list before fusion (100 chosen on SciFact)."
    )
    embed_batch_size: int = Field(default=64, ge=1, le=1024)
    source_key: str = Field(
        default="source",
        pattern=r"^[A-Za-z0-9_.:-]{1,100}$",
        description="The metadata (sidecar or object metadata) key naming a document's source, e.g. `jira`.",
    )
    source_date_key: str = Field(
        default="updated_at",
        pattern=r"^[A-Za-z0-9_.:-]{1,100}$",
        description="The metadata key holding when a document's content last changed (ISO 8601).",
    )
    route: bool = Field(default=True, description="Route queries: constraint phrases become filters (docs/routing.md).")
    router: RouterName = Field(
        default="deterministic",
        description="`deterministic` (no network) or `bedrock` (Converse tool use, the deterministic one as fallback).",
    )
    router_model_id: str | None = Field(
        default=None, description="The Bedrock model of CITEWISE_ROUTER=bedrock; None: the generation model."
    )
    # The default is not validated (pydantic-settings validates defaults): checking a name loads the whole
    # bundled zone database, about a third of a Lambda cold start, to confirm that UTC exists (a test does).
    routing_time_zone: str = Field(
        default="UTC", validate_default=False, description="IANA time zone that dates in queries are read in."
    )
    routing_id_patterns: list[str] = Field(
        default_factory=lambda: [r"[A-Z][A-Z0-9]+-\d+"],
        description="Regular expressions of identifiers whose documents a query pins (JSON list).",
    )
    routing_aliases: dict[str, str] = Field(
        default_factory=dict,
        description='Phrase -> source, as a JSON object: {"tickets": "jira", "wiki": "confluence"}.',
    )
    tombstone_retention_days: int = Field(
        default=TOMBSTONE_RETENTION.days,
        ge=15,
        le=3650,
        description="How long a delete refuses older writes of the document: longer than SQS keeps a message (14 d).",
    )
    # --- conversations (`citewise.query.conversations`; docs/generation.md, Follow-up questions)
    conversation_ttl_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="Days a conversation is kept after its last turn (the registry table's time to live on AWS).",
    )
    conversation_history_turns: int = Field(
        default=6, ge=1, le=50, description="The newest turns a follow-up's rewrite reads; older ones are dropped."
    )
    conversation_history_chars: int = Field(
        default=6000,
        ge=200,
        le=100_000,
        description="The most characters of history (questions and answers) a rewrite reads; the oldest turns are "
        "dropped first, the newest always kept.",
    )
    rewriter: RewriterName = Field(
        default="auto",
        description="What makes a follow-up standalone: `deterministic` (no model), `bedrock` (Converse), `openai` "
        "(the OpenAI-compatible endpoint); `auto`: the synthesizer's model if it is one, else deterministic.",
    )
    rewrite_timeout: float = Field(
        default=5.0, gt=0, le=60, description="Seconds a model's rewrite may take before the question is used as asked."
    )
    ranking_freshness_weight: float = Field(
        default=0.0, ge=0.0, le=1.0, description="0-1: how much freshness scales fused scores (0: off)."
    )
    ranking_half_life_days: float = Field(
        default=180.0, gt=0, le=36_500, description="Days after which a document's freshness is halved."
    )
    ranking_credibility_weight: float = Field(
        default=0.0, ge=0.0, le=1.0, description="0-1: how much source credibility scales fused scores (0: off)."
    )
    ranking_feedback_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="0-1: how much users' feedback on a source scales fused scores (0: off).",
    )
    ranking_feedback_min_votes: int = Field(
        default=5, ge=1, le=10_000, description="Ratings a source needs before the feedback signal moves its score."
    )
    ranking_feedback_prior_votes: float = Field(
        default=4.0,
        gt=0,
        le=10_000,
        description="The Beta prior's weight in votes (at 0.5) that smooths a source's share.",
    )
    tenant_settings_ttl: float = Field(
        default=60.0, ge=0, le=3600, description="Seconds a query function keeps a tenant's settings document."
    )
    # --- quotas (docs/operations.md, "Quotas"): the deployment's defaults; None (unset): no limit ---
    quota_max_documents: int | None = Field(default=None, ge=0, le=CEILINGS["max_documents"])
    quota_max_stored_bytes: int | None = Field(default=None, ge=0, le=CEILINGS["max_stored_bytes"])
    quota_pages_per_day: int | None = Field(default=None, ge=0, le=CEILINGS["pages_per_day"])
    quota_queries_per_minute: int | None = Field(default=None, ge=0, le=CEILINGS["queries_per_minute"])
    quota_query_burst: int | None = Field(
        default=None, ge=0, le=CEILINGS["query_burst"], description="None: a minute's worth of queries."
    )
    quota_generation_tokens_per_day: int | None = Field(default=None, ge=0, le=CEILINGS["generation_tokens_per_day"])
    quota_ttl: float = Field(
        default=60.0, ge=0, le=3600, description="Seconds a function keeps a tenant's quota overrides."
    )
    ingest_queue_url: str | None = Field(
        default=None,
        description="The ingest queue, where the operator's re-queue of quota-refused documents sends them (AWS).",
    )
    public_url: str = Field(
        default="http://127.0.0.1:8080",
        description="Where the API is reached (no trailing slash): the base of local upload URLs, and of the MCP "
        "endpoint's protected-resource metadata (on AWS the stage's URL, set by the stack).",
    )
    # --- the audit trail (docs/operations.md, "Audit trail") ------------------------------------------
    audit_questions: QuestionMode = Field(
        default="hash",
        description="`hash`: a question is kept in the audit trail only as its keyed hash; `full`: the question "
        "itself too (the operator's choice: the trail then holds what users asked).",
    )
    audit_hash_key: SecretStr | None = Field(
        default=None,
        description="The secret key of the questions' hashes (HMAC-SHA256); locally by default a key derived from "
        "the home's secret, on AWS set by the stack from a generated secret. Never logged.",
    )
    audit_log_group: str | None = Field(
        default=None,
        description="AWS: the CloudWatch Logs group of the audit trail (the stack's); None: no trail is written.",
    )
    # --- AWS -------------------------------------------------------------------------------------
    aws_region: str | None = Field(default=None, description="Region of every AWS client; None: the environment's.")
    opensearch_endpoint: str | None = None
    vector_bucket: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$",
        description="AWS: the S3 Vectors bucket of search mode `s3vectors` (an index per tenant), instead of "
        "CITEWISE_OPENSEARCH_ENDPOINT.",
    )
    vector_bucket_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:s3vectors:[a-z0-9-]+:[0-9]{12}:bucket/[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$",
        description="Search mode s3vectors with a key per tenant: the vector bucket's ARN, which each tenant key's "
        "policy names (and its account); set by the stack.",
    )
    tenant_key_scope: str | None = Field(
        default=None,
        pattern=r"^[a-zA-Z0-9_-]{1,64}$",
        description="Search mode s3vectors: a KMS key per tenant (`citewise.aws.tenant_keys`), named "
        "`alias/<scope>/<index>` and tagged `citewise:stack=<scope>`; the stack sets its name. Unset: every "
        "index uses the bucket's key.",
    )
    tenant_key_deletion_days: int = Field(
        default=7,
        ge=7,
        le=30,
        description="Search mode s3vectors with a key per tenant: the days KMS waits before it deletes an erased "
        "tenant's key (7 to 30; the key is unusable from the erasure on).",
    )
    opensearch_service: OpenSearchService = "es"
    index_name: str = Field(default="citewise-chunks", pattern=r"^[a-z0-9][a-z0-9_-]{0,254}$")
    index_replicas: int | None = Field(
        default=None,
        ge=0,
        le=15,
        description="Replicas of the index a domain creates (0 on a one-node domain); None: the domain's default.",
    )
    sweep_queue_url: str | None = Field(
        default=None,
        description="Serverless (`aoss`): the queue (the ingest queue) that delivers delayed stale-chunk sweeps.",
    )
    registry_table: str | None = None
    documents_bucket: str | None = None
    tenant_reader_role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+$",
        description="Search mode s3vectors, the reading functions: the role each tenant's reads assume, limited by "
        "a session policy to that tenant's index (`citewise.aws.tenant_sessions`); set by the stack.",
    )
    erasure_batch: int = Field(
        default=ERASE_BATCH,
        ge=1,
        le=1000,
        description="Items one step of a tenant's erasure deletes from one store at most (S3 deletes 1000 at most).",
    )
    erasure_queue_url: str | None = Field(
        default=None,
        description="AWS: the erasure function's queue, where an operator's erasure starts and each run of the "
        "job re-queues the rest (`citewise.aws.sqs_erasure`).",
    )
    refresh_queue_url: str | None = Field(
        default=None,
        description="AWS: the refresh function's queue, where a web source's refresh starts and each batch "
        "re-queues the rest (`citewise.aws.sqs_refresh`).",
    )
    embedding_dimension: int = Field(default=1024, description="Titan v2: 256, 512 or 1024.")
    generation_model_id: str = "amazon.nova-lite-v1:0"
    generation_max_tokens: int = Field(default=1024, ge=1, le=8192)
    generation_temperature: float = Field(default=0.0, ge=0.0, le=1.0)
    guardrail_id: str | None = None
    guardrail_version: str | None = None
    # --- reranking (docs/deploy.md, "Reranking"): off unless asked for; a failure keeps the fused order
    reranker: RerankerName = Field(
        default="none", description="`bedrock`: the Bedrock Rerank API reorders the best fused hits; `none`: off."
    )
    rerank_model_id: str = Field(
        default="amazon.rerank-v1:0",
        pattern=r"^(arn:aws[a-z-]*:bedrock:[a-z0-9-]+::foundation-model/)?[a-z0-9-]+\.[a-z0-9.:-]+$",
        description="The reranker model: `amazon.rerank-v1:0`, `cohere.rerank-v3-5:0`, or its foundation-model ARN.",
    )
    rerank_region: str | None = Field(
        default=None, description="Where the reranker runs if not in CITEWISE_AWS_REGION (not every region offers it)."
    )
    rerank_candidates: int = Field(
        default=50, ge=1, le=1000, description="How many of the best fused hits are reranked (billed per 100)."
    )
    rerank_timeout: int = Field(default=5, ge=1, le=60, description="Seconds one Rerank attempt may take.")
    upload_url_ttl: int = Field(default=900, ge=60, le=7 * 24 * 3600, description="Lifetime of upload URLs (s).")
    prices: PriceTable | None = Field(
        default=None,
        description='What a million units of each usage counter cost, as JSON (`{"currency": "USD", '
        '"per_million": {"generation_output_tokens": 0.24}}`): usage reports estimate each tenant\'s cost '
        "from it; none: no estimate. docs/operations.md, Cost.",
    )
    # --- credentials for agents and services (docs/operations.md) -----------------------------------
    credential_cache_ttl: float = Field(
        default=60.0,
        ge=0,
        le=300,
        description="Seconds a function keeps a credential's record: a revoked credential is refused within this time.",
    )
    credential_token_minutes: int = Field(
        default=60,
        ge=5,
        le=1440,
        description="Lifetime of a credential's access tokens, in minutes (Cognito's bounds: 5 minutes to a day).",
    )
    user_pool_id: str | None = Field(
        default=None,
        pattern=r"^[\w-]+_[0-9a-zA-Z]+$",
        description="AWS: the Cognito user pool whose app clients are the credentials (the documents function).",
    )
    credential_token_url: str | None = Field(
        default=None,
        description="AWS: the user pool domain's token endpoint (`https://<domain>/oauth2/token`); locally "
        "`citewise serve`'s own (`<public_url>/oauth2/token`).",
    )

    @field_validator("public_url")
    @classmethod
    def _http_base_url(cls, value: str) -> str:
        _require_http_url(value, "http://127.0.0.1:8080")
        if value.endswith("/"):
            raise ValueError("must not end with '/'")
        return value

    @field_validator("openai_base_url")
    @classmethod
    def _api_base_url(cls, value: str) -> str:
        _require_http_url(value, "http://localhost:11434/v1")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _openai_has_a_model(self) -> Settings:
        if self.synthesizer == "openai" and not self.openai_model:
            raise ValueError("CITEWISE_SYNTHESIZER=openai needs CITEWISE_OPENAI_MODEL (the endpoint's model name)")
        return self

    @field_validator("routing_time_zone")
    @classmethod
    def _known_time_zone(cls, value: str) -> str:
        return known_time_zone(value)

    @field_validator("routing_id_patterns")
    @classmethod
    def _compiling_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression ({exc})") from exc
        return value

    @model_validator(mode="after")
    def _weights_have_a_weighted_fusion(self) -> Settings:
        # The relevance model's coefficients are fitted: a weight there would silently do nothing.
        if self.fusion_method == "relevance" and (self.keyword_weight, self.vector_weight) != (1.0, 1.0):
            raise ValueError(
                "CITEWISE_KEYWORD_WEIGHT and CITEWISE_VECTOR_WEIGHT weigh the lists of CITEWISE_FUSION_METHOD="
                "rrf, minmax or zscore; the default `relevance` fusion is a fitted model without weights"
            )
        return self

    @model_validator(mode="after")
    def _loopback_fetching_is_local_only(self) -> Settings:
        # Only this class (the CLI and `citewise serve`) may turn it on: every Lambda function has a subclass
        # of its own, so no deployed function can be made to fetch from its own host, whatever its variables.
        if self.web_allow_loopback and (type(self) is not Settings or self.backend == "aws"):
            raise ValueError(
                "CITEWISE_WEB_ALLOW_LOOPBACK is for local mode and tests: a Lambda function and the AWS backend "
                "never fetch from loopback addresses"
            )
        return self

    @model_validator(mode="after")
    def _overlap_below_budget(self) -> Settings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("CITEWISE_CHUNK_OVERLAP must be smaller than CITEWISE_CHUNK_TOKENS")
        return self

    @model_validator(mode="after")
    def _aws_backend_is_complete(self) -> Settings:
        if self.backend == "aws":
            missing = [_variable(name) for name in self.aws_requires if not getattr(self, name)]
            if missing:
                raise ValueError(f"CITEWISE_BACKEND=aws needs {', '.join(missing)}")
        if self.opensearch_endpoint and self.vector_bucket:
            raise ValueError("set CITEWISE_OPENSEARCH_ENDPOINT or CITEWISE_VECTOR_BUCKET (the chunk index), not both")
        if self.tenant_key_scope is not None and (self.vector_bucket is None or self.vector_bucket_arn is None):
            raise ValueError(
                "CITEWISE_TENANT_KEY_SCOPE (a key per tenant) needs CITEWISE_VECTOR_BUCKET and "
                "CITEWISE_VECTOR_BUCKET_ARN"
            )
        if self.backend == "aws" and self.audit_log_group and self.audit_hash_key is None:
            raise ValueError("CITEWISE_AUDIT_LOG_GROUP needs CITEWISE_AUDIT_HASH_KEY (the questions' hashing key)")
        if (self.guardrail_id is None) != (self.guardrail_version is None):
            raise ValueError("CITEWISE_GUARDRAIL_ID and CITEWISE_GUARDRAIL_VERSION go together")
        return self

    @property
    def search_index(self) -> str | None:
        """Where the chunks are on AWS: the OpenSearch endpoint or the S3 Vectors bucket (`vector_bucket`)."""
        return self.opensearch_endpoint or self.vector_bucket

    def default_quotas(self) -> Quotas:
        """The deployment's quotas, which a tenant's overrides replace field by field."""
        return Quotas.model_validate({name: getattr(self, f"quota_{name}") for name in Quotas.model_fields})

    @property
    def home_dir(self) -> Path:
        """`home` with `~` expanded."""
        return self.home.expanduser()


def _variable(name: str) -> str:
    """The variable(s) that set the required resource `name` of `aws_requires`."""
    if name == SEARCH_INDEX:
        return "CITEWISE_OPENSEARCH_ENDPOINT (or CITEWISE_VECTOR_BUCKET)"
    return f"CITEWISE_{name.upper()}"


def check_origin(origin: str) -> str:
    """`origin` if it is a browser origin (`scheme://host[:port]`, as a browser sends it) or `*`."""
    if origin != "*" and not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:\d+)?", origin):
        raise ValueError(f"not an origin: {origin!r} (scheme://host[:port], or '*')")
    return origin


def _require_http_url(value: str, example: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"must be an http(s) URL such as {example}")


class ApiSettings(Settings):
    """What the API functions need beyond the pipeline: how an identity maps to a tenant."""

    auth_mode: AuthMode = Field(default="cognito", description="`cognito` (JWT claims) or `iam` (SigV4 principal).")
    tenant_claim: str = Field(default="custom:tenant_id", description="The Cognito claim that names the tenant.")
    tenant_map: dict[str, str] = Field(
        default_factory=dict, description="IAM mode: principal (or role) ARN -> tenant id, as a JSON object."
    )
    tenant_map_file: Path | None = Field(
        default=None,
        description="IAM mode: a JSON file holding the tenant map instead, relative to the working directory (on "
        "Lambda the function's code, where the stack ships it): Lambda's 4 KB for all environment variables does "
        "not bound it. Read once, when the settings load (a cold start).",
    )
    operator_principals: tuple[str, ...] = Field(
        default=(),
        description="IAM mode: the principal (or role) ARNs of the platform operator, as a JSON list; never in the "
        "tenant map. Cognito mode: the operator is a member of the `operators` group without a tenant.",
    )
    cors_allow_origins: tuple[str, ...] = Field(
        default=(),
        description="Browser origins whose pages may read the responses (`citewise.runtime.cors`), as a JSON "
        'list such as ["https://app.example.com"]; "*" for any. None by default.',
    )

    @model_validator(mode="before")
    @classmethod
    def _tenant_map_from_file(cls, values: Any) -> Any:
        path = values.get("tenant_map_file") if isinstance(values, dict) else None
        if path is None:
            return values
        if values.get("tenant_map"):
            raise ValueError("set CITEWISE_TENANT_MAP or CITEWISE_TENANT_MAP_FILE, not both")
        try:
            tenant_map = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"cannot read the tenant map {path}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ValueError(f"the tenant map {path} is not JSON: {exc}") from exc
        return {**values, "tenant_map": tenant_map}

    @model_validator(mode="after")
    def _operators_are_no_tenant(self) -> ApiSettings:
        shared = sorted(set(self.operator_principals) & set(self.tenant_map))
        if shared:
            raise ValueError(f"an operator principal is not a tenant member: {', '.join(shared)} is in the tenant map")
        return self

    @field_validator("cors_allow_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_origin(origin) for origin in value)


class QuerySettings(ApiSettings):
    """The query function: the index, the embedder and the synthesizer; no registry, no bucket."""

    aws_requires: ClassVar[tuple[str, ...]] = (SEARCH_INDEX,)


class DocumentsSettings(ApiSettings):
    """The documents function: the registry and the bucket, and the index (a delete removes chunks)."""


class McpSettings(ApiSettings):
    """The MCP endpoint (`citewise mcp`, `/mcp`): read-only tools over the index, the embedder, the
    synthesizer and the registry (documents' records); no bucket."""

    aws_requires: ClassVar[tuple[str, ...]] = (SEARCH_INDEX, "registry_table")
    mcp_profiles: Path | None = Field(
        default=None,
        description="A TOML file of tool profiles (`citewise.mcp.profiles`); relative to the working directory, "
        "which on Lambda is the function's code.",
    )
    mcp_min_relevance_score: float = Field(
        default=0.0, ge=0.0, le=1.0, description="The default `min_relevance_score` of the rag_query and search tools."
    )
    authorization_server: str | None = Field(
        default=None,
        description="The issuer of the API's tokens (a Cognito user pool's, or `citewise serve`'s URL), named in the "
        "MCP endpoint's protected-resource metadata (RFC 9728) with `public_url` as the API's base; none (IAM "
        "mode): no metadata.",
    )


class IngestSettings(Settings):
    """The ingest function: the bucket it reads, the registry, the index and the embedder."""


class ErasureSettings(Settings):
    """The erasure function: every store an erasure empties (registry, bucket, index) and its own queue."""

    aws_requires: ClassVar[tuple[str, ...]] = (
        SEARCH_INDEX,
        "registry_table",
        "documents_bucket",
        "erasure_queue_url",
    )


class RefreshSettings(Settings):
    """The refresh function: the source registry (in the registry table), the bucket the pages go to (the
    ingest function takes them from there), and its own queue. No index, no embedder."""

    aws_requires: ClassVar[tuple[str, ...]] = ("registry_table", "documents_bucket", "refresh_queue_url")


class BootstrapSettings(Settings):
    """The index bootstrap: the index and the embedder's vector space only."""

    aws_requires: ClassVar[tuple[str, ...]] = ("opensearch_endpoint",)


S = TypeVar("S", bound=Settings)


def load_settings(kind: type[S] = Settings, **overrides: object) -> S:  # type: ignore[assignment]
    """Settings of `kind` from the environment (and explicit overrides); a bad value names its variable."""
    try:
        return kind(**overrides)  # type: ignore[arg-type]
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            (f"CITEWISE_{str(err['loc'][0]).upper()}: " if err["loc"] else "")
            + err["msg"].removeprefix("Value error, ")
            for err in exc.errors(include_url=False)
        )
        raise ValidationError(f"invalid setting: {problems}") from exc
