"""The tools: what an agent sees of each (`definitions`) and one call for a `Caller` (`call`).

Every tool reads; none creates, changes or deletes anything. Each runs the library's own logic, as the
REST routes do: `answer_question` and the `Retriever` (the index applies the caller's tenant and access
filter; a filter the caller or a profile adds is ANDed inside it), the registry listing with
`visible_to`, and `visible_document` (`citewise.domain.access.may_read`: another tenant's document or
another user's private one is NOT_FOUND, like one that does not exist).

A call always ends as a tool result, never a protocol error. A result carries `structuredContent` (valid
against the tool's `outputSchema`) and the same as readable text. A failure is `isError: true` with text
only (`render_error`): its `CODE: message`, the request id, and the REST API's error body
`{"error": {code, message, details, request_id}}` as a JSON line (citewise's stable codes, plus
UNKNOWN_TOOL for a name that is neither a built-in tool nor a configured profile). It has no
`structuredContent`, which the protocol allows on errors: a tool's `outputSchema` describes its result,
and clients (the MCP Inspector, the SDKs) reject structured content that does not match it, so the
agent would never see the code. Failures are logged through the module's logger, whose records carry the
request's correlation id (on Lambda and in `citewise mcp`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pydantic

from citewise.domain.errors import CitewiseError, NotFoundError, ValidationError, error_body
from citewise.domain.models import Answer, Caller, Filter, Frozen, SearchRequest
from citewise.ingest.chunking import chunk_id
from citewise.ingest.documents import visible_document
from citewise.mcp.profiles import ToolProfile
from citewise.mcp.schemas import (
    NEW_CONVERSATION,
    DocumentDetail,
    DocumentInfo,
    DocumentPageResult,
    GetDocumentArguments,
    ListDocumentsArguments,
    ListSourcesArguments,
    RagQueryArguments,
    RagQueryResult,
    SearchArguments,
    SearchResult,
    Source,
    SourceListResult,
    WebSource,
    ranked_hits,
    tool_schema,
)
from citewise.ports.audit import OK
from citewise.ports.conversations import TurnContext
from citewise.ports.synthesizer import AnswerDone, TextDelta
from citewise.query.answering import QueryEvent, SourcesFound, answer_question, stream_question
from citewise.query.metering import query_usage, search_usage
from citewise.runtime.observability import count_reranking
from citewise.runtime.services import Services

logger = logging.getLogger(__name__)

DEFAULT_MAX_SOURCES = 3
NOTHING_FOUND = "Nothing relevant found in the documents you can read."
Progress = Callable[[str], None]
"""Where a tool reports how a call is going (MCP progress notifications, when the client asked for them)."""
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
"""MCP tool annotations of every citewise tool: it reads your documents and changes nothing."""


class UnknownToolError(NotFoundError):
    """No built-in tool and no configured profile has this name."""

    code = "UNKNOWN_TOOL"


@dataclass(frozen=True)
class Tool:
    """One tool: its name and description, its argument and result models, and what runs it."""

    name: str
    title: str
    description: str
    arguments: type[Frozen]
    result: type[Frozen]
    run: Callable[..., tuple[Frozen, str]]
    """(structured result, readable text) for validated arguments."""
    argument_defaults: Mapping[str, object] = field(default_factory=dict)
    """Defaults shown in the input schema that the arguments model leaves as None (a profile's own)."""
    reports_progress: bool = False
    """Whether `run` takes a `progress` sink (the answer tools: their text as it is written)."""

    def definition(self) -> dict[str, Any]:
        """The tool as `tools/list` lists it (MCP `Tool`)."""
        schema = tool_schema(self.arguments, "validation")
        for name, default in self.argument_defaults.items():
            schema["properties"][name]["default"] = default
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": schema,
            "outputSchema": tool_schema(self.result, "serialization"),
            "annotations": {"title": self.title, **READ_ONLY},
        }


