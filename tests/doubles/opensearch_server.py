"""A small OpenSearch over real HTTP on 127.0.0.1, for driving opensearch-py's real client in tests.

It keeps indices in memory and answers with the response shapes of OpenSearch 2.17 (the Serverless
version): index create/exists/get/mapping/delete, `_bulk` (index, create, delete), `_search` and
`_refresh`. What it checks, because a mistake there would pass silently against a lenient fake:
- index bodies: field types, `knn_vector` methods (Faiss HNSW spaces and parameters), `index.knn`;
- documents against the stored mapping: `dynamic: strict`, dynamic templates (`path_match`), value
  types, vector dimensions, object vs value; errors carry OpenSearch's types and reasons;
- request bodies: NaN and Infinity tokens are refused (Python's json writes them, OpenSearch's parser
  does not read them; in a bulk document, its item fails), a bulk body over 10 MiB is a 413, and on
  Serverless a `refresh` parameter is refused;
- queries: only the query types and search keys it knows (an unknown one is a 400, as in OpenSearch),
  the query vector's dimension, numeric terms on numeric fields.
Search is exact: BM25 (k1 1.2, b 0.75) over the terms of `citewise_local.analysis.keyword_terms` for a text
field analysed by citewise's `citewise_english` analyzer (the index's own analysis settings must define it
as `opensearch_queries.ANALYSIS` does; an analyzer that is neither defined nor built in is refused, as
OpenSearch refuses it) and over `citewise.domain.textutil.content_terms` standing in for a built-in
analyzer, and exact k-NN with OpenSearch's score transforms, honouring `filter` inside `knn`.
Writes become searchable at a refresh (`_refresh`, or `?refresh=true|wait_for`), as on a domain; with
`serverless=True` they become searchable `refresh_interval` seconds after they are written (0: at once;
a vector collection takes up to about 60 s, tests use a fraction of a second), a client `_id` on
index/create is refused per item and `_refresh` does not exist, as on a Serverless vector collection.

Faults on demand: `fail_next_request` (a whole-request error, e.g. 429), `respond_next_raw` (a
malformed answer), `stall_next_request` (a slow answer) and `fail_bulk_items` (per-item failures
inside a 200 bulk answer).
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from citewise.aws.opensearch_queries import ANALYSIS
from citewise.domain.textutil import content_terms
from citewise_local.analysis import keyword_terms

VERSION = "2.17.0"
FIELD_TYPES = {
    "keyword",
    "text",
    "date",
    "integer",
    "long",
    "double",
    "float",
    "boolean",
    "object",
    "nested",
    "knn_vector",
}
OBJECT_TYPES = {"object", "nested"}
BUILT_IN_ANALYZERS = {"standard", "simple", "whitespace", "english"}
TOTAL_FIELDS_LIMIT = 1000  # index.mapping.total_fields.limit's default
MAX_CLAUSE_COUNT = 1024  # indices.query.bool.max_clause_count's default
MAX_CONTENT_LENGTH = 10 * 1024 * 1024  # the smallest OpenSearch Service payload limit (HTTP 413 above it)
# Leaf queries, as Lucene 9's IndexSearcher counts them against max_clause_count (compound ones are not).
LEAF_QUERIES = {"term", "terms", "range", "prefix", "wildcard", "exists", "match_none", "match_all", "ids", "knn"}
FAISS_SPACES = {"l2", "innerproduct"}  # cosinesimil on Faiss arrives in 2.19
FAISS_HNSW_PARAMETERS = {"m", "ef_construction", "ef_search", "encoder"}
SEARCH_KEYS = {
    "query",
    "size",
    "from",
    "_source",
    "sort",
    "search_after",
    "collapse",
    "aggs",
    "aggregations",
    "track_total_hits",
}
Json = Any
Response = tuple[int, bytes, str]


class ApiError(Exception):
    """An OpenSearch error answer: HTTP status, error type and reason."""

    def __init__(self, status: int, kind: str, reason: str, root_cause: Json | None = None, **extra: Any) -> None:
        super().__init__(reason)
        self.status, self.kind, self.reason, self.extra = status, kind, reason, extra
        self.root_cause = root_cause

    def body(self) -> Json:
        error = {"type": self.kind, "reason": self.reason, **self.extra}
        return {"error": {"root_cause": [self.root_cause or error], **error}, "status": self.status}


@dataclass
class Index:
    """One index: its mappings and settings, the live documents and the refreshed (searchable) view."""

    name: str
    mappings: Json
    settings: Json
    live: dict[str, Json] = field(default_factory=dict)
    searchable: dict[str, Json] = field(default_factory=dict)
    seq_no: int = 0
    pending: list[tuple[float, str, Json | None]] = field(default_factory=list)
    """Serverless: writes not yet searchable, as (visible from, _id, source or None for a delete)."""

    def analyzer(self, name: str) -> Callable[[str], list[str]]:
        """The terms a text field analysed by `name` holds: `keyword_terms` for citewise's own analyzer
        (defined here exactly as `opensearch_queries.ANALYSIS` defines it), `content_terms` otherwise."""
        defined = self.settings["index"].get("analysis", {})
        if name in defined.get("analyzer", {}):
            if defined != ANALYSIS:
                raise ApiError(400, "illegal_argument_exception", f"the double knows no analyzer [{name}] like this")
            return keyword_terms
        return content_terms

    def publish(self, now: float) -> None:
        """Make the pending writes due by `now` searchable, in the order they were written."""
        while self.pending and self.pending[0][0] <= now:
            _, doc_id, source = self.pending.pop(0)
            if source is None:
                self.searchable.pop(doc_id, None)
            else:
                self.searchable[doc_id] = source


@dataclass(frozen=True)
class Recorded:
    """One request as received: method, path, query parameters and the raw body."""

    method: str
    path: str
    params: dict[str, str]
    body: bytes
    status: int


@dataclass
class _ItemFault:
    match: Callable[[str, Json | None], bool]
    status: int
    kind: str
    reason: str


class FakeOpenSearch:
    """The state and behaviour behind the HTTP server; thread-safe."""

    created: ClassVar[list[FakeOpenSearch]] = []
    """Every double made (a test fixture clears it), for checking what each received."""

    def __init__(
        self, *, serverless: bool = False, allow_explicit_index: bool = False, refresh_interval: float = 0.0
    ) -> None:
        self.serverless = serverless
        self.refresh_interval = refresh_interval
        FakeOpenSearch.created.append(self)
        # `rest.action.multi.allow_explicit_index`: true by default in OpenSearch, false on a hardened
        # domain; citewise must work with it off, so the double starts hardened.
        self.allow_explicit_index = allow_explicit_index
        self.indices: dict[str, Index] = {}
        self.requests: list[tuple[str, str, dict[str, str], int]] = []
        self.wire: list[Recorded] = []
        """Every request as it went over the wire, for checking against the API specification."""
        self._lock = threading.Lock()
        self._request_faults: list[tuple[str | None, str | None, Response]] = []
        self._item_faults: list[_ItemFault] = []
        self._stalls: list[tuple[str, float]] = []

    # --- fault injection ---------------------------------------------------------------------------

    def fail_next_request(
        self, status: int, kind: str, reason: str = "injected", *, path: str | None = None, method: str | None = None
    ) -> None:
        """Answer the next request (whose path contains `path` and method is `method`, if given) with this error."""
        self._request_faults.append((path, method, _json_response(status, ApiError(status, kind, reason).body())))

    def respond_next_raw(
        self, body: bytes, *, status: int = 200, content_type: str = "application/json", path: str | None = None
    ) -> None:
        """Answer the next request (whose path contains `path`, if given) with these raw bytes."""
        self._request_faults.append((path, None, (status, body, content_type)))

    def stall_next_request(self, seconds: float, *, path: str) -> None:
        """Answer the next request whose path contains `path` only after `seconds` (a slow cluster)."""
        self._stalls.append((path, seconds))

    def fail_bulk_items(
        self, match: Callable[[str, Json | None], bool], *, status: int, kind: str, reason: str = "injected"
    ) -> None:
        """Fail each item for which `match(operation, source)` is true, in the next bulk request that has one."""
        self._item_faults.append(_ItemFault(match, status, kind, reason))

    # --- dispatch ----------------------------------------------------------------------------------

    def handle(self, method: str, target: str, body: bytes) -> Response:
        url = urlsplit(target)
        params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        parts = [unquote(p) for p in url.path.split("/") if p]
        with self._lock:
            stall = next((s for s in self._stalls if s[0] in url.path), None)
            if stall is not None:
                self._stalls.remove(stall)
        if stall is not None:
            time.sleep(stall[1])  # outside the lock: other requests go on meanwhile
        with self._lock:
            self.requests.append((method, url.path, params, len(body)))
            response = self._answer(method, url.path, parts, params, body)
            self.wire.append(Recorded(method, url.path, params, body, response[0]))
            return response

    def _answer(self, method: str, path: str, parts: list[str], params: dict[str, str], body: bytes) -> Response:
        for position, (fault_path, verb, response) in enumerate(self._request_faults):
            if (fault_path is None or fault_path in path) and verb in (None, method):
                del self._request_faults[position]
                return response
        try:
            status, answer = self._route(method, parts, params, body)
        except ApiError as exc:
            return _json_response(exc.status, exc.body())
        return _json_response(status, answer)

    def _route(self, method: str, parts: list[str], params: dict[str, str], body: bytes) -> tuple[int, Json]:
        if not parts:
            return 200, {"name": "fake", "version": {"distribution": "opensearch", "number": VERSION}}
        if parts[-1] == "_bulk" and method in ("POST", "PUT"):
            return 200, self._bulk(parts[0] if len(parts) == 2 else None, body, params)
        name = parts[0]
        if len(parts) == 1:
            if method == "HEAD":
                return (200 if name in self.indices else 404), None
            if method == "PUT":
                return 200, self._create(name, _parse(body) or {})
            if method == "GET":
                index = self._index(name)
                return 200, {name: {"aliases": {}, "mappings": index.mappings, "settings": index.settings}}
            if method == "DELETE":
                self._index(name)
                del self.indices[name]
                return 200, {"acknowledged": True}
        elif parts[1] == "_mapping" and method == "GET":
            return 200, {name: {"mappings": self._index(name).mappings}}
        elif parts[1] == "_search" and method in ("GET", "POST"):
            return 200, self._search(self._index(name), _parse(body) or {})
        elif parts[1] == "_refresh" and method in ("GET", "POST") and not self.serverless:
            self._refresh(self._index(name))
            return 200, {"_shards": {"total": 2, "successful": 1, "failed": 0}}
        raise ApiError(
            404,
            "invalid_index_name_exception" if name.startswith("_") else "no_handler_found",
            f"no handler found for uri [/{'/'.join(parts)}] and method [{method}]",
        )

    def _index(self, name: str) -> Index:
        if name not in self.indices:
            raise ApiError(404, "index_not_found_exception", f"no such index [{name}]", index=name)
        return self.indices[name]

    # --- indices -----------------------------------------------------------------------------------

    def _create(self, name: str, body: Json) -> Json:
        if name in self.indices:
            raise ApiError(400, "resource_already_exists_exception", f"index [{name}/x] already exists", index=name)
        unknown = set(body) - {"settings", "mappings", "aliases"}
        if unknown:
            raise ApiError(400, "parse_exception", f"unknown key [{sorted(unknown)[0]}] for create index")
        settings = body.get("settings", {})
        knn_enabled = settings.get("index", {}).get("knn", settings.get("index.knn")) in (True, "true")
        mappings = copy.deepcopy(body.get("mappings", {}))
        analysis = settings.get("analysis", {})
        analyzers = BUILT_IN_ANALYZERS | set(analysis.get("analyzer", {}))
        _check_properties(mappings.get("properties", {}), knn_enabled, analyzers)
        for template in mappings.get("dynamic_templates", []):
            ((_, spec),) = template.items()
            _check_properties({"t": spec["mapping"]}, knn_enabled, analyzers)
        stored_settings: Json = {"index": {"knn": str(knn_enabled).lower()}}
        if analysis:
            stored_settings["index"]["analysis"] = copy.deepcopy(analysis)
        self.indices[name] = Index(name, mappings, stored_settings)
        return {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def _refresh(self, index: Index) -> None:
        index.searchable = dict(index.live)

    # --- bulk --------------------------------------------------------------------------------------

    def _bulk(self, default_index: str | None, body: bytes, params: dict[str, str]) -> Json:
        if len(body) > MAX_CONTENT_LENGTH:
            raise ApiError(413, "content_too_long_exception", f"request body exceeds {MAX_CONTENT_LENGTH} bytes")
        if self.serverless and "refresh" in params:
            raise ApiError(400, "illegal_argument_exception", "refresh is not supported by Serverless collections")
        lines = iter(line for line in body.decode().split("\n") if line.strip())
        faults, used = self._item_faults, set()
        items: list[Json] = []
        touched: set[str] = set()
        for line in lines:
            ((operation, meta),) = _parse(line.encode()).items()
            raw_source = next(lines) if operation in ("index", "create") else None
            if "_index" in meta and not self.allow_explicit_index:
                raise ApiError(400, "illegal_argument_exception", "explicit index in bulk is not allowed")
            name = meta.get("_index", default_index)
            if name is None:
                raise ApiError(400, "action_request_validation_exception", "Validation Failed: 1: index is missing;")
            try:
                source = _parse_document(raw_source, meta.get("_id"))
                fault = next((f for f in faults if f.match(operation, source)), None)
                if fault is not None:
                    used.add(id(fault))
                    raise ApiError(fault.status, fault.kind, fault.reason)
                result = self._bulk_item(operation, name, meta, source)
                touched.add(name)
            except ApiError as exc:
                result = {"_index": name, "_id": meta.get("_id"), "status": exc.status, "error": exc.body()["error"]}
                result["error"].pop("root_cause")
            items.append({operation: result})
        self._item_faults = [f for f in faults if id(f) not in used]
        if params.get("refresh") in ("", "true", "wait_for"):
            for name in touched:
                self._refresh(self.indices[name])
        return {"took": 3, "errors": any("error" in next(iter(i.values())) for i in items), "items": items}

    def _bulk_item(self, operation: str, name: str, meta: Json, source: Json | None) -> Json:
        if operation not in ("index", "create", "delete"):
            raise ApiError(400, "illegal_argument_exception", f"unsupported action [{operation}]")
        index = self._index(name)
        doc_id = meta.get("_id")
        if operation == "delete":
            found = index.live.pop(doc_id, None) is not None
            if self.serverless:
                self._visible_later(index, doc_id, None)
            return self._written(index, doc_id, "deleted" if found else "not_found", 200 if found else 404)
        if doc_id is not None and self.serverless:
            raise ApiError(
                400, "illegal_argument_exception", "Document ID is not supported in create/index operation request"
            )
        doc_id = doc_id or secrets.token_urlsafe(15)
        if operation == "create" and doc_id in index.live:
            raise ApiError(
                409, "version_conflict_engine_exception", f"[{doc_id}]: version conflict, document already exists"
            )
        _check_document(index, doc_id, source)
        created = doc_id not in index.live
        index.live[doc_id] = source
        if self.serverless:
            self._visible_later(index, doc_id, source)
        return self._written(index, doc_id, "created" if created else "updated", 201 if created else 200)

    def _visible_later(self, index: Index, doc_id: str, source: Json | None) -> None:
        """Serverless: the write becomes searchable `refresh_interval` seconds from now."""
        now = time.monotonic()
        index.pending.append((now + self.refresh_interval, doc_id, source))
        index.publish(now)

    @staticmethod
    def _written(index: Index, doc_id: str, result: str, status: int) -> Json:
        index.seq_no += 1
        return {
            "_index": index.name,
            "_id": doc_id,
            "_version": 1,
            "result": result,
            "_shards": {"total": 2, "successful": 1, "failed": 0},
            "_seq_no": index.seq_no,
            "_primary_term": 1,
            "status": status,
        }

    # --- search ------------------------------------------------------------------------------------

    def _search(self, index: Index, body: Json) -> Json:
        index.publish(time.monotonic())
        unknown = set(body) - SEARCH_KEYS
        if unknown:
            raise ApiError(400, "parsing_exception", f"Unknown key for a START_OBJECT in [{sorted(unknown)[0]}].")
        query = body.get("query", {"match_all": {}})
        if _leaf_clauses(query) > MAX_CLAUSE_COUNT:
            # as OpenSearch 2.19 answers it: a shard failure whose cause is Lucene's too_many_clauses
            cause = {"type": "too_many_clauses", "reason": f"maxClauseCount is set to {MAX_CLAUSE_COUNT}"}
            shard = {"type": "query_shard_exception", "reason": f"failed to create query: {cause['reason']}"}
            raise ApiError(
                400,
                "search_phase_execution_exception",
                "all shards failed",
                root_cause=shard,
                phase="query",
                grouped=True,
                failed_shards=[{"shard": 0, "index": index.name, "reason": {**shard, "caused_by": cause}}],
            )
        searcher = _Searcher(index)
        scored = searcher.run(query)
        sort = [_sort_spec(spec) for spec in body.get("sort", [])]
        if sort:
            scored.sort(key=lambda hit: tuple(searcher.sort_value(hit[0], f) for f, _ in sort))
            if any(order == "desc" for _, order in sort):
                raise ApiError(400, "illegal_argument_exception", "the double sorts ascending only")
            after = body.get("search_after")
            if after is not None:
                scored = [h for h in scored if tuple(searcher.sort_value(h[0], f) for f, _ in sort) > tuple(after)]
        else:
            scored.sort(key=lambda hit: -hit[1])
        if "collapse" in body:
            seen: set[Any] = set()
            collapsed = []
            for doc_id, score in scored:
                value = searcher.sort_value(doc_id, body["collapse"]["field"])
                if value not in seen:
                    seen.add(value)
                    collapsed.append((doc_id, score))
            scored = collapsed
        start, size = int(body.get("from", 0)), int(body.get("size", 10))
        hits = []
        for doc_id, score in scored[start : start + size]:
            hit: Json = {"_index": index.name, "_id": doc_id, "_score": None if sort else score}
            source = _filter_source(index.searchable[doc_id], body.get("_source", True))
            if source is not None:
                hit["_source"] = source
            if sort:
                hit["sort"] = [searcher.sort_value(doc_id, f) for f, _ in sort]
            hits.append(hit)
        answer: Json = {
            "took": 2,
            "timed_out": False,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {
                "total": {"value": len(scored), "relation": "eq"},
                "max_score": None if sort or not scored else max(s for _, s in scored),
                "hits": hits,
            },
        }
        aggs = body.get("aggs", body.get("aggregations"))
        if aggs:
            answer["aggregations"] = {name: searcher.terms_agg(scored, spec) for name, spec in aggs.items()}
        return answer


class _Searcher:
    """Evaluates query DSL over an index's searchable documents: [(id, score)] of the matching ones."""

    def __init__(self, index: Index, docs: dict[str, Json] | None = None) -> None:
        self.index = index
        self.docs = index.searchable if docs is None else docs
        self._values: dict[tuple[str, str], list[Any]] = {}

    def run(self, query: Json) -> list[tuple[str, float]]:
        scores = self.query(query, set(self.docs))
        return list(scores.items())

    def query(self, query: Json, candidates: set[str]) -> dict[str, float]:
        ((kind, spec),) = query.items()
        handler = getattr(self, f"q_{kind}", None)
        if handler is None:
            raise ApiError(400, "parsing_exception", f"unknown query [{kind}]")
        result: dict[str, float] = handler(spec, candidates)
        return result

    def q_match_all(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        return dict.fromkeys(candidates, 1.0)

    def q_match_none(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        return {}

    def q_bool(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        unknown = set(spec) - {"must", "filter", "should", "must_not", "minimum_should_match"}
        if unknown:
            raise ApiError(400, "parsing_exception", f"[bool] query does not support [{sorted(unknown)[0]}]")
        alive = set(candidates)
        scores = dict.fromkeys(alive, 0.0)
        for clause in _as_list(spec.get("filter")):
            alive &= set(self.query(clause, alive))
        for clause in _as_list(spec.get("must_not")):
            alive -= set(self.query(clause, alive))
        for clause in _as_list(spec.get("must")):
            matched = self.query(clause, alive)
            alive &= set(matched)
            for doc_id in alive:
                scores[doc_id] += matched[doc_id]
        should = _as_list(spec.get("should"))
        if should:
            default = 0 if spec.get("must") or spec.get("filter") else 1
            needed = int(spec.get("minimum_should_match", default))
            counts: Counter[str] = Counter()
            for clause in should:
                for doc_id, score in self.query(clause, alive).items():
                    counts[doc_id] += 1
                    scores[doc_id] += score
            alive = {d for d in alive if counts[d] >= needed}
        return {doc_id: scores[doc_id] for doc_id in alive}

    def q_nested(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        """Documents having one entry under `path` that matches `query` on its own."""
        unknown = set(spec) - {"path", "query", "score_mode", "ignore_unmapped"}
        if unknown:
            raise ApiError(400, "parsing_exception", f"[nested] query does not support [{sorted(unknown)[0]}]")
        path = spec["path"]
        node = self.mapping(path)
        if node is None or node["type"] != "nested":
            raise ApiError(
                400, "query_shard_exception", f"[nested] nested object under path [{path}] is not of nested type"
            )
        entries: dict[str, Json] = {}
        owners: dict[str, str] = {}
        for doc_id in candidates:
            for position, entry in enumerate(_as_list(_get_path(self.docs[doc_id], path))):
                entry_id = f"{doc_id}#{position}"
                entries[entry_id] = _set_path(path, entry)
                owners[entry_id] = doc_id
        matched = _Searcher(self.index, entries).query(spec["query"], set(entries))
        return {owners[entry_id]: 1.0 for entry_id in matched}

    def q_term(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        ((name, value),) = spec.items()
        value = value["value"] if isinstance(value, dict) else value
        return self.q_terms({name: [value]}, candidates)

    def q_terms(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        ((name, values),) = spec.items()
        wanted = {self.parse(name, v) for v in values}
        return {d: 1.0 for d in candidates if wanted & set(self.values(d, name))}

    def q_ids(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        return {d: 1.0 for d in candidates if d in set(spec["values"])}

    def q_exists(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        return {d: 1.0 for d in candidates if self.values(d, spec["field"])}

    def q_range(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        ((name, bounds),) = spec.items()
        tests: dict[str, Callable[[Any, Any], bool]] = {
            "gt": lambda a, b: a > b,
            "gte": lambda a, b: a >= b,
            "lt": lambda a, b: a < b,
            "lte": lambda a, b: a <= b,
        }
        if set(bounds) - set(tests):
            raise ApiError(
                400, "parsing_exception", f"[range] query does not support [{sorted(set(bounds) - set(tests))[0]}]"
            )
        limits = [(tests[op], self.parse(name, value)) for op, value in bounds.items()]
        return {
            d: 1.0
            for d in candidates
            if any(all(test(v, limit) for test, limit in limits) for v in self.values(d, name))
        }

    def q_prefix(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        ((name, value),) = spec.items()
        prefix = value["value"] if isinstance(value, dict) else value
        self.require(name, {"keyword"}, "prefix")
        return {d: 1.0 for d in candidates if any(v.startswith(prefix) for v in self.values(d, name))}

    def q_wildcard(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        ((name, value),) = spec.items()
        pattern = _wildcard_regex(value["value"] if isinstance(value, dict) else value)
        self.require(name, {"keyword"}, "wildcard")
        return {d: 1.0 for d in candidates if any(pattern.fullmatch(v) for v in self.values(d, name))}

    def q_match(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        ((name, value),) = spec.items()
        text = value["query"] if isinstance(value, dict) else value
        mapping = self.require(name, {"text"}, "match")
        terms = Counter(self.index.analyzer(mapping.get("analyzer", "standard"))(text))
        lengths = {d: len(self.values(d, name)) for d in self.docs}
        average = sum(lengths.values()) / max(1, sum(1 for n in lengths.values() if n)) or 1.0
        scores: dict[str, float] = {}
        for term, repeats in terms.items():
            having = [d for d in self.docs if term in self.values(d, name)]
            idf = math.log(1 + (len(self.docs) - len(having) + 0.5) / (len(having) + 0.5))
            for d in having:
                if d in candidates:
                    tf = self.values(d, name).count(term)
                    norm = tf + 1.2 * (1 - 0.75 + 0.75 * lengths[d] / average)
                    scores[d] = scores.get(d, 0.0) + repeats * idf * tf * 2.2 / norm
        return scores

    def q_knn(self, spec: Json, candidates: set[str]) -> dict[str, float]:
        ((name, params),) = spec.items()
        mapping = self.require(name, {"knn_vector"}, "knn")
        if set(params) - {"vector", "k", "filter", "boost"}:
            raise ApiError(
                400,
                "parsing_exception",
                f"[knn] unknown field [{sorted(set(params) - {'vector', 'k', 'filter', 'boost'})[0]}]",
            )
        vector, k = params["vector"], int(params["k"])
        if len(vector) != mapping["dimension"]:
            raise ApiError(
                400,
                "illegal_argument_exception",
                f"Query vector has invalid dimension: {len(vector)}. Dimension should be: {mapping['dimension']}",
            )
        allowed = set(self.query(params["filter"], candidates)) if "filter" in params else candidates
        space = mapping.get("method", {}).get("space_type", mapping.get("space_type", "l2"))
        scored = []
        for doc_id in allowed:
            stored = _get_path(self.docs[doc_id], name)
            if stored is not None:
                scored.append((doc_id, _knn_score(space, vector, stored)))
        scored.sort(key=lambda item: -item[1])
        return dict(scored[:k])

    def terms_agg(self, hits: list[tuple[str, float]], spec: Json) -> Json:
        terms = spec["terms"]
        counts: Counter[Any] = Counter()
        for doc_id, _ in hits:
            counts.update(set(self.values(doc_id, terms["field"])))
        order = terms.get("order", {"_count": "desc"})
        if order == {"_key": "asc"}:
            ranked = sorted(counts.items())
        elif order == {"_key": "desc"}:
            ranked = sorted(counts.items(), reverse=True)
        elif order == {"_count": "desc"}:
            ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        else:
            raise ApiError(400, "illegal_argument_exception", f"the double does not order terms by {order}")
        size = int(terms.get("size", 10))
        buckets = []
        for key, count in ranked[:size]:
            bucket: Json = {"key": key, "doc_count": count}
            inside = [hit for hit in hits if key in self.values(hit[0], terms["field"])]
            for name, sub in spec.get("aggs", spec.get("aggregations", {})).items():
                bucket[name] = self.terms_agg(inside, sub)
            buckets.append(bucket)
        return {
            "doc_count_error_upper_bound": 0,
            "sum_other_doc_count": sum(c for _, c in ranked[size:]),
            "buckets": buckets,
        }

    # --- fields ------------------------------------------------------------------------------------

    def mapping(self, name: str) -> Json | None:
        return _field_mapping(self.index.mappings, name)

    def require(self, name: str, types: set[str], query: str) -> Json:
        mapping = self.mapping(name)
        if mapping is None:
            return {"type": "unmapped"}
        if mapping["type"] not in types:
            raise ApiError(
                400,
                "query_shard_exception",
                f"Can only use {query} queries on {'/'.join(sorted(types))} fields - not on [{name}] "
                f"which is of type [{mapping['type']}]",
            )
        return dict(mapping)

    def values(self, doc_id: str, name: str) -> list[Any]:
        """The indexed values of a field in a document, as its mapping indexes them."""
        if (doc_id, name) not in self._values:
            self._values[doc_id, name] = self._index_values(doc_id, name)
        return self._values[doc_id, name]

    def _index_values(self, doc_id: str, name: str) -> list[Any]:
        mapping = self.mapping(name)
        raw = _get_path(self.docs[doc_id], name)
        if mapping is None or raw is None:
            return []
        values = raw if isinstance(raw, list) else [raw]
        kind = mapping["type"]
        if kind == "text":
            analyze = self.index.analyzer(mapping.get("analyzer", "standard"))
            return [term for v in values for term in analyze(str(v))]
        if kind == "keyword":
            limit = mapping.get("ignore_above")
            return [str(v) for v in values if v is not None and (limit is None or len(str(v)) <= limit)]
        return [_coerce(kind, v, name) for v in values if v is not None]

    def parse(self, name: str, value: Any) -> Any:
        mapping = self.mapping(name)
        if mapping is None:
            return object()  # unmapped: matches nothing
        if mapping["type"] == "keyword":
            return str(value).lower() if isinstance(value, bool) else str(value)
        return _coerce(mapping["type"], value, name)

    def sort_value(self, doc_id: str, name: str) -> Any:
        values = self.values(doc_id, name)
        return min(values) if values else ""


# --- mapping checks ---------------------------------------------------------------------------------


def _check_properties(properties: Json, knn_enabled: bool, analyzers: set[str]) -> None:
    for name, mapping in properties.items():
        kind = mapping.get("type", "object" if "properties" in mapping else None)
        if kind not in FIELD_TYPES:
            raise ApiError(400, "mapper_parsing_exception", f"No handler for type [{kind}] declared on field [{name}]")
        if kind == "text" and mapping.get("analyzer", "standard") not in analyzers:
            raise ApiError(
                400, "mapper_parsing_exception", f"analyzer [{mapping['analyzer']}] has not been configured in mappings"
            )
        if kind in OBJECT_TYPES:
            _check_properties(mapping.get("properties", {}), knn_enabled, analyzers)
        if kind == "knn_vector":
            _check_vector(name, mapping, knn_enabled)


def _check_vector(name: str, mapping: Json, knn_enabled: bool) -> None:
    if not isinstance(mapping.get("dimension"), int) or not 1 <= mapping["dimension"] <= 16000:
        raise ApiError(400, "mapper_parsing_exception", f"Dimension value missing for vector: {name}")
    method = mapping.get("method")
    if method is None:
        return
    if not knn_enabled:
        raise ApiError(
            400,
            "mapper_parsing_exception",
            f"Cannot set modelId or method parameters when index.knn setting is false for field: {name}",
        )
    engine, space = method.get("engine", "faiss"), method.get("space_type", "l2")
    if method.get("name") != "hnsw" or engine != "faiss":
        raise ApiError(400, "mapper_parsing_exception", "the double supports method hnsw on engine faiss only")
    if space not in FAISS_SPACES:
        raise ApiError(
            400,
            "mapper_parsing_exception",
            f'Validation Failed: 1: "{space}" with "faiss" configuration is not supported;',
        )
    unknown = set(method.get("parameters", {})) - FAISS_HNSW_PARAMETERS
    if unknown:
        raise ApiError(400, "mapper_parsing_exception", f"Invalid parameter for faiss hnsw: {sorted(unknown)[0]}")


def _check_document(index: Index, doc_id: str, source: Json) -> None:
    """Validate (and dynamically map) a document, raising OpenSearch's errors for a bad one."""
    mappings = copy.deepcopy(index.mappings)  # dynamic fields are added only if the whole document is valid
    _check_object(mappings, mappings.setdefault("properties", {}), source, "", mappings.get("dynamic", True), doc_id)
    if _count_fields(mappings["properties"]) > TOTAL_FIELDS_LIMIT:
        raise ApiError(
            400, "illegal_argument_exception", f"Limit of total fields [{TOTAL_FIELDS_LIMIT}] has been exceeded"
        )
    index.mappings = mappings


def _count_fields(properties: Json) -> int:
    """Mapped fields as `index.mapping.total_fields.limit` counts them (object fields included)."""
    return sum(1 + _count_fields(m.get("properties", {})) for m in properties.values())


def _check_object(root: Json, properties: Json, value: Json, path: str, dynamic: Any, doc_id: str) -> None:
    for name, item in value.items():
        full = f"{path}{name}"
        mapping = properties.get(name)
        if mapping is None:
            if item is None:
                continue
            if dynamic == "strict":
                raise ApiError(
                    400,
                    "strict_dynamic_mapping_exception",
                    f"mapping set to strict, dynamic introduction of [{name}] within "
                    f"[{path.rstrip('.') or '_doc'}] is not allowed",
                )
            if dynamic in (False, "false"):
                continue
            mapping = properties[name] = _dynamic_mapping(root, full, item)
        kind = mapping.get("type", "object")
        if kind in OBJECT_TYPES:
            if mapping.get("enabled", True) is False or item is None:
                continue
            # An object field takes an array of objects too (each flattened into it; nested: each its own entry).
            for one in item if isinstance(item, list) else [item]:
                if not isinstance(one, dict):
                    raise ApiError(
                        400,
                        "mapper_parsing_exception",
                        f"object mapping for [{full}] tried to parse field [{name}] as object, "
                        "but found a concrete value",
                    )
                _check_object(
                    root, mapping.setdefault("properties", {}), one, full + ".", mapping.get("dynamic", dynamic), doc_id
                )
        elif kind == "knn_vector":
            if not isinstance(item, list) or not all(isinstance(x, int | float) for x in item):
                raise _field_error(
                    full, kind, doc_id, "illegal_argument_exception", "Vector must be an array of numbers"
                )
            if len(item) != mapping["dimension"]:
                raise _field_error(
                    full,
                    kind,
                    doc_id,
                    "illegal_argument_exception",
                    f"Vector dimension mismatch. Expected: {mapping['dimension']}, Given: {len(item)}",
                )
        elif item is not None:
            for one in item if isinstance(item, list) else [item]:
                if isinstance(one, dict):
                    raise _field_error(
                        full, kind, doc_id, "illegal_state_exception", "Can't get text on a START_OBJECT"
                    )
                try:
                    if kind not in ("keyword", "text") and one is not None:
                        _coerce(kind, one, full)
                except ApiError as exc:
                    raise _field_error(full, kind, doc_id, "illegal_argument_exception", exc.reason) from None


def _dynamic_mapping(root: Json, path: str, value: Any) -> Json:
    for template in root.get("dynamic_templates", []):
        ((_, spec),) = template.items()
        if "path_match" in spec and fnmatch.fnmatchcase(path, spec["path_match"]):
            return copy.deepcopy(spec["mapping"])
    if isinstance(value, dict):
        return {"type": "object"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "long"}
    if isinstance(value, float):
        return {"type": "float"}
    return {"type": "keyword"}  # OpenSearch maps text + a keyword sub-field; keyword is enough here


def _field_error(name: str, kind: str, doc_id: str, cause: str, reason: str) -> ApiError:
    return ApiError(
        400,
        "mapper_parsing_exception",
        f"failed to parse field [{name}] of type [{kind}] in document with id '{doc_id}'. "
        "Preview of field's value: '...'",
        caused_by={"type": cause, "reason": reason},
    )


def _field_mapping(mappings: Json, name: str) -> Json | None:
    node: Json = mappings
    for part in name.split("."):
        node = (node.get("properties") or {}).get(part)
        if node is None:
            return None
    return node if "type" in node else None


def _coerce(kind: str, value: Any, name: str) -> Any:
    try:
        if kind == "boolean":
            if isinstance(value, bool):
                return value
            if value in ("true", "false"):
                return value == "true"
            raise ValueError(value)
        if kind in ("integer", "long", "double", "float"):
            if isinstance(value, bool):
                raise ValueError(value)
            number = float(value)
            return int(number) if kind in ("integer", "long") else number
        if kind == "date":
            if isinstance(value, int | float) and not isinstance(value, bool):
                return int(value)
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)
    except (ValueError, TypeError):
        raise ApiError(
            400,
            "number_format_exception" if kind != "date" else "illegal_argument_exception",
            f"failed to parse [{value}] for field [{name}] of type [{kind}]",
        ) from None
    return value


# --- helpers ----------------------------------------------------------------------------------------


def _knn_score(space: str, query: list[float], stored: list[float]) -> float:
    if space == "innerproduct":
        distance = -sum(a * b for a, b in zip(query, stored, strict=True))
        return 1 / (1 + distance) if distance >= 0 else 1 - distance
    return 1 / (1 + sum((a - b) ** 2 for a, b in zip(query, stored, strict=True)))


def _wildcard_regex(pattern: str) -> re.Pattern[str]:
    out, escaped = [], False
    for char in pattern:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append({"*": ".*", "?": "."}.get(char, re.escape(char)))
    return re.compile("".join(out), re.DOTALL)


def _sort_spec(spec: Any) -> tuple[str, str]:
    if isinstance(spec, str):
        return spec, "asc"
    ((name, order),) = spec.items()
    return name, order if isinstance(order, str) else order.get("order", "asc")


def _filter_source(source: Json, spec: Any) -> Json | None:
    if spec is False:
        return None
    if spec is True:
        return copy.deepcopy(source)
    includes = spec if isinstance(spec, list) else spec.get("includes", [])
    excludes = [] if isinstance(spec, list) else spec.get("excludes", [])
    kept = {k: v for k, v in source.items() if (not includes or k in includes) and k not in excludes}
    for path in includes:  # a dotted include keeps that path of an object, as OpenSearch's filtering does
        head, _, rest = path.partition(".")
        if rest and isinstance(source.get(head), dict):
            inner = _filter_source(source[head], [rest])
            if inner:
                kept.setdefault(head, {}).update(inner)
    return copy.deepcopy(kept)


def _get_path(source: Json, name: str) -> Any:
    node = source
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _leaf_clauses(query: Any) -> int:
    """Leaf clauses of a query tree; a `match` counts one per analysed term of its text."""
    if isinstance(query, list):
        return sum(_leaf_clauses(item) for item in query)
    if not isinstance(query, dict):
        return 0
    count = 0
    for key, value in query.items():
        if key == "match":
            ((_, spec),) = value.items()
            count += len(set(keyword_terms(str(spec["query"] if isinstance(spec, dict) else spec))))
        elif key in LEAF_QUERIES:
            count += 1
            if key == "knn":
                count += _leaf_clauses(value)  # its filter
        else:
            count += _leaf_clauses(value)
    return count


def _set_path(name: str, value: Any) -> Json:
    """`value` placed at the dotted path `name` of a new document."""
    for part in reversed(name.split(".")):
        value = {part: value}
    return value


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _parse(body: bytes) -> Json:
    if not body:
        return None
    try:
        return json.loads(body, parse_constant=_non_finite)
    except json.JSONDecodeError as exc:
        raise ApiError(400, "parse_exception", f"request body is not JSON: {exc}") from None


def _parse_document(raw: str | None, doc_id: str | None) -> Json:
    """A bulk item's source. OpenSearch parses each document on its own: a document it cannot read
    fails its item (mapper_parsing_exception caused by the parser's error), not the whole request."""
    try:
        return _parse(raw.encode()) if raw is not None else None
    except ApiError as exc:
        raise ApiError(
            400,
            "mapper_parsing_exception",
            f"failed to parse document with id '{doc_id}'",
            caused_by={"type": "json_parse_exception", "reason": exc.reason},
        ) from None


def _non_finite(token: str) -> Json:
    """OpenSearch's JSON parser (Jackson, strict) refuses NaN and Infinity, which Python's json writes."""
    raise ApiError(
        400,
        "parse_exception",
        f"Non-standard token '{token}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow",
    )


def _json_response(status: int, body: Json) -> Response:
    return status, (b"" if body is None else json.dumps(body).encode()), "application/json; charset=UTF-8"


# --- the HTTP server --------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.headers_seen.append(dict(self.headers))
        status, payload, content_type = self.server.fake.handle(self.command, self.path, body)
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped waiting (a stalled answer past its timeout)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeOpenSearch) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake
        self.headers_seen: list[dict[str, str]] = []


@dataclass
class RunningServer:
    """A started double: its URL, its state (for fault injection and assertions), the raw headers."""

    url: str
    fake: FakeOpenSearch
    headers_seen: list[dict[str, str]]


@contextmanager
def running(fake: FakeOpenSearch) -> Iterator[RunningServer]:
    """Serve `fake` on a random loopback port for the duration of the block."""
    server = _Server(fake)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="fake-opensearch", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield RunningServer(f"http://{host!s}:{port}", fake, server.headers_seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
