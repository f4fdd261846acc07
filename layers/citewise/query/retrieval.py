"""Hybrid retrieval: BM25 and vector rankings, each inside the caller's access, fused (`query.fusion`).

The access filter is not built here from anything the user sends: the index port takes the `Caller`
and applies `tenant AND (shared OR owner)` itself; the user's filter can only narrow that. Fusion runs
in the client so it behaves the same on the local index, an OpenSearch domain and OpenSearch Serverless.
Every hit carries a calibrated `relevance_score` (`query.relevance`), which `min_score` applies to.
An optional reranker (`citewise.ports.reranker`) then reorders the best fused hits before the cut; if it
fails, the fused order stands and the retrieval says why. Until the cut the candidates are light
(`query.candidates`): `SearchHit`s are built, and chunks parsed, for the hits returned only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from citewise.domain.errors import CitewiseError, UnsupportedFilterError, ValidationError
from citewise.domain.models import (
    MAX_FILTER_BRANCHES,
    MAX_FILTER_STRING,
    Caller,
    Filter,
    FilterFallback,
    Reranking,
    Routing,
    SearchHit,
    SearchMode,
    SearchRequest,
    Vector,
)
from citewise.domain.tenant_settings import TenantSettings
from citewise.domain.textutil import content_terms, embedding_text, word_prefix
from citewise.ports.embedder import Embedder
from citewise.ports.feedback import SourceTally
from citewise.ports.index import ScoredChunk, VectorIndex
from citewise.ports.reranker import Reranker, reranked_order
from citewise.ports.router import Route, Router, RoutingContext
from citewise.query.candidates import Candidate
from citewise.query.fusion import Fusion, FusionMethod
from citewise.query.ranking import Signals, rescore
from citewise.query.relevance import estimates, relevance_scores
from citewise.query.routing import DEFAULT_ID_PATTERN, constraint_filter, source_vocabulary
from citewise.query.versioning import prefer_valid

logger = logging.getLogger(__name__)

# Keys that only the access filter may use: naming them in a user filter is refused outright, so a
# client can never believe it chose a tenant.
RESERVED_FILTER_KEYS = frozenset({"tenant_id", "tenant", "tenantId"})
MAX_KEYWORD_CHARS = 600
"""How much of the query text the BM25 ranking reads (whole words; the vector ranking reads it all).