class Toolbox:
    """The built-in tools and the configured profiles, over the wired `services`."""

    def __init__(
        self,
        services: Services,
        *,
        profiles: Sequence[ToolProfile] = (),
        min_relevance_score: float = 0.0,
    ) -> None:
        self.services = services
        self.min_relevance_score = min_relevance_score
        builtin = [
            Tool(
                "rag_query",
                "Answer from your documents",
                "Answer a question from the user's documents (the ones they may read in their organisation), "
                "with [n] citation markers and, for each source, its path, title, relevance and the quoted "
                "span. Use it for questions the documents should answer; when nothing relevant is found the "
                "answer says so, with no sources. Read-only.",
                RagQueryArguments,
                RagQueryResult,
                partial(self._rag_query, profile=None),
                {"max_sources": DEFAULT_MAX_SOURCES},
                reports_progress=True,
            ),
            Tool(
                "search",
                "Search your documents",
                "Find the passages (chunks) of the user's documents that best match a query, ranked, with "
                "their scores, text, path and metadata. Retrieval only, no answer is written: use it to "
                "explore, to read around a citation, or to answer yourself from the passages. Read-only.",
                SearchArguments,
                SearchResult,
                self._search,
            ),
            Tool(
                "list_documents",
                "List your documents",
                "List the documents the user can read, by path, with their status (PENDING, INDEXED, "
                "FAILED), owner, visibility, counts and dates; filter by status, path prefix or source, "
                "and page with `cursor`. Read-only.",
                ListDocumentsArguments,
                DocumentPageResult,
                self._list_documents,
            ),
            Tool(
                "get_document",
                "Describe one document",
                "One document's record by id: path, title, type, owner, visibility, status, counts, dates, "
                "whether it has text, its last ingestion error and its chunk ids. Never its full text "
                "(use search for passages). Read-only.",
                GetDocumentArguments,
                DocumentDetail,
                self._get_document,
            ),
            Tool(
                "list_sources",
                "List your web sources",
                "The web sites whose pages feed the user's documents (sitemaps, crawled prefixes, URL lists): "
                "their category (the `source` of their documents), the version they are about, how often they "
                "are refreshed, and what their last refresh found (pages changed, new, removed, failed). "
                "Use it to tell how fresh an answer from the web can be. Read-only.",
                ListSourcesArguments,
                SourceListResult,
                self._list_sources,
            ),
        ]
        self.tools: dict[str, Tool] = {tool.name: tool for tool in builtin}
        for profile in profiles:
            self.tools[profile.name] = Tool(
                profile.name,
                profile.name.replace("_", " ").capitalize(),
                f"{profile.description} Answers with [n] citations like rag_query, from a fixed part of the "
                "user's documents. Read-only.",
                RagQueryArguments,
                RagQueryResult,
                partial(self._rag_query, profile=profile),
                {"max_sources": profile.max_sources},
                reports_progress=True,
            )

    def definitions(self) -> list[dict[str, Any]]:
        """Every tool, as `tools/list` answers."""
        return [tool.definition() for tool in self.tools.values()]

    def call(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, Any] | None,
        request_id: str,
        *,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """The MCP `CallToolResult` of tool `name` for `caller`: a result, or an error result, never a raise.
        Each call leaves one audit record (`mcp.<tool>`, the ids of the documents it returned). With
        `progress` (the client sent a progress token), an answer tool reports what it retrieved, then its
        answer's text as it is written."""
        tool = self.tools.get(name)
        question: str | None = None
        resources: list[str] = []
        try:
            if tool is None:
                raise UnknownToolError(
                    f"no tool named '{name}': call tools/list for the tools this server has",
                    details={"tool": name, "tools": sorted(self.tools)},
                )
            try:
                parsed = tool.arguments.model_validate(dict(arguments or {}))
            except pydantic.ValidationError as exc:
                raise invalid_arguments(exc) from exc
            question = getattr(parsed, "query", None)
            run = partial(tool.run, progress=progress) if tool.reports_progress and progress else tool.run
            result, text = run(caller, parsed)
            resources = document_ids(result)
        except CitewiseError as exc:
            outcome, reply = exc.code, self._error(name, exc, request_id)
        except Exception:  # a bug must still end as a tool result, never as a protocol crash
            logger.exception("tool failed", extra={"tool": name})
            error = CitewiseError("an internal error occurred")
            outcome, reply = error.code, self._error(name, error, request_id, logged=True)
        else:
            outcome = OK
            reply = {
                "content": [{"type": "text", "text": text}],
                "structuredContent": result.model_dump(mode="json"),
                "isError": False,
            }
        self.services.auditor.record(
            request_id=request_id,
            channel="mcp",
            # A name the client made up is not written to the trail: it is the client's text.
            action=f"mcp.{name}" if tool is not None else "mcp.unknown_tool",
            tenant_id=caller.tenant_id,
            user_id=caller.user_id,
            outcome=outcome,
            resources=resources,
            question=question,
        )
        return reply

    @staticmethod
    def _error(name: str, error: CitewiseError, request_id: str, *, logged: bool = False) -> dict[str, Any]:
        if not logged:
            logger.warning("tool error", extra={"tool": name, "code": error.code, "error_message": error.message})
        return {"content": [{"type": "text", "text": render_error(error, request_id)}], "isError": True}

    # --- the tools ----------------------------------------------------------------------------------------

    def _rag_query(
        self,
        caller: Caller,
        arguments: RagQueryArguments,
        profile: ToolProfile | None,
        progress: Progress | None = None,
    ) -> tuple[Frozen, str]:
        floor = profile.min_relevance_score if profile else 0.0
        sources = arguments.max_sources or (profile.max_sources if profile else DEFAULT_MAX_SOURCES)
        request = self._request(
            arguments.query,
            top_k=sources,
            max_sources=sources,
            min_score=max(floor, self._min_score(arguments.min_relevance_score)),
            filters=within(profile.scope if profile else None, arguments.filters),
        )
        answer, turn = self._answer(caller, request, profile, progress, arguments.conversation_id)
        result = RagQueryResult(
            answer=answer.answer,
            grounded=answer.grounded,
            sources=self._sources(caller, answer),
            tool=profile.name if profile else "rag_query",
            routing=answer.routing,
            reranking=answer.reranking,
            conversation=turn,
        )
        return result, render_answer(result)

    def _answer(
        self,
        caller: Caller,
        request: SearchRequest,
        profile: ToolProfile | None,
        progress: Progress | None,
        conversation_id: str | None,
    ) -> tuple[Answer, TurnContext | None]:
        """The one place an MCP answer is written: a profile's system prompt goes to the synthesizer; with a
        `conversation_id` (`new` starts one) the question is a turn of the caller's conversation, asked as
        its standalone question and recorded once answered."""
        instructions = profile.system_prompt if profile else None
        services = self.services
        services.quotas.admit_query(caller.tenant_id, generative=True)
        draft = None
        if conversation_id is not None:
            asked = None if conversation_id == NEW_CONVERSATION else conversation_id
            draft = services.conversations.begin(caller, asked, request.query)
            request = request.model_copy(update={"query": draft.standalone_question})
        if progress is None:
            answer = answer_question(
                services.retriever, services.synthesizer, caller, request, instructions=instructions
            )
        else:
            answer = _reported(
                stream_question(services.retriever, services.synthesizer, caller, request, instructions=instructions),
                progress,
            )
        if draft is not None:
            services.conversations.record(draft, answer)
        count_reranking(answer.reranking)
        services.meter.record(caller.tenant_id, query_usage(answer, "mcp"))
        return answer, draft.context if draft is not None else None

    def _sources(self, caller: Caller, answer: Answer) -> list[Source]:
        registry = self.services.registry
        sizes: dict[str, int | None] = {}
        for hit in answer.sources:
            doc_id = hit.chunk.document.doc_id
            if doc_id not in sizes:
                record = registry.get(caller.tenant_id, doc_id)
                sizes[doc_id] = record.char_count if record is not None else None
        return [
            Source(
                n=n,
                document_id=hit.chunk.document.doc_id,
                chunk_id=hit.chunk.chunk_id,
                path=hit.chunk.document.path,
                title=hit.chunk.document.title,
                char_count=sizes[hit.chunk.document.doc_id],
                relevance_score=hit.relevance_score,
                page=hit.chunk.page,
                section=hit.chunk.section,
                quotes=[citation.quote for citation in answer.citations if citation.source == n],
            )
            for n, hit in enumerate(answer.sources, start=1)
        ]

    def _search(self, caller: Caller, arguments: SearchArguments) -> tuple[Frozen, str]:
        request = self._request(
            arguments.query,
            top_k=arguments.top_k,
            min_score=self._min_score(arguments.min_relevance_score),
            filters=arguments.filters,
        )
        self.services.quotas.admit_query(caller.tenant_id, generative=False)
        retrieval = self.services.retriever.retrieve(caller, request)
        count_reranking(retrieval.reranking)
        self.services.meter.record(caller.tenant_id, search_usage(retrieval.reranking, "mcp"))
        result = SearchResult(
            hits=ranked_hits(retrieval.hits),
            routing=retrieval.routing,
            reranking=retrieval.reranking,
        )
        return result, render_hits(result)

    def _list_documents(self, caller: Caller, arguments: ListDocumentsArguments) -> tuple[Frozen, str]:
        filters = arguments.filters
        page = self.services.registry.list(
            caller.tenant_id,
            visible_to=caller.user_id,
            status=filters.status if filters else None,
            source=filters.source if filters else None,
            path_prefix=filters.path_prefix if filters else None,
            limit=arguments.limit,
            cursor=arguments.cursor,
        )
        result = DocumentPageResult(
            documents=[DocumentInfo.of(document) for document in page.items], next_cursor=page.next_cursor
        )
        return result, render_documents(result)

    def _get_document(self, caller: Caller, arguments: GetDocumentArguments) -> tuple[Frozen, str]:
        document = visible_document(self.services.registry, caller, arguments.document_id)
        result = DocumentDetail(
            **DocumentInfo.of(document).model_dump(),
            has_text=document.chunk_count > 0,
            error=document.error,
            attributes=dict(document.attributes),
            chunk_ids=[chunk_id(document.doc_id, ordinal) for ordinal in range(document.chunk_count)],
        )
        return result, render_document(result)

    def _list_sources(self, caller: Caller, arguments: ListSourcesArguments) -> tuple[Frozen, str]:
        sources = self.services.sources.tenant_sources(caller.tenant_id)
        result = SourceListResult(sources=[WebSource.of(source) for source in sources])
        return result, render_sources(result)

    def _min_score(self, requested: float | None) -> float:
        return self.min_relevance_score if requested is None else requested

    @staticmethod
    def _request(query: str, **fields: Any) -> SearchRequest:
        try:
            return SearchRequest(query=query, **fields)
        except pydantic.ValidationError as exc:
            raise invalid_arguments(exc) from exc


