"""Request bodies for the OpenSearch adapter, as plain dicts built by pure functions.

Nothing here talks to a cluster, so unit tests check every body exactly. The same bodies work on an
Amazon OpenSearch Service domain and on an OpenSearch Serverless vector collection; where the two differ
(document ids) the caller says which it targets.

Decisions:
- Vectors: `knn_vector` with HNSW on Faiss and `innerproduct`. Every embedder here returns unit-length
  vectors, so the inner product *is* the cosine similarity; Faiss supports `innerproduct` on every
  OpenSearch 2.x (and so on Serverless, which runs 2.17), while Faiss `cosinesimil` needs OpenSearch
  2.19. Faiss HNSW filters efficiently inside the `knn` clause (2.9+) and is available on Serverless.
  `knn_score_to_cosine` undoes OpenSearch's score transform so the port returns a cosine, as the local
  index does.
- Filters: the user's filter grammar is evaluated against a *typed copy* of the chunk's filterable
  metadata (`domain.matching.metadata_view`: custom attributes overlaid by the system fields) under
  `attributes`, a `nested` field holding one entry per key: `{"key": k, <kind>: value}` where the kind
  is `str` (keyword; a list attribute indexes each element), `num` (double), `bool` (boolean), and a
  list also has `list` (keyword holding the canonical JSON of the list, which marks the key as a list).
  Each comparison is a `nested` query matching the key and the typed value *in the same entry*.
  Because the field is chosen by the type of the *filter value*, a string never matches a number
  (`"2023"` vs `2023`) and `true` never matches `1`, exactly as `domain.matching` decides; one tenant's
  `year: 2023` cannot fix the type of another tenant's `year: "2023"`. The mapping has the same six
  attribute fields whatever keys tenants use: no key spends the index's `mapping.total_fields.limit`
  (1,000 by default), which one tenant's uploads used to exhaust for all when each key was a field.
  Nested entries count against `index.mapping.nested_objects.limit` (10,000 per document), far above
  `domain.metadata.MAX_ATTRIBUTES`. Dates are compared as ISO-8601 strings, as the local index does.
  Strings longer than 8191 characters are not indexed for filtering (`ignore_above`; Lucene's term
  limit is 32766 bytes), and `domain.metadata` caps attribute values well below that.
- Versions: each version attribute (`domain.versions.VERSION_KEYS`) that parses also has an entry under
  the key `#v:<key>` (no user key starts with `#`) whose `str` is its `Version.sort_key`, fixed-width
  digits that order as the versions do, so a version operator is a `term` or `range` on that entry.
- The system fields (tenant_id, doc_id, owner, visibility, ...) are also top-level keyword/date/integer
  fields: the access filter, document operations and aggregations use those.
- `text` holds `textutil.keyword_text(...)` (the title and heading path, weighted by repetition, then the
  chunk) analysed for BM25 with `citewise_english` (`ANALYSIS`): the built-in `english` analyzer's steps
  with the Snowball English stemmer (Porter2) in place of Porter's, so that the local index
  (`citewise_local.analysis`, PyStemmer) makes the same terms from the same text. `chunk` is the whole
  `Chunk` as JSON, stored but not indexed (`enabled: false`), from which results are rebuilt.
- `generation` marks every chunk written by one `replace_document` call, so the chunks of older
  versions are found with one `must_not` term, whatever their ids (Serverless assigns its own). It
  starts with the write's time in nanoseconds, zero-padded (`new_generation`), so generations order
  as strings: a `range` finds the ones older than a given one, and a terms aggregation ordered by key
  finds a document's newest (Serverless readers and delayed sweeps, see `citewise.aws.opensearch`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from citewise.domain.matching import metadata_view, system_fields
from citewise.domain.models import VERSION_OPERATORS, Caller, Chunk, Comparison, Filter, Vector, Visibility
from citewise.domain.textutil import keyword_text
from citewise.domain.versions import declared_versions, parse_version

SCHEMA_VERSION = "3"  # 3: `citewise_english`, weighted headings; 2: nested attributes; 1: a field per key
VECTOR_FIELD = "vector"
TEXT_FIELD = "text"
ANALYZER = "citewise_english"
ANALYSIS: dict[str, Any] = {
    "filter": {
        "citewise_possessive": {"type": "stemmer", "language": "possessive_english"},
        "citewise_stop": {"type": "stop", "stopwords": "_english_"},
        "citewise_snowball": {"type": "snowball", "language": "English"},
    },
    "analyzer": {
        ANALYZER: {
            "type": "custom",
            "tokenizer": "standard",
            "filter": ["citewise_possessive", "lowercase", "citewise_stop", "citewise_snowball"],
        }
    },
}
"""The `english` analyzer's chain (possessives, lower case, the `_english_` stop set) with Snowball English."""
KEYWORD_LIMIT = 8191  # characters: 4 bytes each stays under Lucene's 32766-byte term limit
MAX_BULK_BYTES = 10 * 1024 * 1024  # the smallest HTTP payload limit of an OpenSearch Service domain
STR, NUM, BOOL, LIST = "str", "num", "bool", "list"
ATTRIBUTES = "attributes"
VERSION_KEY_PREFIX = "#v:"
_WILDCARD_SPECIAL = re.compile(r"([\\*?])")

