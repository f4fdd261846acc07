"""Request bodies of the OpenSearch adapter, checked as plain dicts: mapping, documents, bulk payloads,
the access filter, the filter grammar's translation and the searches.

What the bodies *do* on a cluster is checked by the contract suite (tests/contract), against the
HTTP double and, when configured, a real OpenSearch.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from citewise.aws import opensearch_queries as q
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import (
    MAX_FILTER_BRANCHES,
    MAX_FILTER_LIST_VALUES,
    MAX_FILTER_NODES,
    Caller,
    Chunk,
    DocumentMetadata,
    Filter,
    Visibility,
)
from citewise.ports.router import Constraints, DateRange
from citewise.query.retrieval import MAX_KEYWORD_CHARS, Retriever, _both
from citewise.query.routing import MAX_ROUTED_NODES, constraint_filter

CALLER = Caller(tenant_id="acme", user_id="alice")
ACCESS = {
    "bool": {
        "filter": [
            {"term": {"tenant_id": "acme"}},
            {
                "bool": {
                    "should": [{"term": {"visibility": "shared"}}, {"term": {"owner": "alice"}}],
                    "minimum_should_match": 1,
                }
            },
        ]
    }
}
LIST_GUARD = {"exists": {"field": "attributes.list"}}


def _on(key: str, *clauses: dict[str, Any], must_not: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """`clauses` on the nested `attributes` entry of `key`."""
    inner: dict[str, Any] = {"filter": [{"term": {"attributes.key": key}}, *clauses]}
    if must_not:
        inner["must_not"] = must_not
    return {"nested": {"path": "attributes", "query": {"bool": inner}}}


def _k(*clauses: dict[str, Any]) -> dict[str, Any]:
    return _on("k", *clauses)


def _scalar(clause: dict[str, Any], key: str = "k") -> dict[str, Any]:
    """`clause` on a key holding one value (never a list), as ordered comparisons and prefixes need."""
    return _on(key, clause, must_not=[LIST_GUARD])


def _chunk(**attributes: Any) -> Chunk:
    document = DocumentMetadata(
        tenant_id="acme",
        doc_id="doc-1",
        owner="alice",
        visibility=Visibility.PRIVATE,
        source="wiki",
        channel="s3",
        source_date=datetime(2024, 6, 1, tzinfo=UTC),
        path="handbook/policy.md",
        title="Security Policy",
        tags=("security", "onboarding"),
        created_at=datetime(2024, 3, 1, 9, 30, tzinfo=UTC),
        updated_at=datetime(2024, 6, 15, 12, 0, tzinfo=UTC),
        attributes=attributes,
    )
    return Chunk(
        chunk_id="doc-1-00000",
        ordinal=0,
        text="Rotate keys every ninety days.",
        start=0,
        end=30,
        heading_path=("Security Policy", "Keys"),
        page=3,
        content_hash="hash-0",
        document=document,
    )


def _flt(operator: str, key: str, value: Any) -> Filter:
    return Filter.model_validate({operator: {"key": key, "value": value}})


# --- the index ------------------------------------------------------------------------------------


def test_index_body_maps_every_field_and_the_vector_space() -> None:
    # Given a 384-dimension embedder
    # When the index body is built with the defaults
    body = q.index_body(384, embedder="hashing-384")

    # Then it enables k-NN without shard settings (Serverless refuses them), defines the Snowball English
    # analyzer (the english analyzer's chain: possessives, lower case, `_english_` stop set) and maps each field
    assert body["settings"] == {
        "index": {"knn": True},
        "analysis": {
            "filter": {
                "citewise_possessive": {"type": "stemmer", "language": "possessive_english"},
                "citewise_stop": {"type": "stop", "stopwords": "_english_"},
                "citewise_snowball": {"type": "snowball", "language": "English"},
            },
            "analyzer": {
                "citewise_english": {
                    "type": "custom",
                    "tokenizer": "standard",
                    "filter": ["citewise_possessive", "lowercase", "citewise_stop", "citewise_snowball"],
                }
            },
        },
    }
    mappings = body["mappings"]
    assert mappings["_meta"] == {"embedder": "hashing-384", "dimension": 384, "schema": "3"}
    assert mappings["dynamic"] == "strict"
    assert mappings["date_detection"] is False
    assert mappings["numeric_detection"] is False
    assert "dynamic_templates" not in mappings
    keyword = {"type": "keyword"}
    assert mappings["properties"] == {
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
        "attributes": {
            "type": "nested",
            "properties": {
                "key": keyword,
                "str": {"type": "keyword", "ignore_above": 8191},
                "num": {"type": "double"},
                "bool": {"type": "boolean"},
                "list": {"type": "keyword", "ignore_above": 8191},
            },
        },
        "text": {"type": "text", "analyzer": "citewise_english"},
        "chunk": {"type": "object", "enabled": False},
        "vector": {
            "type": "knn_vector",
            "dimension": 384,
            "method": {
                "name": "hnsw",
                "engine": "faiss",
                "space_type": "innerproduct",
                "parameters": {"m": 16, "ef_construction": 512, "ef_search": 512},
            },
        },
    }


def test_index_body_takes_the_hnsw_knobs() -> None:
    # Given other graph parameters / When built / Then they land in the method
    body = q.index_body(8, embedder="e", space_type="l2", m=32, ef_construction=128, ef_search=64)
    method = body["mappings"]["properties"]["vector"]["method"]
    assert method == {
        "name": "hnsw",
        "engine": "faiss",
        "space_type": "l2",
        "parameters": {"m": 32, "ef_construction": 128, "ef_search": 64},
    }


def test_index_body_sets_the_replica_count_only_when_one_is_given() -> None:
    # Given a one-node domain (0 replicas) and Serverless (no replica setting at all)
    # When built / Then the one-node index asks for no replica, and the other body names none
    assert q.index_body(8, embedder="e", replicas=0)["settings"]["index"] == {"knn": True, "number_of_replicas": 0}
    assert q.index_body(8, embedder="e")["settings"]["index"] == {"knn": True}


@pytest.mark.parametrize("dot", [-1.0, -0.5, -0.01, 0.0, 0.01, 0.5, 0.999, 1.0])
def test_knn_score_to_cosine_undoes_the_faiss_innerproduct_transform(dot: float) -> None:
    # Given OpenSearch's score for an inner product: d = -dot; 1 - d if d < 0 else 1 / (1 + d)
    distance = -dot
    score = 1 - distance if distance < 0 else 1 / (1 + distance)

    # When converted back / Then it is the inner product (the cosine of unit vectors)
    assert q.knn_score_to_cosine(score) == pytest.approx(dot)


# --- documents ------------------------------------------------------------------------------------


def test_filterable_fields_type_the_metadata_view_with_system_fields_winning() -> None:
    # Given a chunk with custom attributes of every type, one trying to shadow the owner
    chunk = _chunk(dept="eng", year=2023, rating=4.5, public=True, regions=["eu", "us"], owner="mallory")

    # When its filterable fields are built
    fields = q.filterable_fields(chunk)

    # Then each key is one entry with its value under its JSON type, lists also as canonical JSON, and
    # the real owner wins
    assert {entry["key"]: entry for entry in fields} == {
        "dept": {"key": "dept", "str": "eng"},
        "year": {"key": "year", "num": 2023},
        "rating": {"key": "rating", "num": 4.5},
        "public": {"key": "public", "bool": True},
        "regions": {"key": "regions", "str": ["eu", "us"], "list": '["eu","us"]'},
        "owner": {"key": "owner", "str": "alice"},
        "doc_id": {"key": "doc_id", "str": "doc-1"},
        "visibility": {"key": "visibility", "str": "private"},
        "source": {"key": "source", "str": "wiki"},
        "channel": {"key": "channel", "str": "s3"},
        "source_date": {"key": "source_date", "str": "2024-06-01T00:00:00+00:00"},
        "path": {"key": "path", "str": "handbook/policy.md"},
        "title": {"key": "title", "str": "Security Policy"},
        "tags": {"key": "tags", "str": ["security", "onboarding"], "list": '["security","onboarding"]'},
        "created_at": {"key": "created_at", "str": "2024-03-01T09:30:00+00:00"},
        "updated_at": {"key": "updated_at", "str": "2024-06-15T12:00:00+00:00"},
        "page": {"key": "page", "num": 3},
    }
    assert len(fields) == 17  # one entry per key, never two


def test_a_version_attribute_also_has_an_entry_holding_its_sort_key() -> None:
    # Given a chunk declaring a version and a deprecation
    chunk = _chunk(version="3.12", deprecated_in="3.13rc1")

    # When its filterable fields are built
    entries = {entry["key"]: entry for entry in q.filterable_fields(chunk)}

    # Then each keeps its string entry and gains a `#v:` entry with the fixed-width key that orders as versions
    assert entries["version"] == {"key": "version", "str": "3.12"}
    assert entries["#v:version"] == {"key": "#v:version", "str": "00003000120000000000400000000"}
    assert entries["#v:deprecated_in"] == {"key": "#v:deprecated_in", "str": "00003000130000000000300010000"}


def test_a_version_comparison_is_a_range_on_the_sort_key_entry() -> None:
    flt = Filter.model_validate({"versionLessThan": {"key": "version", "value": "3.12"}})
    nested = {"path": "attributes", "query": {"bool": {"filter": [{"term": {"attributes.key": "#v:version"}}]}}}
    nested["query"]["bool"]["filter"].append({"range": {"attributes.str": {"lt": "00003000120000000000400000000"}}})
    assert q.translate_filter(flt) == {"nested": nested}
    negated = q.translate_filter(Filter.model_validate({"versionNotEquals": {"key": "version", "value": "1"}}))
    assert list(negated["bool"]) == ["must_not"]


def test_a_missing_page_is_no_field_at_all() -> None:
    chunk = _chunk().model_copy(update={"page": None})
    assert "page" not in {entry["key"] for entry in q.filterable_fields(chunk)}


def test_document_source_holds_system_fields_bm25_text_the_chunk_and_its_vector() -> None:
    # Given a chunk and its vector
    chunk = _chunk(dept="eng")

    # When its source is built
    source = q.document_source(chunk, [0.6, 0.8], generation="g1")

    # Then it has everything the mapping declares, and the chunk round-trips
    assert source == {
        "tenant_id": "acme",
        "doc_id": "doc-1",
        "chunk_id": "doc-1-00000",
        "generation": "g1",
        "owner": "alice",
        "visibility": "private",
        "source": "wiki",
        "channel": "s3",
        "source_date": "2024-06-01T00:00:00+00:00",
        "path": "handbook/policy.md",
        "tags": ["security", "onboarding"],
        "content_hash": "hash-0",
        "created_at": "2024-03-01T09:30:00+00:00",
        "updated_at": "2024-06-15T12:00:00+00:00",
        "page": 3,
        "attributes": q.filterable_fields(chunk),
        "text": "Security Policy > Keys\nSecurity Policy > Keys\nRotate keys every ninety days.",
        "chunk": chunk.model_dump(mode="json"),
        "vector": [0.6, 0.8],
    }
    assert Chunk.model_validate(json.loads(json.dumps(source["chunk"]))) == chunk
    assert set(source) == set(q.index_body(2, embedder="e")["mappings"]["properties"])


def test_bulk_actions_use_tenant_qualified_ids_on_a_domain_and_none_on_serverless() -> None:
    # Given one chunk
    chunk = _chunk()

    # When bulk actions are built for each target
    domain = q.bulk_actions([chunk], [[1.0]], generation="g", serverless=False)
    serverless = q.bulk_actions([chunk], [[1.0]], generation="g", serverless=True)

    # Then the domain gets `<tenant>/<chunk_id>`, Serverless lets the service choose; neither names an
    # index (the request path does)
    assert domain == [({"index": {"_id": "acme/doc-1-00000"}}, q.document_source(chunk, [1.0], generation="g"))]
    assert serverless == [({"index": {}}, q.document_source(chunk, [1.0], generation="g"))]


def test_delete_actions_have_no_source_line() -> None:
    assert q.delete_actions(["a", "b"]) == [({"delete": {"_id": "a"}}, None), ({"delete": {"_id": "b"}}, None)]


def test_bulk_payloads_are_ndjson_split_under_the_byte_limit() -> None:
    # Given five index actions of about 60 bytes each and two deletes
    actions: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
        ({"index": {"_id": str(i)}}, {"text": "x" * 30}) for i in range(5)
    ]
    actions += q.delete_actions(["a", "b"])

    # When split into payloads of at most 150 bytes
    payloads = list(q.bulk_payloads(actions, max_bytes=150))

    # Then every payload fits, ends with a newline, and together they hold every action once, in order
    assert all(len(body.encode()) <= 150 and body.endswith("\n") for body, _ in payloads)
    assert [p for _, positions in payloads for p in positions] == list(range(7))
    lines = [json.loads(line) for body, _ in payloads for line in body.splitlines()]
    assert lines[:2] == [{"index": {"_id": "0"}}, {"text": "x" * 30}]
    assert lines[-1] == {"delete": {"_id": "b"}}
    assert len(payloads) > 2


def test_an_action_larger_than_the_limit_goes_alone() -> None:
    actions: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
        ({"index": {}}, {"t": "small"}),
        ({"index": {}}, {"t": "x" * 500}),
        ({"index": {}}, {"t": "small"}),
    ]
    assert [positions for _, positions in q.bulk_payloads(actions, max_bytes=100)] == [[0], [1], [2]]


def test_the_default_payload_limit_is_ten_mebibytes() -> None:
    assert q.MAX_BULK_BYTES == 10 * 1024 * 1024


# --- access and filters ---------------------------------------------------------------------------


def test_access_filter_is_tenant_and_shared_or_owned() -> None:
    assert q.access_filter(CALLER) == ACCESS


def test_search_filter_ands_the_user_filter_inside_the_access_filter() -> None:
    flt = _flt("equals", "dept", "eng")
    assert q.search_filter(CALLER, None) == {"bool": {"filter": [ACCESS]}}
    user = _on("dept", {"term": {"attributes.str": "eng"}})
    assert q.search_filter(CALLER, flt) == {"bool": {"filter": [ACCESS, user]}}


TRANSLATIONS: list[tuple[str, Any, dict[str, Any]]] = [
    ("equals", "eng", _k({"term": {"attributes.str": "eng"}})),
    ("equals", 2023, _k({"term": {"attributes.num": 2023}})),
    ("equals", 4.5, _k({"term": {"attributes.num": 4.5}})),
    ("equals", True, _k({"term": {"attributes.bool": True}})),
    ("equals", ["eu", "us"], _k({"term": {"attributes.list": '["eu","us"]'}})),
    ("notEquals", "eng", {"bool": {"must_not": [_k({"term": {"attributes.str": "eng"}})]}}),
    ("notEquals", 3, {"bool": {"must_not": [_k({"term": {"attributes.num": 3}})]}}),
    ("greaterThan", 2020, _scalar({"range": {"attributes.num": {"gt": 2020}}})),
    ("greaterThanOrEquals", "2024-01", _scalar({"range": {"attributes.str": {"gte": "2024-01"}}})),
    ("lessThan", 5, _scalar({"range": {"attributes.num": {"lt": 5}}})),
    ("lessThanOrEquals", 4.5, _scalar({"range": {"attributes.num": {"lte": 4.5}}})),
    ("greaterThan", True, q.MATCH_NONE),
    ("lessThan", ["a"], q.MATCH_NONE),
    ("in", ["eng", "ops"], _k({"terms": {"attributes.str": ["eng", "ops"]}})),
    ("in", "eng", _k({"terms": {"attributes.str": ["eng"]}})),
    ("in", 2023, {"bool": {"should": [_k({"term": {"attributes.num": 2023}})], "minimum_should_match": 1}}),
    ("notIn", ["apac"], {"bool": {"must_not": [_k({"terms": {"attributes.str": ["apac"]}})]}}),
    ("startsWith", "handbook/", _scalar({"prefix": {"attributes.str": {"value": "handbook/"}}})),
    ("startsWith", 20, q.MATCH_NONE),
    ("stringContains", "a*b?c\\d", _k({"wildcard": {"attributes.str": {"value": "*a\\*b\\?c\\\\d*"}}})),
    ("stringContains", 5, q.MATCH_NONE),
    ("listContains", "eu", _k({"term": {"attributes.str": "eu"}}, LIST_GUARD)),
    ("listContains", 5, q.MATCH_NONE),
]


@pytest.mark.parametrize(("operator", "value", "expected"), TRANSLATIONS)
def test_each_operator_translates_to_its_typed_field(operator: str, value: Any, expected: dict[str, Any]) -> None:
    # Given a single comparison on key `k` / When translated / Then the DSL looks in the value's typed field
    assert q.translate_filter(_flt(operator, "k", value)) == expected


def test_any_key_is_a_value_never_a_field_name() -> None:
    # A dot, a leading underscore or any script in a key cannot make an object path or a new field
    for key in ("a.b", "_private", "Größe"):
        assert q.translate_filter(_flt("equals", key, "x")) == _on(key, {"term": {"attributes.str": "x"}})


def test_logical_operators_nest() -> None:
    # Given andAll of an equals and an orAll of two comparisons
    flt = Filter.model_validate(
        {
            "andAll": [
                {"equals": {"key": "source", "value": "wiki"}},
                {
                    "orAll": [
                        {"greaterThan": {"key": "year", "value": 2020}},
                        {"listContains": {"key": "tags", "value": "x"}},
                    ]
                },
            ]
        }
    )

    # When translated / Then andAll is a filter-only bool and orAll a should with one required match
    assert q.translate_filter(flt) == {
        "bool": {
            "filter": [
                _on("source", {"term": {"attributes.str": "wiki"}}),
                {
                    "bool": {
                        "should": [
                            _scalar({"range": {"attributes.num": {"gt": 2020}}}, key="year"),
                            _on("tags", {"term": {"attributes.str": "x"}}, LIST_GUARD),
                        ],
                        "minimum_should_match": 1,
                    }
                },
            ]
        }
    }


# --- searches -------------------------------------------------------------------------------------


def test_knn_query_puts_access_and_user_filters_inside_the_knn_clause() -> None:
    # Given a filter
    flt = _flt("equals", "dept", "eng")

    # When the k-NN query is built
    body = q.knn_query([0.6, 0.8], 5, CALLER, flt)

    # Then the filter is the knn clause's own (efficient filtering), and only the chunk is returned
    assert body == {
        "size": 5,
        "_source": {"includes": ["chunk", "generation"]},
        "track_total_hits": False,
        "query": {
            "knn": {
                "vector": {
                    "vector": [0.6, 0.8],
                    "k": 5,
                    "filter": {"bool": {"filter": [ACCESS, _on("dept", {"term": {"attributes.str": "eng"}})]}},
                }
            }
        },
    }


def test_bm25_query_matches_text_inside_the_same_filter() -> None:
    assert q.bm25_query("rotate keys", 7, CALLER, None) == {
        "size": 7,
        "_source": {"includes": ["chunk", "generation"]},
        "track_total_hits": False,
        "query": {
            "bool": {
                "must": [{"match": {"text": {"query": "rotate keys"}}}],
                "filter": [{"bool": {"filter": [ACCESS]}}],
            }
        },
    }


def test_document_chunks_query_pages_on_chunk_id_and_generation() -> None:
    # Given the first page of all chunks, and a later page leaving out the current generation
    first = q.document_chunks_query("acme", "doc-1")
    later = q.document_chunks_query("acme", "doc-1", keep_generation="g2", search_after=["doc-1-00003", "g1"], size=10)

    # Then both filter by tenant and document, sort on a unique key and return ids only
    scope = [{"term": {"tenant_id": "acme"}}, {"term": {"doc_id": "doc-1"}}]
    order = ["chunk_id", "generation"]
    assert first == {
        "size": 1000,
        "_source": False,
        "track_total_hits": False,
        "query": {"bool": {"filter": scope}},
        "sort": order,
    }
    assert later == {
        "size": 10,
        "_source": False,
        "track_total_hits": False,
        "query": {"bool": {"filter": scope, "must_not": [{"term": {"generation": "g2"}}]}},
        "sort": order,
        "search_after": ["doc-1-00003", "g1"],
    }


def test_vectors_by_hash_query_collapses_on_the_hash_inside_the_tenant() -> None:
    assert q.vectors_by_hash_query("acme", {"h2", "h1"}) == {
        "size": 2,
        "_source": ["content_hash", "vector", "chunk.staged_vector"],
        "track_total_hits": False,
        "query": {"bool": {"filter": [{"term": {"tenant_id": "acme"}}, {"terms": {"content_hash": ["h1", "h2"]}}]}},
        "collapse": {"field": "content_hash"},
    }


def test_a_staged_vector_has_none_of_the_fields_a_read_filters_on_and_no_knn_vector() -> None:
    # When a domain's and a Serverless collection's staging actions are built
    [(domain_action, source)] = q.staged_actions("acme", "doc1", {"h1": [0.5, 0.5]}, serverless=False)
    [(serverless_action, _)] = q.staged_actions("acme", "doc1", {"h1": [0.5, 0.5]}, serverless=True)

    # Then the domain's id is fixed by (tenant, document, hash), Serverless picks its own
    assert domain_action == {"index": {"_id": "acme/staged:doc1:h1"}}
    assert serverless_action == {"index": {}}
    # and the entry carries only what finds it by hash and removes it with its document: no owner or
    # visibility (so the access filter of every search leaves it out), no text, no k-NN vector
    assert source == {
        "tenant_id": "acme",
        "doc_id": "doc1",
        "chunk_id": "staged:doc1:h1",
        "generation": q.STAGED_GENERATION,
        "content_hash": "h1",
        "chunk": {"staged_vector": [0.5, 0.5]},
    }
    assert q.STAGED_GENERATION < q.new_generation(0)  # older than any written generation


# --- limits: what the largest filter the model accepts becomes --------------------------------------

MAX_CLAUSE_COUNT = 1024
"""OpenSearch's default `indices.query.bool.max_clause_count`: a query with more clauses in all is refused."""
MAX_TERMS_COUNT = 65536
"""OpenSearch's default `index.max_terms_count`: the most values one `terms` query may hold."""
_LEAF_QUERY_TYPES = {"term", "terms", "range", "prefix", "wildcard", "exists", "match_none", "match", "knn"}


