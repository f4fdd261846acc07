"""Pydantic models shared by the API, the ingestion pipeline and every index adapter.

One set of models keeps the local mode and AWS mode honest: a chunk indexed by the CLI has exactly the
shape of a chunk indexed by the ingest Lambda, and the API schema is generated from the same classes.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AllowInfNan,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from citewise.domain.versions import ACCEPTED, MAX_VERSION_CHARS, VERSION_PATTERN, VersionKey

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
TenantId = Annotated[str, StringConstraints(pattern=TENANT_ID_PATTERN)]
UserId = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]
AttributeValue = str | int | float | bool | list[str]
Vector = list[float]
SearchMode = Literal["hybrid", "bm25", "vector"]
"""Keyword (BM25) and vector retrieval fused, or one of them alone."""

SourceName = Annotated[
    str,
    Field(
        description="The user-facing origin of the content (`jira`, `confluence`): the metadata `source` (key "
        "configurable), else the first folder of the path, else empty. Records written before `channel` existed hold "
        "the channel here (and an empty `channel`) until their next ingest."
    ),
]
ChannelName = Annotated[
    str,
    Field(description="How the document arrived: `s3`, `local` (the API's local store), `folder` (`citewise ingest`)."),
]
SourceDate = Annotated[
    datetime | None,
    Field(
        description="When the content itself last changed (UTC, to the second): the metadata `updated_at` (key "
        "configurable), else the format's own date, else the object's last-modified time. Filters compare it as an "
        "ISO-8601 string (`2026-03-03T00:00:00+00:00`)."
    ),
]


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
    read_only: bool = False
    """A program's credential of scope `read` (`citewise.domain.credentials`): it may read what the user
    reads, and change nothing (`citewise.domain.access.may_write`)."""
    credential_id: str | None = None
    """The credential a program's request was made with (its user is the credential's service user);
    None for a person. What an audit record names beside the user."""


class Operator(Frozen):
    """The platform operator: an authenticated identity outside every tenant (docs/operations.md).

    A separate type, not a Caller without a tenant: no function that reads or writes a tenant's data
    takes one, so an operator route cannot reach tenant data by accident, and no tenant route can be
    handed an operator."""

    user_id: UserId


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
    source_date: datetime | None = None
    """When the content last changed, as the format declares it (front matter, HTML meta, PDF/docx properties)."""


# --- documents and chunks ------------------------------------------------------------------------


class DocumentMetadata(Frozen):
    """Document-level fields denormalised onto every chunk so one filtered query needs no join."""

    tenant_id: TenantId
    doc_id: str
    owner: str
    visibility: Visibility = Visibility.SHARED
    source: SourceName
    channel: ChannelName = ""
    source_date: SourceDate = None
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
    source: SourceName
    channel: ChannelName = ""
    source_date: SourceDate = None
    title: str | None = None
    owner: str
    visibility: Visibility = Visibility.SHARED
    status: DocumentStatus
    version: str
    content_hash: str | None = None
    chunk_count: int = 0
    page_count: int | None = None
    char_count: int | None = Field(default=None, description="Characters of the parsed text (None before parsing).")
    content_type: str | None = Field(
        default=None, description="The media type the document was stored with, if it had one."
    )
    size_bytes: int | None = Field(
        default=None, ge=0, description="Bytes of the stored original (the version this record describes)."
    )
    error: str | None = None
    tags: tuple[str, ...] = ()
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime


# --- retrieval -----------------------------------------------------------------------------------


MAX_FILTER_BRANCHES = 20
"""Filters in one `andAll` or `orAll`."""
MAX_FILTER_DEPTH = 8
"""Levels of a filter tree (a comparison alone is 1): the evaluators recurse once per level."""
SCHEMA_GROUP_BRANCHES = 5
"""Filters in an `andAll`/`orAll` nested in another, as the OpenAPI document spells the tree out (see
`Filter.__get_pydantic_json_schema__`)."""
MAX_FILTER_NODES = 1 + MAX_FILTER_BRANCHES + MAX_FILTER_BRANCHES * SCHEMA_GROUP_BRANCHES
"""Filter objects in one tree, counting every level (121): exactly the largest tree the OpenAPI document's
form allows. Each object becomes at most three query clauses on OpenSearch
(`index.opensearch_queries.translate_filter`), so a whole tree stays far below
`indices.query.bool.max_clause_count` (1024 by default) with the access filter added; and the local index
evaluates a tree per candidate chunk, so its size is its cost."""
MAX_FILTER_LIST_VALUES = 1000
"""Strings in one list value (`in`, `notIn`, a list `equals`): far below OpenSearch's `index.max_terms_count`
(65536 by default) for the one `terms` query a list becomes."""
MAX_FILTER_STRING = 1024
"""Characters of a string value: `stringContains` becomes a wildcard whose automaton grows with it (OpenSearch
refuses one of more than 10000 states), and stored strings longer than 8191 characters are not filterable."""
MAX_FILTER_NUMBER = 2**53
"""Numbers in filters lie within +-2**53: OpenSearch compares them as doubles, which hold every integer up to
here exactly, so a comparison decides the same on AWS as in the local index (which compares exactly)."""

FilterString = Annotated[str, StringConstraints(max_length=MAX_FILTER_STRING)]
FilterValue = (
    FilterString
    | Annotated[int, Field(ge=-MAX_FILTER_NUMBER, le=MAX_FILTER_NUMBER)]
    | Annotated[float, Field(ge=-MAX_FILTER_NUMBER, le=MAX_FILTER_NUMBER), AllowInfNan(False)]
    | bool
    | Annotated[list[FilterString], Field(max_length=MAX_FILTER_LIST_VALUES)]
)


class Comparison(Frozen):
    """One `{"key": ..., "value": ...}` operand of the Bedrock Knowledge Bases filter grammar."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    value: FilterValue

    @field_validator("value", mode="before")
    @classmethod
    def _integer_within_range(cls, value: Any) -> Any:
        # Checked before the union, whose float branch would otherwise take 2**53 + 1 as 2**53 rounded.
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FILTER_NUMBER:
            raise ValueError(f"numbers in filters must lie within -2^53 and 2^53 ({MAX_FILTER_NUMBER})")
        return value


