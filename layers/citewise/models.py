"""Pydantic models shared by the API, the ingestion pipeline and every index adapter.

One set of models keeps the local mode and AWS mode honest: a chunk indexed by the CLI has exactly the
shape of a chunk indexed by the ingest Lambda, and the API schema is generated from the same classes.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
TenantId = Annotated[str, StringConstraints(pattern=TENANT_ID_PATTERN)]
UserId = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]
AttributeValue = str | int | float | bool | list[str]
Vector = list[float]


class Frozen(BaseModel):
    """Immutable value object that rejects unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Visibility(StrEnum):
    """Who inside a tenant may read a document."""

    SHARED = "shared"
    PRIVATE = "private"


class DocumentStatus(StrEnum):
    """Lifecycle of a document in the registry."""

    PENDING = "PENDING"
    INDEXED = "INDEXED"
    FAILED = "FAILED"


class Caller(Frozen):
    """The authenticated principal. Built only from an identity, never from a request body."""

    tenant_id: TenantId
    user_id: UserId
    groups: tuple[str, ...] = ()


# --- parsing -------------------------------------------------------------------------------------


class Block(Frozen):
    """A structural unit of parsed text (heading, paragraph, list item, table row).

    `start`/`end` index into `ParsedDocument.text`; blocks are ordered and never overlap.
    """

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    heading_path: tuple[str, ...] = ()
    page: int | None = Field(default=None, ge=1)
    is_heading: bool = False


class ParsedDocument(Frozen):
    """Plain text plus the structure the chunker needs to keep chunks inside sections and pages."""

    text: str
    blocks: tuple[Block, ...]
    title: str | None = None
    page_count: int | None = None


# --- documents and chunks ------------------------------------------------------------------------


class DocumentMetadata(Frozen):
    """Document-level fields denormalised onto every chunk so one filtered query needs no join."""

    tenant_id: TenantId
    doc_id: str
    owner: str
    visibility: Visibility = Visibility.SHARED
    source: str
    path: str
    title: str
    tags: tuple[str, ...] = ()
    created_at: datetime
    updated_at: datetime
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)


class Chunk(Frozen):
    """A retrievable span of a document with the structure it came from."""

    chunk_id: str
    ordinal: int = Field(ge=0)
    text: str
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    content_hash: str
    document: DocumentMetadata

    @property
    def section(self) -> str | None:
        """The heading path as one readable string, for citations."""
        return " > ".join(self.heading_path) or None


class Document(Frozen):
    """A registry entry: where a document is in its lifecycle and what it produced."""

    tenant_id: TenantId
    doc_id: str
    path: str
    source: str
    title: str | None = None
    owner: str
    visibility: Visibility = Visibility.SHARED
    status: DocumentStatus
    version: str
    content_hash: str | None = None
    chunk_count: int = 0
    page_count: int | None = None
    error: str | None = None
    tags: tuple[str, ...] = ()
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime


# --- retrieval -----------------------------------------------------------------------------------


class Comparison(Frozen):
    """One `{"key": ..., "value": ...}` operand of the Bedrock Knowledge Bases filter grammar."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    value: AttributeValue


COMPARISON_OPERATORS = (
    "equals",
    "notEquals",
    "greaterThan",
    "greaterThanOrEquals",
    "lessThan",
    "lessThanOrEquals",
    "in",
    "notIn",
    "startsWith",
    "stringContains",
    "listContains",
)
LOGICAL_OPERATORS = ("andAll", "orAll")


class Filter(BaseModel):
    """A metadata filter in the Bedrock Knowledge Bases grammar: exactly one operator per object.

    Example: `{"andAll": [{"equals": {"key": "source", "value": "wiki"}},
    {"greaterThan": {"key": "year", "value": 2020}}]}`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    equals: Comparison | None = None
    notEquals: Comparison | None = None  # noqa: N815 - the wire names are Bedrock's
    greaterThan: Comparison | None = None  # noqa: N815
    greaterThanOrEquals: Comparison | None = None  # noqa: N815
    lessThan: Comparison | None = None  # noqa: N815
    lessThanOrEquals: Comparison | None = None  # noqa: N815
    in_: Comparison | None = Field(default=None, alias="in")
    notIn: Comparison | None = None  # noqa: N815
    startsWith: Comparison | None = None  # noqa: N815
    stringContains: Comparison | None = None  # noqa: N815
    listContains: Comparison | None = None  # noqa: N815
    andAll: list[Filter] | None = Field(default=None, min_length=1, max_length=20)  # noqa: N815
    orAll: list[Filter] | None = Field(default=None, min_length=1, max_length=20)  # noqa: N815

    @model_validator(mode="after")
    def _exactly_one_operator(self) -> Filter:
        operators = [name for name in self.model_fields_set if getattr(self, name) is not None]
        if len(operators) != 1 or len(self.model_fields_set) != 1:
            raise ValueError(
                "a filter object must have exactly one operator, one of: "
                + ", ".join(COMPARISON_OPERATORS + LOGICAL_OPERATORS)
            )
        return self

    @property
    def operator(self) -> str:
        """The wire name of the single operator this object holds."""
        name = next(iter(self.model_fields_set))
        return "in" if name == "in_" else name

    @property
    def operand(self) -> Any:
        """The operator's argument: a Comparison or a list of Filters."""
        return getattr(self, next(iter(self.model_fields_set)))

    def keys(self) -> set[str]:
        """Every metadata key this filter tree names."""
        operand = self.operand
        if isinstance(operand, Comparison):
            return {operand.key}
        return set().union(*(child.keys() for child in operand))


class SearchRequest(Frozen):
    """What a caller asks of retrieval. The tenant is deliberately absent: it comes from the Caller."""

    query: Annotated[str, StringConstraints(min_length=1, max_length=10_000)]
    top_k: int = Field(default=5, ge=1, le=50)
    min_score: float = Field(default=0.0, ge=0.0, le=1.0)
    max_sources: int | None = Field(default=None, ge=1, le=50)
    filters: Filter | None = None


class SearchHit(Frozen):
    """A ranked chunk. `score` is the fused reciprocal-rank score scaled so 1.0 is rank 1 everywhere."""

    chunk: Chunk
    score: float
    vector_score: float | None = None
    keyword_score: float | None = None


class Citation(Frozen):
    """A quoted span backing one `[n]` marker; `quote` is verbatim text of the cited chunk."""

    source: int = Field(ge=1, description="The n of the [n] marker; 1-based index into `sources`.")
    doc_id: str
    chunk_id: str
    path: str
    title: str
    page: int | None = None
    section: str | None = None
    quote: str
    score: float


class Answer(Frozen):
    """An answer whose every [n] marker resolves to a citation from the given sources."""

    answer: str
    citations: list[Citation]
    sources: list[SearchHit]
    grounded: bool = Field(description="False when no source was relevant enough to answer from.")
    usage: dict[str, int] | None = Field(
        default=None, description="Model token usage (input_tokens, output_tokens, total_tokens), if a model ran."
    )