def _reported(events: Iterator[QueryEvent], progress: Progress) -> Answer:
    """The answer a stream ends with, its retrieval and its text reported to `progress` on the way."""
    for event in events:
        if isinstance(event, SourcesFound):
            progress(f"Retrieved {len(event.hits)} passages.")
        elif isinstance(event, TextDelta):
            progress(event.text)
        elif isinstance(event, AnswerDone):
            return event.answer
    raise RuntimeError("the answer stream ended without its answer")


def document_ids(result: Frozen) -> list[str]:
    """The ids of the documents a tool's result shows: what its audit record lists."""
    if isinstance(result, RagQueryResult):
        return [source.document_id for source in result.sources]
    if isinstance(result, SearchResult):
        return [hit.document_id for hit in result.hits]
    if isinstance(result, DocumentPageResult):
        return [document.document_id for document in result.documents]
    if isinstance(result, DocumentDetail):
        return [result.document_id]
    return []


def within(scope: Filter | None, filters: Filter | None) -> Filter | None:
    """A profile's scope ANDed with the caller's filters: the result only ever narrows either."""
    if scope is None or filters is None:
        return scope or filters
    try:
        return Filter(andAll=[scope, filters])
    except pydantic.ValidationError as exc:
        raise ValidationError(
            "the filters are too large inside this tool's scope", details={"field": "filters"}
        ) from exc