def _clauses(body: Any) -> int:
    """Leaf queries in a DSL tree: what `indices.query.bool.max_clause_count` limits. Since Lucene 9
    (OpenSearch 2.x) IndexSearcher counts the leaf clauses of the whole tree, through `bool` and
    `nested` (block join) queries alike, and not the compound queries themselves."""
    if isinstance(body, list):
        return sum(_clauses(item) for item in body)
    if not isinstance(body, dict):
        return 0
    own = sum(1 for key in body if key in _LEAF_QUERY_TYPES)
    return own + sum(_clauses(value) for value in body.values())


def _terms_lists(body: Any) -> list[list[Any]]:
    if isinstance(body, list):
        return [found for item in body for found in _terms_lists(item)]
    if not isinstance(body, dict):
        return []
    own = [values for values in body["terms"].values() if isinstance(values, list)] if "terms" in body else []
    return own + [found for value in body.values() for found in _terms_lists(value)]


def _largest_tree(leaf: dict[str, Any]) -> Filter:
    """The most leaves the limits allow: 5 `andAll`s of 20 leaves and 15 more leaves, 121 objects in all."""
    groups = [{"andAll": [leaf] * MAX_FILTER_BRANCHES} for _ in range(5)]
    tree = Filter.model_validate({"orAll": groups + [leaf] * 15})
    assert tree.node_count == MAX_FILTER_NODES
    return tree