class VersionComparison(Comparison):
    """The operand of a version operator: a version attribute and a version string (docs/versions.md)."""

    key: VersionKey
    value: Annotated[str, StringConstraints(max_length=MAX_VERSION_CHARS, pattern=VERSION_PATTERN)]

    @field_validator("value", mode="before")
    @classmethod
    def _a_version(cls, value: Any) -> Any:
        # Said before the pattern's own message, which does not say what a version is.
        if not isinstance(value, str):
            raise ValueError('a version operator takes a version string, such as "3.12"')
        if len(value) <= MAX_VERSION_CHARS and not re.fullmatch(VERSION_PATTERN, value):
            raise ValueError(f"{value!r} is not a version: {ACCEPTED}")
        return value


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
VERSION_OPERATORS = {
    "versionEquals": "equals",
    "versionNotEquals": "notEquals",
    "versionGreaterThan": "greaterThan",
    "versionGreaterThanOrEquals": "greaterThanOrEquals",
    "versionLessThan": "lessThan",
    "versionLessThanOrEquals": "lessThanOrEquals",
}
"""Comparisons of versions as versions (`citewise.domain.versions`), each by the plain comparison it mirrors:
on the keys `versions.VERSION_KEYS` only, with a version string as the value (`VersionComparison`, docs/versions.md)."""
LOGICAL_OPERATORS = ("andAll", "orAll")