Body = dict[str, Any]


# --- the index -----------------------------------------------------------------------------------


def _replicas(replicas: int | None) -> Body:
    return {} if replicas is None else {"number_of_replicas": replicas}


def index_body(
    dimension: int,
    *,
    embedder: str,
    engine: str = "faiss",
    space_type: str = "innerproduct",
    m: int = 16,
    ef_construction: int = 512,
    ef_search: int = 512,
    replicas: int | None = None,
) -> Body:
    """Settings and mappings of a chunk index for vectors of `dimension` from `embedder`.

    `_meta` records the vector space so `ensure` can refuse an index built for another embedder.
    `replicas`: the index's replica count, for a domain (a one-node domain needs 0, else its index
    stays yellow forever with a replica that no node may hold); None leaves the setting out, as
    Serverless requires and as a domain's default (1) does. No shard count: the default suits.
    """
    keyword = {"type": "keyword"}
    long_keyword = {"type": "keyword", "ignore_above": KEYWORD_LIMIT}
    return {
        "settings": {"index": {"knn": True, **_replicas(replicas)}, "analysis": ANALYSIS},
        "mappings": {
            "_meta": {"embedder": embedder, "dimension": dimension, "schema": SCHEMA_VERSION},
            "dynamic": "strict",
            "date_detection": False,
            "numeric_detection": False,
            "properties": {
                "tenant_id": keyword,
                "doc_id": keyword,
                "chunk_id": keyword,
                "generation": keyword,
                "owner": keyword,
                "visibility": keyword,
                "source": keyword,
                "channel": keyword,
                "source_date": {"type": "date"},
                "path": keyword,
                "tags": keyword,
                "content_hash": keyword,
                "created_at": {"type": "date"},
                "updated_at": {"type": "date"},
                "page": {"type": "integer"},
                ATTRIBUTES: {
                    "type": "nested",
                    "properties": {
                        "key": keyword,
                        STR: long_keyword,
                        NUM: {"type": "double"},
                        BOOL: {"type": "boolean"},
                        LIST: long_keyword,
                    },
                },
                TEXT_FIELD: {"type": "text", "analyzer": ANALYZER},
                "chunk": {"type": "object", "enabled": False},
                VECTOR_FIELD: {
                    "type": "knn_vector",
                    "dimension": dimension,
                    "method": {
                        "name": "hnsw",
                        "engine": engine,
                        "space_type": space_type,
                        "parameters": {"m": m, "ef_construction": ef_construction, "ef_search": ef_search},
                    },
                },
            },
        },
    }


def knn_score_to_cosine(score: float) -> float:
    """The inner product (= cosine of unit vectors) behind a Faiss `innerproduct` k-NN score.

    OpenSearch turns the distance d = -x.y into a score: 1 - d when d < 0, else 1 / (1 + d).
    """
    return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score


# --- documents -----------------------------------------------------------------------------------