OpenSearch turns each analyzed term of a `match` query into a clause, and refuses a query of more than
`indices.query.bool.max_clause_count` (1024) clauses: a 10,000-character question would be a 502 on AWS
while the local index answered it. A term takes at least one character (the standard tokenizer makes one
of each CJK ideograph), so 600 characters are at most 600 clauses, which leaves room for the largest
filter (`models.MAX_FILTER_NODES`, about 370 clauses with the access filter) and what routing adds to it
(`routing.MAX_ROUTED_NODES` objects, about 20 clauses). Both backends read the same
prefix, so they rank alike. A question is rarely that long; a pasted passage still finds its matches.
"""


def validate_filter(filters: Filter | None) -> None:
    """Refuse a user filter that names a reserved key."""
    if filters is None:
        return
    reserved = sorted(filters.keys() & RESERVED_FILTER_KEYS)
    if reserved:
        raise ValidationError(
            f"filter key '{reserved[0]}' is reserved: the tenant comes from your identity",
            details={"field": "filters", "reserved_keys": reserved},
        )


def _both(own: Filter | None, added: Filter | None) -> Filter | None:
    """`own AND added`, either of which may be absent: routing only ever narrows the caller's filter.

    The pair is not validated again against the limits of a filter (`models.MAX_FILTER_DEPTH`,
    `MAX_FILTER_NODES`): those bound what a caller may send, and `own` met them; `added` is the system's,
    bounded by construction (`routing.constraint_filter`: at most `MAX_ROUTED_NODES` objects; the pins'
    `orAll`: one per `MAX_FILTER_BRANCHES` identifiers), so a filter at the limits plus a routed phrase is one
    level and a few objects more, which both backends are sized for (`MAX_KEYWORD_CHARS`). Validating the pair
    would refuse a valid request for what the system added (issue 32)."""
    if own is None or added is None:
        return own or added
    return Filter.model_construct(andAll=[own, added])


@dataclass(frozen=True)
class RoutingOptions:
    """How queries are routed (settings `route`, `routing_*`): the router, its time zone, the identifier
    patterns, and aliases phrase -> source beside the sources the index knows."""

    router: Router | None = None
    time_zone: str = "UTC"
    id_patterns: tuple[str, ...] = (DEFAULT_ID_PATTERN,)
    aliases: Mapping[str, str] = field(default_factory=dict)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


@dataclass(frozen=True)
class Retrieval:
    """Hits, best first, what routing did to the request, and what the reranker did (None: no reranker)."""

    hits: list[SearchHit]
    routing: Routing
    reranking: Reranking | None = None


class Retriever:
    """Runs a `SearchRequest` for a `Caller` against an index with an embedder."""

    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        *,
        mode: SearchMode = "hybrid",
        rrf_k: int = 5,
        candidates: int = 100,
        keyword_weight: float = 1.0,
        vector_weight: float = 1.0,
        fusion: FusionMethod = "relevance",
        routing: RoutingOptions | None = None,
        signals: Signals | None = None,
        tenant_settings: Callable[[str], TenantSettings | None] | None = None,
        feedback_tallies: Callable[[str], Mapping[str, SourceTally] | None] | None = None,
        reranker: Reranker | None = None,
        rerank_candidates: int = 50,
    ) -> None:
        """`signals` are the deployment's ranking signals (off by default); `tenant_settings` reads a
        tenant's overrides of them and of the routing time zone and aliases (a `TenantSettingsCache`);
        `feedback_tallies` reads a tenant's feedback per source, for the feedback signal when it is on;
        `reranker` (None: off) reorders the best `rerank_candidates` fused hits."""
        self.index = index
        self.routing = routing or RoutingOptions()
        self.signals = signals or Signals()
        self.tenant_settings = tenant_settings or (lambda _: None)
        self.feedback_tallies = feedback_tallies or (lambda _: None)
        self.embedder = embedder
        self.mode = mode
        self.candidates = candidates
        self.fusion = Fusion(fusion, {"keyword": keyword_weight, "vector": vector_weight}, rrf_k)
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="keyword-search")

    def search(self, caller: Caller, request: SearchRequest) -> list[SearchHit]:
        """The best chunks for the request, at most `top_k`, from at most `max_sources` documents."""
        return self.retrieve(caller, request).hits

    def retrieve(self, caller: Caller, request: SearchRequest) -> Retrieval:
        """`search`, routed: constraint phrases of the query become filters ANDed with the request's, the
        documents its identifiers name come first; `routing` says what happened."""
        validate_filter(request.filters)
        tenant = self.tenant_settings(caller.tenant_id)
        now = self.routing.clock()
        signals = self.signals.for_tenant(tenant)
        if signals.feedback_weight > 0:
            signals = replace(signals, feedback=self.feedback_tallies(caller.tenant_id) or {})
        route = self._route(caller, request, tenant, now)
        if route is None:
            ranked, reranking = self._ranked(caller, request, request.query, request.filters, signals, now)
            return Retrieval(_hits(self._cut(ranked, request, [])), Routing(router="off"), reranking)
        routed = constraint_filter(route.constraints)
        text = route.text if content_terms(route.text) else request.query
        found = self._pinned(caller, request, text, route.constraints.ids)
        dropped = None
        if routed is None:
            ranked, reranking = self._ranked(caller, request, text, request.filters, signals, now)
        else:
            lists, dropped = self._routed_lists(caller, request, text, routed, route.consumed_phrases)
            if dropped is None:
                ranked, reranking = self._ranked_lists(lists, text, signals, now)
            else:
                ranked, reranking = self._ranked(caller, request, request.query, request.filters, signals, now)
        ranked, versions = prefer_valid(ranked, route.constraints.versions)
        pinned = _pins(ranked, found, request.min_score)
        report = Routing(
            applied_filters=_dumped(routed) if routed and not dropped else None,
            consumed_phrases=route.consumed_phrases if not dropped else [],
            pinned_documents=[candidate.doc_id for candidate in pinned],
            router=route.router,
            fallback=route.fallback,
            filter_fallback=dropped,
            versions=versions,
        )
        return Retrieval(_hits(self._cut(ranked, request, pinned)), report, reranking)

    def _routed_lists(
        self, caller: Caller, request: SearchRequest, text: str, routed: Filter, phrases: list[str]
    ) -> tuple[dict[str, list[ScoredChunk]], FilterFallback | None]:
        """The rankings of `text` under the routed filter, or why to drop it (issue 26): it matched nothing
        (`NO_MATCH`), or its best hit is much weaker than the best without it (`WEAKER`, `much_weaker`).

        Both relevances are estimated against the rankings of the same text without the routed filter, so
        the same raw scores meet the same best cosine and BM25 score: within the filtered lists alone the
        best hit would always look like the best there is."""
        depth = self._depth(request)
        vector = self.embedder.embed_query(text) if self.mode != "bm25" else None
        lists = self._lists(caller, text, _both(request.filters, routed), depth, vector)
        dropped_filters = _dumped(routed)
        if not any(lists.values()):
            message = (
                f"The filter routed from {_quoted(phrases)} matched no document you may read: the question was "
                "searched as written, without it."
            )
            return lists, FilterFallback(
                reason="NO_MATCH", message=message, dropped_filters=dropped_filters, dropped_phrases=phrases
            )
        unfiltered = self._lists(caller, text, request.filters, depth, vector)
        estimate = estimates(unfiltered)
        routed_best = max(estimate(raw) for raw in _raw_scores(lists))
        unrouted_best = max(estimate(raw) for raw in _raw_scores(unfiltered))
        if not much_weaker(routed_best, unrouted_best):
            return lists, None
        message = (
            f"The filter routed from {_quoted(phrases)} kept only hits far less likely relevant than the best "
            f"without it (relevance {routed_best:.4f} against {unrouted_best:.4f}): the question was searched as "
            "written, without it."
        )
        return lists, FilterFallback(
            reason="WEAKER", message=message, dropped_filters=dropped_filters, dropped_phrases=phrases
        )

    def _ranked(
        self,
        caller: Caller,
        request: SearchRequest,
        text: str,
        filters: Filter | None,
        signals: Signals,
        now: datetime,
    ) -> tuple[list[Candidate], Reranking | None]:
        """`text` ranked and fused, re-scored by the ranking signals, then reranked (before any cut)."""
        return self._ranked_lists(self._lists(caller, text, filters, self._depth(request)), text, signals, now)

    def _ranked_lists(
        self, lists: dict[str, list[ScoredChunk]], text: str, signals: Signals, now: datetime
    ) -> tuple[list[Candidate], Reranking | None]:
        """`_ranked` of rankings already made."""
        return self._rerank(text, rescore(self._fuse(lists), signals, now))

    def _rerank(self, query: str, ranked: list[Candidate]) -> tuple[list[Candidate], Reranking | None]:
        """The best `rerank_candidates` candidates in the reranker's order, each with its `rerank_score`, then
        the rest as they were; the candidates keep every other field. If the reranker fails in any way, the
        order is left as it was and the report says why."""
        reranker = self.reranker
        if reranker is None:
            return ranked, None
        head, tail = ranked[: self.rerank_candidates], ranked[self.rerank_candidates :]
        report = Reranking(reranker=reranker.name, candidates=len(head))
        if not head:
            return ranked, report
        chunks = [candidate.chunk for candidate in head]
        texts = [embedding_text(chunk.document.title, chunk.heading_path, chunk.text) for chunk in chunks]
        try:
            order = reranked_order(reranker.rerank(query, texts), len(head))
        except Exception as exc:  # noqa: BLE001 - whatever the reranker does wrong, the fused order answers
            reason = _rerank_failure(exc)
            logger.warning(
                "reranking failed, the fused order is kept", extra={"reranker": reranker.name, "reason": reason}
            )
            return ranked, report.model_copy(update={"fallback": reason})
        reordered = [head[relevance.index]._replace(rerank_score=relevance.score) for relevance in order]
        return reordered + tail, report

    def _depth(self, request: SearchRequest) -> int:
        return max(self.candidates, request.top_k)

    def _route(
        self, caller: Caller, request: SearchRequest, tenant: TenantSettings | None, now: datetime
    ) -> Route | None:
        """The router's reading of the query, in the tenant's time zone with its aliases over the defaults."""
        options = self.routing
        if options.router is None or not request.route:
            return None
        zone = tenant.routing_time_zone if tenant and tenant.routing_time_zone else options.time_zone
        aliases = {**options.aliases, **((tenant.routing_aliases or {}) if tenant else {})}
        context = RoutingContext(
            now=now,
            time_zone=zone,
            sources=source_vocabulary(self.index.sources(caller), aliases),
            id_patterns=options.id_patterns,
        )
        return options.router.route(request.query, context)

    def _pinned(self, caller: Caller, request: SearchRequest, text: str, ids: list[str]) -> list[Candidate]:
        """The best chunk of each document that carries one of `ids` in its path, title or tags (inside the
        caller's access and the request's own filters, not the routed ones: an id is asked for by name). An
        id longer than a filter string may be (`MAX_FILTER_STRING`) pins nothing: it cannot be filtered on."""
        ids = [identifier for identifier in ids if len(identifier) <= MAX_FILTER_STRING]
        if not ids:
            return []
        carries = [
            {operator: {"key": key, "value": value}}
            for identifier in ids
            for value in dict.fromkeys((identifier, identifier.lower()))
            for operator, key in (("stringContains", "path"), ("stringContains", "title"), ("listContains", "tags"))
        ]
        flt = _both(request.filters, Filter.model_validate({"orAll": carries[:MAX_FILTER_BRANCHES]}))
        try:
            found = self.index.vector_search(caller, self.embedder.embed_query(text), flt, self.candidates)
        except UnsupportedFilterError as exc:
            # An index without substring filters (search mode s3vectors) cannot find an id inside a path
            # or a title: the question is answered by its ranking alone, nothing pinned. A caller's own
            # filter that the index cannot evaluate still fails the search that follows, with its 400.
            logger.info("identifiers not pinned: %s", exc.message)
            return []
        relevance = relevance_scores({"vector": found})
        best: dict[str, Candidate] = {}
        for scored in found:
            if scored.doc_id not in best and len(best) < request.top_k:
                score = relevance({"vector": scored.score})
                best[scored.doc_id] = Candidate(scored, 0.0, score, vector_score=scored.score)
        return list(best.values())

    def _cut(self, ranked: list[Candidate], request: SearchRequest, pinned: list[Candidate]) -> list[Candidate]:
        """The pinned chunks first (`_pins`), then the ranking, cut to `top_k` chunks of at most `max_sources`
        documents whose relevance is at least `min_score` (relevance does not follow rank, so the whole
        ranking is read)."""
        taken = {candidate.chunk_id for candidate in pinned}
        kept: list[Candidate] = pinned[: request.top_k]
        documents = {candidate.doc_id for candidate in kept}
        if len(kept) == request.top_k:
            return kept
        for candidate in ranked:
            if candidate.relevance_score < request.min_score:
                continue  # not `break`: a reranked list is not in the order of its scores
            if candidate.chunk_id in taken:
                continue
            doc_id = candidate.doc_id
            if doc_id not in documents and len(documents) == (request.max_sources or request.top_k):
                continue
            documents.add(doc_id)
            kept.append(candidate)
            if len(kept) == request.top_k:
                break
        return kept

    def rank(self, caller: Caller, query: str, filters: Filter | None, depth: int) -> list[SearchHit]:
        """Every chunk of the top `depth` of each ranking, fused, best first (no cut-offs applied).

        `search` is the API's view of this; evaluation reads the whole fused list.
        """
        return _hits(self._fused(caller, query, filters, depth))

    def _fused(self, caller: Caller, query: str, filters: Filter | None, depth: int) -> list[Candidate]:
        """`rank` before any chunk is parsed or hit built: fusion reads ids and scores only."""
        return self._fuse(self._lists(caller, query, filters, depth))

    def _lists(
        self, caller: Caller, query: str, filters: Filter | None, depth: int, vector: Vector | None = None
    ) -> dict[str, list[ScoredChunk]]:
        """The rankings of the mode, each `depth` deep (`vector`: the query's embedding if already made)."""
        rankings: dict[str, list[ScoredChunk]] = {}
        keyword = None
        if self.mode in ("hybrid", "bm25"):
            # The keyword half runs beside the vector half (embedding + scan): latency is the slower one.
            keyword_text = word_prefix(query, MAX_KEYWORD_CHARS)
            keyword = self._pool.submit(self.index.keyword_search, caller, keyword_text, filters, depth)
        if self.mode in ("hybrid", "vector"):
            embedded = vector if vector is not None else self.embedder.embed_query(query)
            rankings["vector"] = self.index.vector_search(caller, embedded, filters, depth)
        if keyword is not None:
            rankings["keyword"] = keyword.result()
        return rankings

    def _fuse(self, rankings: dict[str, list[ScoredChunk]]) -> list[Candidate]:
        """The rankings fused into candidates, each with its calibrated relevance."""
        # With the `relevance` fusion the fused score is the unrounded estimate itself: rounding it gives the
        # relevance score without computing the model a second time for every candidate.
        relevance = None if self.fusion.method == "relevance" else relevance_scores(rankings)
        return [
            Candidate(
                scored,
                round(score, 6),
                round(score, 4) if relevance is None else relevance(raw),
                raw.get("vector"),
                raw.get("keyword"),
            )
            for scored, score, raw in self.fusion.fuse(rankings)
        ]


FALLBACK_FLOOR = 0.01
"""A routed result is dropped for a weaker one only if its best hit scores below this (`much_weaker`)."""
FALLBACK_RATIO = 10.0
"""... and the best hit without the routed filter is more than this many times as likely relevant."""


def much_weaker(routed: float, unrouted: float) -> bool:
    """Whether the best routed hit (`routed`, a calibrated relevance) is so much weaker than the best hit
    without the routed filter (`unrouted`) that the filter most likely misread the question (issue 26).

    Both conditions must hold. Below `FALLBACK_FLOOR` (1 in 100) the routed best is most likely off the
    topic: on the calibration's held-out data even the whole 0-0.1 bin is relevant only about 2 times in
    100 (docs/evaluation.md), and to score 0.01 a hybrid hit 0.1 below the best cosine must also have
    less than half the best BM25 score. More than `FALLBACK_RATIO` (an order of magnitude) below the
    unrouted best, so the filter hid an answer rather than both searches finding nothing. A filter that
    keeps hits on the topic (a newer ticket about the same thing, somewhat less similar than an older one)
    scores above the floor and stays: narrowing to a date or a source costs some relevance by design."""
    return routed < FALLBACK_FLOOR and routed * FALLBACK_RATIO < unrouted


def _raw_scores(rankings: dict[str, list[ScoredChunk]]) -> list[dict[str, float]]:
    """Each chunk's raw score in each list it is in (the input of `relevance.estimates`)."""
    raw: dict[str, dict[str, float]] = {}
    for name, ranking in rankings.items():
        for scored in ranking:
            raw.setdefault(scored.chunk_id, {}).setdefault(name, scored.score)
    return list(raw.values())


def _dumped(flt: Filter) -> dict[str, Any]:
    return flt.model_dump(mode="json", by_alias=True, exclude_none=True)


def _quoted(phrases: list[str]) -> str:
    return ", ".join(f'"{phrase}"' for phrase in phrases) or "the question"


def _pins(ranked: list[Candidate], found: list[Candidate], min_score: float) -> list[Candidate]:
    """The chunk each pinned document is shown by (its best ranked chunk if it ranked at all, else the one
    `_pinned` found), of the documents whose chunk reaches `min_score`: a floor (the request's, or a tool
    profile's that the caller cannot lower) holds for a document asked for by name too."""
    best_ranked: dict[str, Candidate] = {}
    for candidate in ranked:
        best_ranked.setdefault(candidate.doc_id, candidate)
    shown = (best_ranked.get(candidate.doc_id, candidate) for candidate in found)
    return [candidate for candidate in shown if candidate.relevance_score >= min_score]


def _hits(candidates: list[Candidate]) -> list[SearchHit]:
    return [candidate.hit() for candidate in candidates]


def _rerank_failure(exc: Exception) -> str:
    """Why reranking failed, without any text of the query or the documents: the error code and the AWS
    error behind it, or the adapter's own account of an unusable answer, or what the order lacked."""
    if isinstance(exc, CitewiseError):
        aws_error = exc.details.get("aws_error")
        return f"{exc.code} ({aws_error})" if aws_error else f"{exc.code}: {exc.message}"
    if isinstance(exc, ValueError):
        return f"unusable answer: {exc}"
    return type(exc).__name__