class Filter(BaseModel):
    """A metadata filter in the Bedrock Knowledge Bases grammar: exactly one operator per object.

    Example: `{"andAll": [{"equals": {"key": "source", "value": "wiki"}},
    {"greaterThan": {"key": "year", "value": 2020}}]}`. `version...` operators compare `version`,
    `introduced_in` or `deprecated_in` as versions (`3.9 < 3.12`).
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
    versionEquals: VersionComparison | None = None  # noqa: N815
    versionNotEquals: VersionComparison | None = None  # noqa: N815
    versionGreaterThan: VersionComparison | None = None  # noqa: N815
    versionGreaterThanOrEquals: VersionComparison | None = None  # noqa: N815
    versionLessThan: VersionComparison | None = None  # noqa: N815
    versionLessThanOrEquals: VersionComparison | None = None  # noqa: N815
    andAll: list[Filter] | None = Field(default=None, min_length=1, max_length=MAX_FILTER_BRANCHES)  # noqa: N815
    orAll: list[Filter] | None = Field(default=None, min_length=1, max_length=MAX_FILTER_BRANCHES)  # noqa: N815

    @model_validator(mode="before")
    @classmethod
    def _known_operators(cls, data: Any) -> Any:
        # Said before pydantic's "extra inputs are not permitted", which does not say what is permitted.
        if isinstance(data, dict) and (unknown := sorted(set(data) - {*cls.operators(), *cls.model_fields})):
            raise ValueError(f"unknown filter operator {unknown[0]!r}; the operators are: {', '.join(cls.operators())}")
        return data

    @classmethod
    def operators(cls) -> list[str]:
        """The operators a filter object may hold, by their wire names (the fields' aliases)."""
        return [info.alias or name for name, info in cls.model_fields.items()]

    @model_validator(mode="after")
    def _exactly_one_operator_within_the_limits(self) -> Filter:
        operators = [name for name in self.model_fields_set if getattr(self, name) is not None]
        if len(operators) != 1 or len(self.model_fields_set) != 1:
            raise ValueError("a filter object must have exactly one operator, one of: " + ", ".join(self.operators()))
        # Checked at every level as the tree is validated bottom-up, so an oversized tree is refused at the
        # first subtree over a limit; both walks stop at the depth limit of the children.
        if self.depth > MAX_FILTER_DEPTH:
            raise ValueError(f"a filter may nest at most {MAX_FILTER_DEPTH} levels deep")
        if self.node_count > MAX_FILTER_NODES:
            raise ValueError(
                f"a filter may hold at most {MAX_FILTER_NODES} filter objects in all (this one holds {self.node_count})"
            )
        return self

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """A schema whose every filter the validator accepts: one operator per object, never null, and a tree
        spelled out level by level, since JSON Schema cannot count a tree's objects: a comparison, or an
        andAll/orAll of up to MAX_FILTER_BRANCHES comparisons or groups, a group being an andAll/orAll of up
        to SCHEMA_GROUP_BRANCHES comparisons. That form reaches MAX_FILTER_NODES exactly; the description
        states the validator's own (wider) rule for clients that count.

        Pydantic would describe thirteen optional, nullable properties, which reads as "any of them, in any
        number, null allowed", and a recursion without end.
        """
        schema = handler.resolve_ref_schema(handler(core_schema))
        operands = {
            name: next(option for option in operand.get("anyOf", [operand]) if option.get("type") != "null")
            for name, operand in schema.pop("properties").items()
        }

        def level(widths: tuple[int, ...]) -> JsonSchemaValue:
            """Filters whose andAll/orAll hold up to widths[0] filters of the next level (none: comparisons).

            One object of optional properties with exactly one present, rather than a oneOf of single-property
            objects: the same rule, and a fraction of the cases a schema-driven generator derives from it."""
            properties = {name: operand for name, operand in operands.items() if name not in LOGICAL_OPERATORS}
            if widths:
                children = {"type": "array", "items": level(widths[1:]), "minItems": 1, "maxItems": widths[0]}
                properties |= dict.fromkeys(LOGICAL_OPERATORS, children)
            return {
                "type": "object",
                "properties": properties,
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": False,
            }

        schema.pop("additionalProperties", None)
        schema.update(level((MAX_FILTER_BRANCHES, SCHEMA_GROUP_BRANCHES)))
        schema["description"] = (
            f"{schema.get('description', '')}\n\nLimits: at most {MAX_FILTER_NODES} filter objects in all, "
            f"nested at most {MAX_FILTER_DEPTH} levels deep, {MAX_FILTER_BRANCHES} filters per andAll/orAll, "
            f"{MAX_FILTER_LIST_VALUES} strings per list, {MAX_FILTER_STRING} characters per string, numbers within "
            f"+-2^53. This schema spells out the part of that a schema can: groups (an andAll/orAll inside "
            f"another) of at most {SCHEMA_GROUP_BRANCHES} comparisons; the API also takes deeper and wider groups "
            "within the limits."
        )
        return schema

    @property
    def children(self) -> list[Filter]:
        """The filters under an `andAll` or `orAll`; none under a comparison."""
        operand = self.operand
        return [] if isinstance(operand, Comparison) else list(operand)

    @property
    def node_count(self) -> int:
        """Filter objects in this tree, this one included."""
        return 1 + sum(child.node_count for child in self.children)

    @property
    def depth(self) -> int:
        """Levels of this tree: 1 for a comparison."""
        return 1 + max((child.depth for child in self.children), default=0)

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

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        # What Swagger UI's "Try it out" pre-fills: a request that runs as it is.
        json_schema_extra={
            "examples": [
                {
                    "query": "How is tenant isolation enforced?",
                    "top_k": 5,
                    "filters": {"equals": {"key": "source", "value": "handbook"}},
                }
            ]
        },
    )

    query: Annotated[str, StringConstraints(min_length=1, max_length=10_000)] = Field(
        description="The question (or search text). The router may take constraint phrases out of it."
    )
    top_k: int = Field(default=5, ge=1, le=50, description="How many chunks to retrieve at most.")
    min_score: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Leave out chunks whose `relevance_score` (the calibrated probability of relevance) is below "
        "this: on the held-out data 0.5 keeps hits of which about half or more are relevant (docs/api.md).",
    )
    max_sources: int | None = Field(
        default=None, ge=1, le=50, description="Chunks from at most this many documents (default: `top_k`)."
    )
    filters: Filter | None = Field(
        default=None,
        description="Metadata conditions ANDed inside your access; they only narrow what you can read.",
    )
    route: bool = Field(
        default=True,
        description="Let the router turn constraint phrases of the query (dates, sources, ids) into filters; "
        "false searches the whole text with your filters only. See `routing` in the response.",
    )


