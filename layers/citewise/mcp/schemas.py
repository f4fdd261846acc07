"""Each tool's arguments and result as models: their JSON schemas are the tools' `inputSchema` and
`outputSchema`, and every field's description is what an agent reads to fill it in.

No argument names a tenant or a user: the caller comes from the identity. Paths are relative to the
tenant (`reports/q1.pdf`), never storage keys. Arguments reject unknown fields, as the REST API does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import CoreSchema

from citewise.domain.models import (
    CONVERSATION_ID_PATTERN,
    AttributeValue,
    Document,
    DocumentStatus,
    Filter,
    Frozen,
    Reranking,
    Routing,
    SearchHit,
    Visibility,
)
from citewise.domain.sources import RefreshStatus, SourceCategory, SourceKind
from citewise.domain.sources import Source as RegisteredSource
from citewise.domain.textutil import word_prefix
from citewise.ports.conversations import TurnContext
from citewise.ports.cursors import MAX_CURSOR_CHARS

MAX_SEARCH_TEXT_CHARS = 100_000
"""Characters of chunk text one search result carries in all. The result holds each hit's text twice (as
`content` text and in `structuredContent`), and a character can take 14 bytes in the HTTP response (a
character beyond the BMP is a 12-byte surrogate pair escape, escaped again in the Lambda response): 100,000
characters are at most 2.8 MB of the 6 MB a Lambda may answer. 50 hits of ordinary 2,000-character chunks
fit whole; only hits of maximal chunks (CITEWISE_CHUNK_CHARS) are shortened (docs/security.md, "Output
bounds")."""

Query = Annotated[str, StringConstraints(min_length=1, max_length=10_000)]
DocumentId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]

_FILTERS = (
    "Optional metadata filter (the Bedrock Knowledge Bases grammar), e.g. "
    '{"startsWith": {"key": "path", "value": "handbook/"}} or '
    '{"andAll": [{"equals": {"key": "source", "value": "wiki"}}, {"greaterThan": {"key": "year", "value": 2020}}]}. '
    "Keys: path, title, source, owner, visibility, tags, page, created_at, updated_at and the documents' own "
    "attributes. It only narrows what you can already read."
)
_SOURCE_VALUE = (
    "Where the content comes from (`jira`, `wiki`, `runbooks`): the document's `source` metadata, else the "
    "first folder of its path (`jira/PROJ-1.md` -> `jira`), else empty."
)
_SOURCE = f"Only documents of this source, matched exactly. {_SOURCE_VALUE}"
_MIN_SCORE = (
    "Leave out sources less relevant than this: 0 to 1, the calibrated probability that a source is relevant "
    "(0.5: about half or more of what is kept is relevant; 0.7 and 0.9 keep fewer, surer ones). "
    "Omit it for the server's default; a tool bound to a profile may impose a higher floor."
)


class ToolJsonSchema(GenerateJsonSchema):
    """Tool schemas without pydantic's `title` on each property, which only repeats the property's name
    (`"query": {"title": "Query", ...}`); descriptions stay."""

    def field_title_should_be_set(self, schema: CoreSchema) -> bool:
        return False