def filterable_fields(chunk: Chunk) -> list[dict[str, Any]]:
    """The typed copy of the chunk's filterable metadata: one `attributes` entry per key (module doc)."""
    entries: list[dict[str, Any]] = []
    for key, value in metadata_view(chunk).items():
        if value is None:
            continue
        entry: dict[str, Any] = {"key": key}
        if isinstance(value, bool):
            entry[BOOL] = value
        elif isinstance(value, int | float):
            entry[NUM] = value
        elif isinstance(value, str):
            entry[STR] = value
        else:
            entry[STR] = list(value)
            entry[LIST] = _canonical_list(value)
        entries.append(entry)
    for key, version in declared_versions(chunk.document.attributes).items():
        entries.append({"key": VERSION_KEY_PREFIX + key, STR: version.sort_key})
    return entries


def document_source(chunk: Chunk, vector: Vector, *, generation: str) -> Body:
    """The `_source` of one chunk: system fields, typed filter fields, BM25 text, the chunk, its vector."""
    doc = chunk.document
    return {
        "tenant_id": doc.tenant_id,
        "chunk_id": chunk.chunk_id,
        "generation": generation,
        **system_fields(chunk),
        "content_hash": chunk.content_hash,
        ATTRIBUTES: filterable_fields(chunk),
        TEXT_FIELD: keyword_text(doc.title, chunk.heading_path, chunk.text),
        "chunk": chunk.model_dump(mode="json"),
        VECTOR_FIELD: list(vector),
    }


def document_id(tenant_id: str, chunk_id: str) -> str:
    """The `_id` of a chunk on a managed domain: tenant-qualified, so equal chunk ids of two tenants
    can never overwrite each other."""
    return f"{tenant_id}/{chunk_id}"


def bulk_actions(
    chunks: Sequence[Chunk], vectors: Sequence[Vector], *, generation: str, serverless: bool
) -> list[tuple[Body, Body]]:
    """(action, source) pairs indexing each chunk. Serverless vector collections refuse a client `_id`,
    so there the id is left to the service and the chunk is found by its fields.

    No action names its `_index`: the payload goes to `/<index>/_bulk`, so the IAM policy scoped to
    that path holds, and a domain hardened with `rest.action.multi.allow_explicit_index: false`
    accepts it."""
    pairs: list[tuple[Body, Body]] = []
    for chunk, vector in zip(chunks, vectors, strict=True):
        action: Body = {}
        if not serverless:
            action["_id"] = document_id(chunk.document.tenant_id, chunk.chunk_id)
        pairs.append(({"index": action}, document_source(chunk, vector, generation=generation)))
    return pairs


STAGED_GENERATION = "-staged"
"""The generation of staged vectors: older than any written generation (`new_generation`), so a
Serverless reader's newest-generation check never takes it for a document's current version."""
STAGED_VECTOR = "staged_vector"


def staged_actions(
    tenant_id: str, doc_id: str, vectors: Mapping[str, Vector], *, serverless: bool
) -> list[tuple[Body, Body]]:
    """(action, source) pairs keeping the document's staged vectors (`VectorIndex.stage_vectors`).

    A staged entry is a document of the chunk index without the fields any read filters on (no owner,
    no visibility, no text) and without a `vector` field, so the access filter of every search leaves
    it out and it costs no k-NN graph insertion; its vector rides in `chunk`, the mapping's one
    unindexed object. It carries tenant, document and content hash, so `vectors_by_hash` finds it and
    the document's next replace or delete removes it with the rest of its chunks. On a domain its `_id`
    is fixed by (tenant, document, hash), so staging a batch again overwrites it.
    """
    pairs: list[tuple[Body, Body]] = []
    for content_hash, vector in vectors.items():
        chunk_id = f"staged:{doc_id}:{content_hash}"
        action: Body = {} if serverless else {"_id": document_id(tenant_id, chunk_id)}
        source = {
            "tenant_id": tenant_id,
            "doc_id": doc_id,
            "chunk_id": chunk_id,
            "generation": STAGED_GENERATION,
            "content_hash": content_hash,
            "chunk": {STAGED_VECTOR: list(vector)},
        }
        pairs.append(({"index": action}, source))
    return pairs


def delete_actions(ids: Sequence[str]) -> list[tuple[Body, None]]:
    """Bulk actions deleting documents by `_id` (no source line; the index is in the request path)."""
    return [({"delete": {"_id": doc_id}}, None) for doc_id in ids]