# Every MCP tool list carries this schema twice (rag_query's and search's output): its names say what
# they hold, so only `reason` has a description.
class FilterFallback(Frozen):
    """Why the routed filter was dropped and the question searched as written (your filters still apply)."""

    reason: Literal["NO_MATCH", "WEAKER"] = Field(
        description="NO_MATCH: it matched nothing you may read; WEAKER: its best hit was far weaker than without it."
    )
    message: str
    dropped_filters: dict[str, Any]
    dropped_phrases: list[str]


CONVERSATION_ID_PATTERN = r"^c[0-9a-f]{28}$"
"""`c`, 12 hex digits of the creation time in milliseconds and 16 random ones (`citewise.ports.conversations`)."""


class QueryRequest(SearchRequest):
    """What a caller asks of /v1/query: a search request, optionally as a turn of a conversation, and whether
    to answer with server-sent events."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"query": "How is tenant isolation enforced?", "top_k": 5},
                {"query": "And what does it cost?", "conversation_id": "c01a21d6c8ac704f0c16216b41115"},
            ]
        },
    )

    conversation_id: str | None = Field(
        default=None,
        pattern=CONVERSATION_ID_PATTERN,
        description="Ask in this conversation of yours (the id a previous answer returned): a follow-up is "
        "rewritten into a standalone question first. Absent: a new conversation is started and its id returned. "
        "Another user's conversation, or an unknown one: 404 NOT_FOUND.",
    )
    stream: bool = Field(
        default=False,
        description="Answer with server-sent events (as `Accept: text/event-stream` asks): sources, text as "
        "it is written, citations once verified, then the answer this call returns otherwise (docs/api.md).",
    )


# Carried twice by every MCP tool list, as FilterFallback is: docs/versions.md says what the fields hold.
class VersionPreference(Frozen):
    """The versions the question names: documents valid for them were ranked first (docs/versions.md)."""

    versions: list[str]
    phrases: list[str]
    demoted_documents: list[str] = Field(default_factory=list)


class Routing(Frozen):
    """What the router did with the query: it can only narrow (its filters are ANDed inside yours)."""

    applied_filters: dict[str, Any] | None = Field(
        default=None,
        description="The filter the router added, in the filter grammar (dates ANDed, sources ORed); it is ANDed "
        "with your `filters` inside your access.",
    )
    consumed_phrases: list[str] = Field(
        default_factory=list, description="Phrases taken out of the searched text because they became filters."
    )
    pinned_documents: list[str] = Field(
        default_factory=list, description="Ids of documents carrying an identifier of the query, ranked first."
    )
    router: str = Field(
        description="Which router produced this: `deterministic`, `bedrock` (the LLM router), or `off` (routing "
        "disabled by the request or settings)."
    )
    fallback: str | None = Field(
        default=None,
        description="Set when routing fell back: the configured router failed and the deterministic one answered "
        "(e.g. `bedrock: THROTTLED`), or routing ran past its time budget and the question was searched unrouted "
        "(`deterministic: TIMEOUT ...`). The query never fails for it.",
    )
    filter_fallback: FilterFallback | None = Field(
        default=None, description="Set when the routed filter was dropped: `applied_filters` is then empty."
    )
    versions: VersionPreference | None = Field(
        default=None,
        description="Set when the question names a version and some candidate declares versions: documents "
        "valid for it ranked first, `demoted_documents` after them.",
    )


class Reranking(Frozen):
    """What the reranker did with the fused candidates (absent when no reranker is configured)."""

    reranker: str = Field(description="The reranker model, e.g. `amazon.rerank-v1:0`.")
    candidates: int = Field(ge=0, description="How many of the best fused hits it was asked to reorder.")
    fallback: str | None = Field(
        default=None,
        description="Set when the reranker failed and the fused order was kept: why (e.g. `THROTTLED`). The query "
        "never fails for it.",
    )


class ScoreComponents(Frozen):
    """How a hit's score was made: the fused score, the ranking signals (None when off) and the result."""

    fused: float = Field(
        description="The fusion of the keyword and vector rankings, 0-1 (method: CITEWISE_FUSION_METHOD)."
    )
    freshness: float | None = Field(
        default=None, description="0.5 ** (age of source_date / half-life); null when the signals are off."
    )
    credibility: float | None = Field(
        default=None, description="The tenant's weight of the hit's source (1 when unlisted); null when off."
    )
    feedback: float | None = Field(
        default=None, description="Users' feedback on the hit's source (0-1; 0.5 until rated enough); null when off."
    )
    final: float = Field(description="The score the hit is ranked by (`score`).")