def tool_schema(model: type[BaseModel], mode: Literal["validation", "serialization"]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments (`validation`) or result (`serialization`), as listed."""
    return shared_definitions(model.model_json_schema(mode=mode, schema_generator=ToolJsonSchema))


def shared_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every object schema written out more than once defined once in `$defs` and referenced.

    The filter grammar spells its nested groups out under both andAll and orAll (a schema cannot count a
    tree's objects: `Filter`), and every copy costs each agent its bytes on every session. A shared schema
    is named after the definition and the property where it first occurs (`FilterAndAll`: the filters an
    andAll, or an orAll, of a `Filter` holds), largest first, until none repeats.
    """
    while True:
        found: dict[str, tuple[str, int]] = {}
        for owner, name, subschema in _object_schemas(schema, "", ""):
            text = json.dumps(subschema, sort_keys=True)
            first, count = found.get(text, (owner + name[:1].upper() + name[1:], 0))
            found[text] = (first, count + 1)
        repeated = [(len(text), text, name) for text, (name, count) in found.items() if count > 1]
        if not repeated:
            return schema
        _, text, name = max(repeated)
        definition = schema.setdefault("$defs", {})[name] = json.loads(text)
        schema = _referenced(schema, text, {"$ref": f"#/$defs/{name}"}, keep=definition)


def _object_schemas(schema: Any, owner: str, name: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(definition, property, schema) of each object schema inside `schema` but the named definitions."""
    if isinstance(schema, list):
        for item in schema:
            yield from _object_schemas(item, owner, name)
    elif isinstance(schema, dict):
        if "properties" in schema and name:
            yield owner, name, schema
        for key, value in schema.items():
            if key == "$defs":
                for defined, definition in value.items():
                    yield from _object_schemas(definition, defined, "")
            elif key == "properties":
                for property_name, property_schema in value.items():
                    yield from _object_schemas(property_schema, owner, property_name)
            else:
                yield from _object_schemas(value, owner, name)


def _referenced(schema: Any, text: str, reference: dict[str, str], keep: dict[str, Any]) -> Any:
    """`schema` with each occurrence of the schema whose JSON is `text` replaced by `reference`, except
    `keep` (its definition)."""
    if schema is keep:
        return {key: _referenced(value, text, reference, keep) for key, value in schema.items()}
    if isinstance(schema, dict):
        if "properties" in schema and json.dumps(schema, sort_keys=True) == text:
            return dict(reference)
        return {key: _referenced(value, text, reference, keep) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_referenced(item, text, reference, keep) for item in schema]
    return schema


def ranked_hits(hits: list[SearchHit]) -> list[Hit]:
    """`hits` ranked from 1, their texts within `MAX_SEARCH_TEXT_CHARS` together (`text_shares`)."""
    shares = text_shares([len(hit.chunk.text) for hit in hits], MAX_SEARCH_TEXT_CHARS)
    return [Hit.of(rank, hit, share) for rank, (hit, share) in enumerate(zip(hits, shares, strict=True), 1)]


def text_shares(lengths: list[int], budget: int) -> list[int]:
    """How many characters of each text fit `budget` together: shortest first, each takes its whole length
    or an equal share of what is left, so short texts stay whole and the long ones share the rest equally."""
    shares = [0] * len(lengths)
    left, waiting = budget, len(lengths)
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        shares[index] = min(lengths[index], left // waiting)
        left -= shares[index]
        waiting -= 1
    return shares


# --- arguments ------------------------------------------------------------------------------------------

NEW_CONVERSATION = "new"
"""`rag_query`'s `conversation_id` that starts a conversation."""


class RagQueryArguments(Frozen):
    """Arguments of `rag_query` and of every profile tool."""

    query: Query = Field(description="The question, in natural language, as the user would ask it.")
    max_sources: int | None = Field(
        default=None, ge=1, le=20, description="How many source passages to answer from (at most 20)."
    )
    min_relevance_score: float | None = Field(default=None, ge=0.0, le=1.0, description=_MIN_SCORE)
    filters: Filter | None = Field(default=None, description=_FILTERS)
    conversation_id: (
        Annotated[str, StringConstraints(pattern=f"{CONVERSATION_ID_PATTERN}|^{NEW_CONVERSATION}$")] | None
    ) = Field(
        default=None,
        description=f"Ask as a turn of a conversation: `{NEW_CONVERSATION}` starts one, and the result's "
        "`conversation.conversation_id` continues it (a follow-up is then rewritten into a standalone question). "
        "Omit it for a one-off question: nothing is kept.",
    )


class SearchArguments(Frozen):
    """Arguments of `search`."""

    query: Query = Field(description="What to look for: a question, keywords or a passage.")
    top_k: int = Field(default=5, ge=1, le=50, description="How many ranked chunks to return (at most 50).")
    min_relevance_score: float | None = Field(default=None, ge=0.0, le=1.0, description=_MIN_SCORE)
    filters: Filter | None = Field(default=None, description=_FILTERS)


class DocumentFilters(Frozen):
    """What `list_documents` narrows to; the filters are ANDed."""

    status: DocumentStatus | None = Field(
        default=None, description="Only documents in this state: PENDING (being indexed), INDEXED or FAILED."
    )
    path_prefix: Annotated[str, StringConstraints(max_length=950)] | None = Field(
        default=None, description="Only documents whose path starts with this, e.g. `handbook/`."
    )
    source: Annotated[str, StringConstraints(max_length=256)] | None = Field(default=None, description=_SOURCE)


class ListDocumentsArguments(Frozen):
    """Arguments of `list_documents`."""

    filters: DocumentFilters | None = Field(default=None, description="Optional status, path prefix and source.")
    limit: int = Field(default=20, ge=1, le=100, description="Documents per page (at most 100).")
    cursor: Annotated[str, StringConstraints(max_length=MAX_CURSOR_CHARS, pattern=r"^[A-Za-z0-9_-]+$")] | None = Field(
        default=None,
        description="`next_cursor` of the previous page, as given, with the same filters; omit for the first page.",
    )


class GetDocumentArguments(Frozen):
    """Arguments of `get_document`."""

    document_id: DocumentId = Field(description="The document's id (32 hex digits), as listed or cited.")


# --- results --------------------------------------------------------------------------------------------


class Source(Frozen):
    """One passage an answer was written from: `[n]` in the answer cites source n."""

    n: int = Field(description="The number of the [n] markers that cite this source.")
    document_id: str
    chunk_id: str
    path: str = Field(description="The document's path in your tenant.")
    title: str
    char_count: int | None = Field(description="Characters of the whole document's text.")
    relevance_score: float = Field(
        description="Calibrated probability (0 to 1) that this passage is relevant to the query."
    )
    page: int | None = None
    section: str | None = Field(default=None, description="The heading path, e.g. `Setup > Install`.")
    quotes: list[str] = Field(description="The spans the answer quotes from this source, verbatim (none if uncited).")


class RagQueryResult(Frozen):
    """An answer with [n] markers and the sources they cite."""

    answer: str = Field(description="The answer; every [n] marker cites source n.")
    grounded: bool = Field(
        description="True only when every sentence cites a source that supports it; false when nothing relevant "
        "was found (the answer says so, and why: no documents for you, or none that answers)."
    )
    sources: list[Source]
    tool: str = Field(description="The tool that answered (a profile's name, or rag_query).")
    routing: Routing | None = Field(default=None, description="What query routing did to the question, if it ran.")
    reranking: Reranking | None = Field(default=None, description="What the reranker did, if one is configured.")
    conversation: TurnContext | None = Field(
        default=None, description="The conversation this answer is a turn of (when one was asked for)."
    )


class Hit(Frozen):
    """One ranked chunk."""

    rank: int
    document_id: str
    chunk_id: str
    path: str = Field(description="The document's path in your tenant.")
    title: str
    relevance_score: float = Field(
        description="Calibrated probability (0 to 1) that this passage is relevant to the query."
    )
    vector_score: float | None = None
    keyword_score: float | None = None
    rerank_score: float | None = Field(default=None, description="The reranker's relevance, when one ordered the hits.")
    page: int | None = None
    section: str | None = None
    text: str = Field(description="The chunk's text (its first words only when `truncated`).")
    truncated: bool = Field(
        default=False,
        description="True when `text` is only the chunk's beginning: a result carries at most "
        f"{MAX_SEARCH_TEXT_CHARS:,} characters of text, shared fairly among its hits. Ask for fewer hits for more.",
    )
    source: str
    visibility: Visibility
    tags: list[str]
    attributes: dict[str, AttributeValue]

    @classmethod
    def of(cls, rank: int, hit: SearchHit, max_chars: int | None = None) -> Hit:
        """The hit, its text cut to the whole words within `max_chars` characters if it is longer."""
        chunk, document = hit.chunk, hit.chunk.document
        text = chunk.text if max_chars is None else word_prefix(chunk.text, max_chars)
        return cls(
            rank=rank,
            document_id=document.doc_id,
            chunk_id=chunk.chunk_id,
            path=document.path,
            title=document.title,
            relevance_score=hit.relevance_score,
            vector_score=hit.vector_score,
            keyword_score=hit.keyword_score,
            rerank_score=hit.rerank_score,
            page=chunk.page,
            section=chunk.section,
            text=text,
            truncated=len(text) < len(chunk.text),
            source=document.source,
            visibility=document.visibility,
            tags=list(document.tags),
            attributes=dict(document.attributes),
        )


class SearchResult(Frozen):
    """Ranked chunks, best first (retrieval only: no answer is written)."""

    hits: list[Hit]

    routing: Routing | None = Field(default=None, description="What query routing did to the query, if it ran.")
    reranking: Reranking | None = Field(default=None, description="What the reranker did, if one is configured.")


class DocumentInfo(Frozen):
    """A document's record: where it is in its lifecycle and what it produced."""

    document_id: str
    path: str = Field(description="The document's path in your tenant.")
    title: str | None
    content_type: str | None
    owner: str
    visibility: Visibility
    status: DocumentStatus
    source: str = Field(description=_SOURCE_VALUE)
    chunk_count: int
    page_count: int | None
    char_count: int | None
    tags: list[str]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, document: Document) -> DocumentInfo:
        return cls(
            document_id=document.doc_id,
            path=document.path,
            title=document.title,
            content_type=document.content_type,
            owner=document.owner,
            visibility=document.visibility,
            status=document.status,
            source=document.source,
            chunk_count=document.chunk_count,
            page_count=document.page_count,
            char_count=document.char_count,
            tags=list(document.tags),
            created_at=document.created_at,
            updated_at=document.updated_at,
        )


class ListSourcesArguments(Frozen):
    """Arguments of `list_sources`: none (a tenant has at most a hundred sources)."""


class LastRefresh(Frozen):
    """What a source's last refresh found (the REST API's `last_run` has every count)."""

    finished_at: datetime
    status: RefreshStatus
    changed: int
    new: int
    removed: int
    failed: int


class WebSource(Frozen):
    """A web source of your tenant: where its pages come from, what they are, and how fresh they are."""

    source_id: str
    name: str
    kind: SourceKind
    url: str | None = Field(description="The sitemap or crawled prefix; null for a list of URLs.")
    listed_urls: int
    category: SourceCategory = Field(description="Its documents' `source` value.")
    version: str | None = Field(description="Its pages' version, or the URL template it is read from.")
    refresh_hours: float
    next_refresh_at: datetime
    refreshing: bool
    last_refresh: LastRefresh | None

    @classmethod
    def of(cls, source: RegisteredSource) -> WebSource:
        spec = source.spec
        return cls(
            source_id=source.source_id,
            name=spec.name,
            kind=spec.kind,
            url=spec.url,
            listed_urls=len(spec.urls),
            category=spec.category,
            version=spec.version or spec.version_template,
            refresh_hours=spec.interval.total_seconds() / 3600,
            next_refresh_at=source.next_refresh_at,
            refreshing=source.running is not None,
            last_refresh=_last_refresh(source),
        )


def _last_refresh(source: RegisteredSource) -> LastRefresh | None:
    run = source.last_run
    if run is None or run.finished_at is None or run.status is None:
        return None
    done = run.summary
    return LastRefresh(
        finished_at=run.finished_at,
        status=run.status,
        changed=done.changed,
        new=done.new,
        removed=done.removed,
        failed=done.failed,
    )


class SourceListResult(Frozen):
    """Your tenant's web sources, oldest first."""

    sources: list[WebSource]


class DocumentPageResult(Frozen):
    """One page of the documents you can read, by path."""

    documents: list[DocumentInfo]
    next_cursor: str | None = Field(description="Pass it as `cursor` for the next page; null on the last page.")


class DocumentDetail(DocumentInfo):
    """A document's record with its chunks' ids and its last error; never its text."""

    has_text: bool = Field(description="Whether the document has searchable text (it produced chunks).")
    error: str | None = Field(description="Why the last ingestion failed, if it did.")
    attributes: dict[str, AttributeValue]
    chunk_ids: list[str] = Field(description="Its chunks' ids, in reading order (as `search` and citations name them).")