def invalid_arguments(error: pydantic.ValidationError) -> ValidationError:
    """VALIDATION_ERROR with where and why each argument failed (never the rejected input itself)."""
    problems = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in error.errors(include_url=False)
    ]
    return ValidationError("the arguments are invalid", details={"errors": problems})


# --- readable text -------------------------------------------------------------------------------------------


def render_error(error: CitewiseError, request_id: str) -> str:
    """`CODE: message`, the request id, then the REST API's error body as one JSON line, so an agent reads
    what went wrong and a program parses the last line as it parses an API error."""
    _, body = error_body(error, request_id)
    return f"{error.code}: {error.message}\nrequest_id: {request_id}\n{json.dumps(body, separators=(',', ':'))}"


def render_answer(result: RagQueryResult) -> str:
    """The answer, then its sources: `[n] path (title), page p, section s - relevance r`; then the
    conversation to continue, when it is a turn of one."""
    turn = result.conversation
    where = (
        f"\n\nConversation: {turn.conversation_id} (turn {turn.turn}; searched as: {turn.standalone_question})"
        if turn
        else ""
    )
    if not result.sources:
        return result.answer + where
    lines = [result.answer, "", "Sources:"]
    for source in result.sources:
        lines.append(
            f"[{source.n}] {_place(source.path, source.title, source.page, source.section)}"
            f" - relevance {source.relevance_score:.2f}"
        )
        lines.extend(f'    "{quote}"' for quote in source.quotes)
    return "\n".join(lines) + where