class SearchHit(Frozen):
    """A ranked chunk. `score` is the fused score the hits are ordered by (0-1, relative to this query's
    lists), re-scored by the tenant's ranking signals when they are on (`components` says how);
    `relevance_score` is the calibrated probability that the chunk is relevant, comparable across queries."""

    chunk: Chunk
    score: float = Field(description="The fused score hits are ordered by; its top is near 1.0 for every query.")
    relevance_score: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Calibrated probability (0-1) that the chunk is relevant, from its cosine and BM25 evidence; "
        "`min_score` applies to it (docs/api.md says what 0.5 / 0.7 / 0.9 keep).",
    )
    vector_score: float | None = None
    keyword_score: float | None = None
    components: ScoreComponents | None = None
    rerank_score: float | None = Field(
        default=None,
        description="The reranker's relevance of the chunk to the query when a reranker ordered it; `score` stays the "
        "fused score.",
    )


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


NoticeCode = Literal["NO_DOCUMENTS", "NO_FILTER_MATCH", "NOT_FOUND", "NOT_GROUNDED"]


class Notice(Frozen):
    """Why an answer is not a grounded one: `code` for programs, `message` (with a hint) for people."""

    code: NoticeCode = Field(
        description="NO_DOCUMENTS: nothing is indexed that you may read; NO_FILTER_MATCH: your filters (or the "
        "routed ones) matched no document; NOT_FOUND: no retrieved passage answers the question; NOT_GROUNDED: "
        "the answer has sentences no cited source supports.",
        examples=["NO_DOCUMENTS"],
    )
    message: str = Field(examples=["No documents are indexed for you yet: upload or ingest some first."])


class Answer(Frozen):
    """An answer whose every [n] marker resolves to a citation from the given sources."""

    answer: str
    citations: list[Citation]
    sources: list[SearchHit]
    grounded: bool = Field(
        description="True only when every sentence of the answer cites a source that supports it; false when "
        "nothing relevant was found (the answer says so) or some sentence is unsupported (`notice` says which)."
    )
    notice: Notice | None = Field(default=None, description="Why the answer is not grounded; null when it is.")
    usage: dict[str, int] | None = Field(
        default=None, description="Model token usage (input_tokens, output_tokens, total_tokens), if a model ran."
    )
    routing: Routing | None = None
    reranking: Reranking | None = None