def bulk_payloads(
    actions: Sequence[tuple[Body, Body | None]], max_bytes: int = MAX_BULK_BYTES
) -> Iterator[tuple[str, list[int]]]:
    """NDJSON bodies of at most `max_bytes` each, with the positions of the actions each one holds.

    An action too large on its own is sent alone (OpenSearch then answers 413, which names the cause).
    """
    lines: list[str] = []
    positions: list[int] = []
    size = 0
    for position, (action, source) in enumerate(actions):
        entry = json.dumps(action, separators=(",", ":")) + "\n"
        if source is not None:
            entry += json.dumps(source, separators=(",", ":"), ensure_ascii=False) + "\n"
        entry_size = len(entry.encode())
        if lines and size + entry_size > max_bytes:
            yield "".join(lines), positions
            lines, positions, size = [], [], 0
        lines.append(entry)
        positions.append(position)
        size += entry_size
    if lines:
        yield "".join(lines), positions


# --- access and filters --------------------------------------------------------------------------


def access_filter(caller: Caller) -> Body:
    """`tenant_id = caller.tenant AND (visibility = shared OR owner = caller.user)`."""
    return {
        "bool": {
            "filter": [
                {"term": {"tenant_id": caller.tenant_id}},
                {
                    "bool": {
                        "should": [
                            {"term": {"visibility": Visibility.SHARED.value}},
                            {"term": {"owner": caller.user_id}},
                        ],
                        "minimum_should_match": 1,
                    }
                },
            ]
        }
    }


def search_filter(caller: Caller, filters: Filter | None, superseded: Collection[str] = ()) -> Body:
    """The access filter with the user's filter ANDed inside it: the user's part can only narrow.
    `superseded` generations are left out (a Serverless reader's second look, `citewise.aws.opensearch`)."""
    clauses = [access_filter(caller)]
    if filters is not None:
        clauses.append(translate_filter(filters))
    found: Body = {"bool": {"filter": clauses}}
    if superseded:
        found["bool"]["must_not"] = [{"terms": {"generation": sorted(superseded)}}]
    return found


MATCH_NONE: Body = {"match_none": {}}


def translate_filter(flt: Filter) -> Body:
    """The Bedrock-KB filter grammar as query DSL, with the semantics of `index.matching.matches`.

    A missing key never matches a positive operator (no value in the field) and always matches a
    negated one (`must_not`); a value of another type looks in another typed field, so never matches.
    """
    operator, operand = flt.operator, flt.operand
    if operator == "andAll":
        return {"bool": {"filter": [translate_filter(child) for child in operand]}}
    if operator == "orAll":
        return {"bool": {"should": [translate_filter(child) for child in operand], "minimum_should_match": 1}}
    comparison: Comparison = operand
    if operator in VERSION_OPERATORS:
        return _version(VERSION_OPERATORS[operator], comparison)
    if operator == "notEquals":
        return {"bool": {"must_not": [_equals(comparison.key, comparison.value)]}}
    if operator == "notIn":
        return {"bool": {"must_not": [_in(comparison.key, comparison.value)]}}
    return _POSITIVE[operator](comparison.key, comparison.value)


def _field(kind: str) -> str:
    return f"{ATTRIBUTES}.{kind}"


def _on_key(key: str, *clauses: Body, must_not: Sequence[Body] = ()) -> Body:
    """`clauses` (and none of `must_not`) true of the key's own entry in `attributes`."""
    inner: Body = {"filter": [{"term": {_field("key"): key}}, *clauses]}
    if must_not:
        inner["must_not"] = list(must_not)
    return {"nested": {"path": ATTRIBUTES, "query": {"bool": inner}}}