def render_hits(result: SearchResult) -> str:
    if not result.hits:
        return NOTHING_FOUND
    return "\n\n".join(
        f"{hit.rank}. {_place(hit.path, hit.title, hit.page, hit.section)} - relevance {hit.relevance_score:.2f}"
        f" (chunk {hit.chunk_id})\n{hit.text}"
        for hit in result.hits
    )


def render_documents(result: DocumentPageResult) -> str:
    if not result.documents:
        return "No documents."
    lines = [
        f"{d.document_id}  {d.status.value:<8} {d.chunk_count:>5} chunks  {d.visibility.value:<7}  {d.path}"
        for d in result.documents
    ]
    if result.next_cursor:
        lines.append(f"More: call again with cursor={result.next_cursor}")
    return "\n".join(lines)


def render_sources(result: SourceListResult) -> str:
    if not result.sources:
        return "No web sources."
    lines = []
    for s in result.sources:
        where = s.url or f"{s.listed_urls} URLs"
        state = "refreshing" if s.refreshing else f"next refresh {s.next_refresh_at:%Y-%m-%d %H:%M} UTC"
        last = s.last_refresh
        if last is not None:
            state += (
                f"; last {last.finished_at:%Y-%m-%d %H:%M}: {last.changed} changed, {last.new} new, "
                f"{last.removed} removed, {last.failed} failed"
            )
        version = f" version {s.version}" if s.version else ""
        lines.append(f"{s.source_id}  {s.category.value}{version}  {where}  ({state})")
    return "\n".join(lines)


def render_document(result: DocumentDetail) -> str:
    shown = result.model_dump(mode="json", exclude={"chunk_ids"})
    lines = [f"{key}: {value}" for key, value in shown.items() if value not in (None, [], {})]
    if result.chunk_ids:
        lines.append(f"chunk_ids: {result.chunk_ids[0]} ... {result.chunk_ids[-1]}")
    return "\n".join(lines)


def _place(path: str, title: str, page: int | None, section: str | None) -> str:
    where = f"{path} ({title})"
    if page is not None:
        where += f", page {page}"
    if section:
        where += f", section {section}"
    return where