WORST_LEAVES = [
    {"listContains": {"key": "k", "value": "x"}},
    {"greaterThan": {"key": "k", "value": 2}},
    {"startsWith": {"key": "k", "value": "x"}},
    {"in": {"key": "k", "value": 7}},
    {"notIn": {"key": "k", "value": [f"v{n}" for n in range(MAX_FILTER_LIST_VALUES)]}},
]


@pytest.mark.parametrize("leaf", WORST_LEAVES, ids=lambda leaf: next(iter(leaf)))
def test_the_largest_accepted_filter_stays_well_inside_opensearchs_clause_limit(leaf: dict[str, Any]) -> None:
    # Given the largest tree the model accepts, of the leaf that costs the most clauses
    tree = _largest_tree(leaf)
    # When it becomes a k-NN and a BM25 query, with the access filter around it
    for body in (q.knn_query([0.1, 0.2], 10, CALLER, tree), q.bm25_query("keys", 10, CALLER, tree)):
        # Then the clauses in all stay under half the default limit (the rest is headroom for the query text)
        assert _clauses(body) <= MAX_CLAUSE_COUNT // 2
        # And every terms query holds no more values than one list may
        assert all(len(values) <= MAX_FILTER_LIST_VALUES < MAX_TERMS_COUNT for values in _terms_lists(body))


