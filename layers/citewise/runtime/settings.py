"""Settings from environment variables (prefix `CITEWISE_`), validated once at start-up.

Logic never reads `os.environ`: it receives a `Settings` object, so tests build one explicitly and a
misconfiguration fails at start with a message naming the variable.

One class per program: `Settings` for the CLI and the local server (everything), and one per Lambda
function (`QuerySettings`, `DocumentsSettings`, `McpSettings`, `IngestSettings`, `BootstrapSettings`) that requires on
AWS only the resources that function uses, so a variable of another function is never needed: the stack
gives each function only its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal, TypeVar
from urllib.parse import urlsplit

import pydantic
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from citewise.domain.errors import ValidationError
from citewise.domain.models import SearchMode

Backend = Literal["local", "aws"]
EmbedderName = Literal["minilm", "hashing", "titan", "cohere-english", "cohere-multilingual"]
SynthesizerName = Literal["extractive", "bedrock"]
OpenSearchService = Literal["es", "aoss"]
AuthMode = Literal["cognito", "iam"]


class Settings(BaseSettings):
    """Knobs of the pipeline; every field maps to `CITEWISE_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="CITEWISE_", extra="ignore", frozen=True)
    aws_requires: ClassVar[tuple[str, ...]] = ("opensearch_endpoint", "registry_table", "documents_bucket")
    """The resources (by field) this program cannot run without on the AWS backend."""

    backend: Backend = Field(default="local", description="`local` (embedded files) or `aws` (managed services).")
    home: Path = Field(default=Path("~/.citewise"), description="Where the local index and registry live.")
    embedder: EmbedderName = "minilm"
    synthesizer: SynthesizerName = "extractive"
    hashing_dimension: int = Field(default=384, ge=16, le=4096)
    chunk_tokens: int = Field(default=400, ge=32, le=4000)
    chunk_overlap: int = Field(default=50, ge=0, le=1000)
    max_document_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    max_pages: int = Field(default=2000, ge=1)
    search_mode: SearchMode = "hybrid"
    rrf_k: int = Field(default=5, ge=1, description="Reciprocal-rank constant; 5 measured best on SciFact.")
    keyword_weight: float = Field(default=1.0, ge=0.0, le=10.0, description="Weight of BM25 ranks in the fusion.")
    vector_weight: float = Field(default=1.0, ge=0.0, le=10.0, description="Weight of vector ranks in the fusion.")
    candidates: int = Field(default=50, ge=1, le=1000, description="Depth of each ranked list before fusion.")
    embed_batch_size: int = Field(default=64, ge=1, le=1024)
    public_url: str = Field(
        default="http://127.0.0.1:8080",
        description="Where `citewise serve` is reached: the base of local upload URLs (no trailing slash).",
    )
    # --- AWS -------------------------------------------------------------------------------------
    aws_region: str | None = Field(default=None, description="Region of every AWS client; None: the environment's.")
    opensearch_endpoint: str | None = None
    opensearch_service: OpenSearchService = "es"
    index_name: str = Field(default="citewise-chunks", pattern=r"^[a-z0-9][a-z0-9_-]{0,254}$")
    registry_table: str | None = None
    documents_bucket: str | None = None
    embedding_dimension: int = Field(default=1024, description="Titan v2: 256, 512 or 1024.")
    generation_model_id: str = "amazon.nova-lite-v1:0"
    generation_max_tokens: int = Field(default=1024, ge=1, le=8192)
    generation_temperature: float = Field(default=0.0, ge=0.0, le=1.0)
    guardrail_id: str | None = None
    guardrail_version: str | None = None
    upload_url_ttl: int = Field(default=900, ge=60, le=7 * 24 * 3600, description="Lifetime of upload URLs (s).")

    @field_validator("public_url")
    @classmethod
    def _http_base_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ValueError("must be an http(s) URL such as http://127.0.0.1:8080")
        if value.endswith("/"):
            raise ValueError("must not end with '/'")
        return value

    @model_validator(mode="after")
    def _overlap_below_budget(self) -> Settings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("CITEWISE_CHUNK_OVERLAP must be smaller than CITEWISE_CHUNK_TOKENS")
        return self

    @model_validator(mode="after")
    def _aws_backend_is_complete(self) -> Settings:
        if self.backend == "aws":
            missing = [f"CITEWISE_{name.upper()}" for name in self.aws_requires if not getattr(self, name)]
            if missing:
                raise ValueError(f"CITEWISE_BACKEND=aws needs {', '.join(missing)}")
        if (self.guardrail_id is None) != (self.guardrail_version is None):
            raise ValueError("CITEWISE_GUARDRAIL_ID and CITEWISE_GUARDRAIL_VERSION go together")
        return self

    @property
    def home_dir(self) -> Path:
        """`home` with `~` expanded."""
        return self.home.expanduser()


class ApiSettings(Settings):
    """What the API functions need beyond the pipeline: how an identity maps to a tenant."""

    auth_mode: AuthMode = Field(default="cognito", description="`cognito` (JWT claims) or `iam` (SigV4 principal).")
    tenant_claim: str = Field(default="custom:tenant_id", description="The Cognito claim that names the tenant.")
    tenant_map: dict[str, str] = Field(
        default_factory=dict, description="IAM mode: principal (or role) ARN -> tenant id, as a JSON object."
    )


class QuerySettings(ApiSettings):
    """The query function: the index, the embedder and the synthesizer; no registry, no bucket."""

    aws_requires: ClassVar[tuple[str, ...]] = ("opensearch_endpoint",)


class DocumentsSettings(ApiSettings):
    """The documents function: the registry and the bucket, and the index (a delete removes chunks)."""


class McpSettings(ApiSettings):
    """The MCP endpoint (`citewise mcp`, `/mcp`): read-only tools over the index, the embedder, the
    synthesizer and the registry (documents' records); no bucket."""

    aws_requires: ClassVar[tuple[str, ...]] = ("opensearch_endpoint", "registry_table")
    mcp_profiles: Path | None = Field(
        default=None,
        description="A TOML file of tool profiles (`citewise.mcp.profiles`); relative to the working directory, "
        "which on Lambda is the function's code.",
    )
    mcp_min_relevance_score: float = Field(
        default=0.0, ge=0.0, le=1.0, description="The default `min_relevance_score` of the rag_query and search tools."
    )


class IngestSettings(Settings):
    """The ingest function: the bucket it reads, the registry, the index and the embedder."""


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