def _kind_of(value: Any) -> str | None:
    """The typed field a scalar filter value is compared in (None: no stored scalar can equal it)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int | float):
        return NUM
    if isinstance(value, str):
        return STR
    return None


def _equals(key: str, value: Any) -> Body:
    if isinstance(value, list):  # a list equals only the same list, in order
        return _on_key(key, {"term": {_field(LIST): _canonical_list(value)}})
    kind = _kind_of(value)
    # A string also equals a list attribute that contains it: the list's elements are in the str field.
    return _on_key(key, {"term": {_field(kind): value}}) if kind else MATCH_NONE


def _in(key: str, value: Any) -> Body:
    options = value if isinstance(value, list) else [value]
    if all(isinstance(option, str) for option in options):
        return _on_key(key, {"terms": {_field(STR): options}})
    return {"bool": {"should": [_equals(key, option) for option in options], "minimum_should_match": 1}}


def _scalar(key: str, clause: Body) -> Body:
    """`clause`, on keys holding a single value: ordered comparisons and prefixes never look in lists."""
    return _on_key(key, clause, must_not=[{"exists": {"field": _field(LIST)}}])


def _range(bound: str) -> Callable[[str, Any], Body]:
    def build(key: str, value: Any) -> Body:
        kind = _kind_of(value)
        if kind not in (NUM, STR):
            return MATCH_NONE
        return _scalar(key, {"range": {_field(kind): {bound: value}}})

    return build


def _version(plain: str, comparison: Comparison) -> Body:
    """A version operator: the plain comparison it mirrors, on the sort keys of the `#v:` entries."""
    key = VERSION_KEY_PREFIX + comparison.key
    value = parse_version(str(comparison.value)).sort_key  # a version string: `Filter` checked it
    if plain == "notEquals":
        return {"bool": {"must_not": [_on_key(key, {"term": {_field(STR): value}})]}}
    if plain == "equals":
        return _on_key(key, {"term": {_field(STR): value}})
    bound = {"greaterThan": "gt", "greaterThanOrEquals": "gte", "lessThan": "lt", "lessThanOrEquals": "lte"}[plain]
    return _on_key(key, {"range": {_field(STR): {bound: value}}})


def _starts_with(key: str, value: Any) -> Body:
    if not isinstance(value, str):
        return MATCH_NONE
    return _scalar(key, {"prefix": {_field(STR): {"value": value}}})


def _string_contains(key: str, value: Any) -> Body:
    if not isinstance(value, str):
        return MATCH_NONE
    pattern = "*" + _WILDCARD_SPECIAL.sub(r"\\\1", value) + "*"
    return _on_key(key, {"wildcard": {_field(STR): {"value": pattern}}})


def _list_contains(key: str, value: Any) -> Body:
    if not isinstance(value, str):
        return MATCH_NONE  # list attributes hold strings only
    return _on_key(key, {"term": {_field(STR): value}}, {"exists": {"field": _field(LIST)}})


_POSITIVE: dict[str, Callable[[str, Any], Body]] = {
    "equals": _equals,
    "greaterThan": _range("gt"),
    "greaterThanOrEquals": _range("gte"),
    "lessThan": _range("lt"),
    "lessThanOrEquals": _range("lte"),
    "in": _in,
    "startsWith": _starts_with,
    "stringContains": _string_contains,
    "listContains": _list_contains,
}


def _canonical_list(values: Sequence[Any]) -> str:
    return json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)


# --- searches ------------------------------------------------------------------------------------

_RESULT_SOURCE = {"includes": ["chunk", "generation"]}


def knn_query(vector: Vector, k: int, caller: Caller, filters: Filter | None, superseded: Collection[str] = ()) -> Body:
    """The `k` nearest chunks the caller may read that match `filters`.

    The access and user filters sit inside the `knn` clause (efficient filtering): the graph search
    itself skips other documents, so `k` readable results come back whenever `k` exist. A filter
    outside (`post_filter` or a bool around the knn) would cut the top k afterwards and lose results.
    """
    return {
        "size": k,
        "_source": _RESULT_SOURCE,
        "track_total_hits": False,
        "query": {
            "knn": {
                VECTOR_FIELD: {"vector": list(vector), "k": k, "filter": search_filter(caller, filters, superseded)}
            }
        },
    }


def bm25_query(text: str, k: int, caller: Caller, filters: Filter | None, superseded: Collection[str] = ()) -> Body:
    """The `k` best BM25 matches of `text` among the chunks the caller may read that match `filters`."""
    return {
        "size": k,
        "_source": _RESULT_SOURCE,
        "track_total_hits": False,
        "query": {
            "bool": {
                "must": [{"match": {TEXT_FIELD: {"query": text}}}],
                "filter": [search_filter(caller, filters, superseded)],
            }
        },
    }


PAGE_SIZE = 1000
# Field names alone (ascending, the default for a field): the API specification's `Sort` is a `oneOf`
# that a `{"field": "asc"}` object matches twice (FieldWithDirection and SortOptions), so a plain name is
# the one form it accepts unambiguously.
_DOCUMENT_ORDER = ["chunk_id", "generation"]


def document_chunks_query(
    tenant_id: str,
    doc_id: str,
    *,
    keep_generation: str | None = None,
    before_generation: str | None = None,
    search_after: list[str] | None = None,
    size: int = PAGE_SIZE,
) -> Body:
    """One page of a document's chunks (ids only), optionally leaving out one generation, or only those
    of generations older than `before_generation`.

    Sorted on (chunk_id, generation), unique per written chunk, so `search_after` pages without
    skipping or repeating; no scroll or point-in-time, which Serverless may not offer. (Only a bulk
    resent whole by a transport retry on Serverless writes a chunk twice with one generation; paging
    may skip such a twin, and the next replace or delete removes it.)
    """
    query: Body = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}, {"term": {"doc_id": doc_id}}]}}
    if keep_generation is not None:
        query["bool"]["must_not"] = [{"term": {"generation": keep_generation}}]
    if before_generation is not None:
        query["bool"]["filter"].append({"range": {"generation": {"lt": before_generation}}})
    body: Body = {"size": size, "_source": False, "track_total_hits": False, "query": query, "sort": _DOCUMENT_ORDER}
    if search_after is not None:
        body["search_after"] = search_after
    return body


_TENANT_ORDER = ["doc_id", "chunk_id", "generation"]


def tenant_entries_query(tenant_id: str, size: int, search_after: list[str] | None = None) -> Body:
    """One page of the tenant's entries (chunks and staged vectors, ids only), after `search_after`: what
    one step of an erasure deletes. Sorted on (doc_id, chunk_id, generation), unique per entry, so a pass
    pages through the tenant without meeting again what it deleted (a Serverless search still shows a
    deleted entry for up to a refresh window)."""
    body: Body = {
        "size": size,
        "_source": False,
        "track_total_hits": False,
        "query": {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}]}},
        "sort": _TENANT_ORDER,
    }
    if search_after is not None:
        body["search_after"] = search_after
    return body


def tenant_count_query(tenant_id: str) -> Body:
    """The exact number of the tenant's entries (`hits.total`), no hit returned: an erasure's proof. A
    search, not `_count`, so Serverless and a domain answer it alike."""
    return {"size": 0, "track_total_hits": True, "query": {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}]}}}


def vectors_by_hash_query(tenant_id: str, hashes: Collection[str]) -> Body:
    """One stored vector per content hash among the tenant's chunks and staged vectors (collapsed on
    the hash): a chunk's in `vector`, a staged one's in `chunk.staged_vector`."""
    return {
        "size": len(hashes),
        "_source": ["content_hash", VECTOR_FIELD, f"chunk.{STAGED_VECTOR}"],
        "track_total_hits": False,
        "query": {
            "bool": {"filter": [{"term": {"tenant_id": tenant_id}}, {"terms": {"content_hash": sorted(hashes)}}]}
        },
        "collapse": {"field": "content_hash"},
    }


def sources_query(caller: Caller, size: int = 1000) -> Body:
    """The distinct `source` values (up to `size`) of the chunks the caller may read: a terms aggregation."""
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {"bool": {"filter": [access_filter(caller)]}},
        "aggs": {"sources": {"terms": {"field": "source", "size": size}}},
    }


def newest_generations_query(tenant_id: str, doc_ids: Collection[str]) -> Body:
    """The newest generation searchable of each of these documents of the tenant: a terms aggregation
    on `doc_id` with the largest `generation` key under it.

    Deliberately without the caller's access filter: a document whose newest version is private must
    hide its older shared chunks from everyone else too. It returns ids and generations only.
    """
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}, {"terms": {"doc_id": sorted(doc_ids)}}]}},
        "aggs": {
            "documents": {
                "terms": {"field": "doc_id", "size": len(doc_ids)},
                "aggs": {"newest": {"terms": {"field": "generation", "size": 1, "order": {"_key": "desc"}}}},
            }
        },
    }


def new_generation(time_ns: int) -> str:
    """A generation for chunks written at `time_ns` (Unix nanoseconds): ordered as strings by time, and
    unique (a random suffix tells apart two writes of the same nanosecond)."""
    return f"{time_ns:020d}-{uuid.uuid4().hex[:16]}"