class _RecordingIndex:
    """A VectorIndex that records the text of each keyword search and returns nothing."""

    def __init__(self) -> None:
        self.keyword_texts: list[str] = []

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[Any]:
        self.keyword_texts.append(query)
        return []

    def vector_search(self, caller: Caller, vector: Any, filters: Filter | None, limit: int) -> list[Any]:
        return []


@pytest.mark.parametrize(
    "question",
    ["why " * 2500, "天" * 10_000, "x-y " * 2500],
    ids=["10,000 characters of words", "10,000 ideographs", "10,000 characters of hyphenated words"],
)
def test_a_question_of_any_length_with_the_largest_filter_stays_inside_the_clause_limit(question: str) -> None:
    # Given the longest question a request may hold and the largest filter, of the costliest leaf
    assert len(question) == 10_000
    tree = _largest_tree(WORST_LEAVES[0])
    index = _RecordingIndex()
    # When the retriever runs its keyword ranking
    Retriever(index, HashingEmbedder(16), mode="hybrid").rank(CALLER, question, tree, 10)  # type: ignore[arg-type]
    # Then the text it hands the index is a prefix of whole words of at most MAX_KEYWORD_CHARS characters
    [text] = index.keyword_texts
    assert question.startswith(text) and 0 < len(text) <= MAX_KEYWORD_CHARS
    # And even if every character of it became a term clause, the whole query stays under the limit
    assert _clauses(q.bm25_query(text, 10, CALLER, tree)) + len(text) <= MAX_CLAUSE_COUNT


@pytest.mark.parametrize("leaf", WORST_LEAVES, ids=lambda leaf: next(iter(leaf)))
def test_the_largest_filter_with_the_largest_routed_filter_stays_inside_the_clause_limit(leaf: dict[str, Any]) -> None:
    # Given the largest tree the model accepts, and the largest filter routing adds to it (many date ranges,
    # as many sources as one list may hold), ANDed without validating the pair again (issue 32)
    tree = _largest_tree(leaf)
    day = datetime(2026, 1, 1, tzinfo=UTC)
    constraints = Constraints(
        dates=[DateRange(start=day, end=day + timedelta(days=n)) for n in range(1, 30)],
        sources=[f"s{n}" for n in range(MAX_FILTER_LIST_VALUES)],
    )
    routed = constraint_filter(constraints)
    assert routed is not None and routed.node_count <= MAX_ROUTED_NODES
    both = _both(tree, routed)
    assert both is not None and both.node_count == MAX_FILTER_NODES + 1 + routed.node_count
    # When it becomes a BM25 query of the longest keyword text, and a k-NN query
    text = "天" * MAX_KEYWORD_CHARS
    # Then even if every character became a term clause, the query stays under the limit
    assert _clauses(q.bm25_query(text, 10, CALLER, both)) + len(text) <= MAX_CLAUSE_COUNT
    assert _clauses(q.knn_query([0.1, 0.2], 10, CALLER, both)) <= MAX_CLAUSE_COUNT // 2
