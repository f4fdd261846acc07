"""One VectorIndex contract, run against every adapter: the embedded LocalIndex, OpenSearchIndex on the
real OpenSearch node with the production mapping (`opensearch-real`, marked `opensearch`; see
tests/opensearch_node.py) and on the HTTP double as a managed domain and as a Serverless collection. The
double stays for what one real node cannot show (Serverless refresh lag and its refusals, injected
faults); running the same contract on it and on the node keeps it from drifting from the engine. Then
fault tests of the OpenSearch adapter alone (partial bulk failures, 429, connection errors, malformed
answers) and its extras (paging, payload splitting, document counts, SigV4).

Each real-node test creates its own index (`citewise-test-<random>`) and deletes it afterwards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from opensearchpy import OpenSearch
from opensearchpy.exceptions import RequestError, TransportError

from citewise.aws.opensearch import OpenSearchIndex, connect
from citewise.aws.opensearch_queries import index_body, new_generation
from citewise.aws.s3vectors import S3VectorsIndex
from citewise.aws.tenant_keys import TenantKeys
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.errors import SearchBackendError, ThrottledError, ValidationError
from citewise.domain.models import AttributeValue, Caller, Chunk, DocumentMetadata, Filter, SearchRequest, Visibility
from citewise.ports.index import ScoredChunk, VectorIndex
from citewise.ports.sweeps import StaleSweep
from citewise.query.retrieval import Retriever
from citewise_local.index import LocalIndex
from tests.doubles.opensearch_server import FakeOpenSearch, RunningServer, running
from tests.doubles.s3vectors import FakeS3Vectors
from tests.opensearch_node import NODE, fresh_index_name
from tests.unit.test_filters import CASES, POSITIVE_ON_MISSING, TYPE_MISMATCHES
from tests.unit.test_filters import _chunk as filter_example_chunk

DIMENSION = 64
EMBEDDER = HashingEmbedder(DIMENSION)
T0 = datetime(2024, 5, 1, tzinfo=UTC)
ADAPTERS = [
    "local",
    pytest.param("opensearch-real", marks=pytest.mark.opensearch),
    "opensearch-domain",
    "opensearch-serverless",
    "s3vectors",
    "s3vectors-keys",
]
ALICE = Caller(tenant_id="acme", user_id="alice")
BOB = Caller(tenant_id="acme", user_id="bob")


# --- adapters ---------------------------------------------------------------------------------------


@contextmanager
def open_index(kind: str, directory: Path) -> Iterator[VectorIndex]:
    """A fresh, empty index of the given kind; removed afterwards."""
    if kind == "local":
        local = LocalIndex(directory / "index.db")
        try:
            yield local
        finally:
            local.close()
    elif kind == "opensearch-real":
        client = NODE.client()
        name = fresh_index_name()
        try:
            yield OpenSearchIndex(client, name, serverless=False)
        finally:
            client.indices.delete(index=name, ignore_unavailable=True)
            client.close()
    elif kind == "s3vectors":
        fake = FakeS3Vectors()
        fake.create_bucket("citewise-test")
        yield S3VectorsIndex(fake.client(), "citewise-test")
    elif kind == "s3vectors-keys":  # a KMS key per tenant (moto's KMS), each index created under its own
        fake = FakeS3Vectors()
        bucket = fake.create_bucket("citewise-test")
        with mock_aws():
            kms = boto3.client("kms", region_name=fake.region, aws_access_key_id="x", aws_secret_access_key="x")  # noqa: S106
            keys = TenantKeys(lambda: kms, scope="citewise-test", bucket_arn=bucket.arn)
            yield S3VectorsIndex(fake.client(), "citewise-test", keys=keys)
    else:
        with running(FakeOpenSearch(serverless=kind == "opensearch-serverless")) as server:
            client = OpenSearch(hosts=[server.url], timeout=10)
            yield OpenSearchIndex(client, "chunks", serverless=server.fake.serverless)
            client.close()


@pytest.fixture(params=ADAPTERS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    """An ensured, empty index of each adapter."""
    with open_index(request.param, tmp_path) as opened:
        opened.ensure(EMBEDDER.name, DIMENSION)
        yield opened


def make_chunk(
    tenant_id: str,
    doc_id: str,
    ordinal: int,
    text: str,
    *,
    owner: str = "alice",
    visibility: Visibility = Visibility.SHARED,
    title: str = "Notes",
    attributes: dict[str, AttributeValue] | None = None,
) -> Chunk:
    document = DocumentMetadata(
        tenant_id=tenant_id,
        doc_id=doc_id,
        owner=owner,
        visibility=visibility,
        source="s3",
        path=f"{doc_id}.md",
        title=title,
        created_at=T0,
        updated_at=T0,
        attributes=attributes or {},
    )
    return Chunk(
        chunk_id=f"{tenant_id}-{doc_id}-{ordinal:05d}",
        ordinal=ordinal,
        text=text,
        start=0,
        end=len(text),
        content_hash=f"hash:{text}",
        document=document,
    )


def put(index: VectorIndex, *chunks: Chunk) -> None:
    """Replace the document of `chunks` (all of one document) with them, embedded by the hashing embedder."""
    doc = chunks[0].document
    index.replace_document(doc.tenant_id, doc.doc_id, chunks, EMBEDDER.embed_documents([c.text for c in chunks]))


def ids(results: list[ScoredChunk]) -> list[str]:
    return [scored.chunk.chunk_id for scored in results]


def keyword(index: VectorIndex, caller: Caller, query: str, flt: Filter | None = None, limit: int = 50) -> list[str]:
    return ids(index.keyword_search(caller, query, flt, limit))


def vector(index: VectorIndex, caller: Caller, text: str, flt: Filter | None = None, limit: int = 50) -> list[str]:
    return ids(index.vector_search(caller, EMBEDDER.embed_query(text), flt, limit))


# --- the contract -----------------------------------------------------------------------------------


def test_ensure_is_idempotent_and_refuses_another_vector_space(index: VectorIndex) -> None:
    # Given an index ensured for the hashing embedder (by the fixture)
    # When it is ensured again for the same space / Then nothing happens
    index.ensure(EMBEDDER.name, DIMENSION)

    # When it is ensured for another embedder or dimension / Then it refuses, naming the backend error
    with pytest.raises(SearchBackendError):
        index.ensure("another-embedder", DIMENSION)
    with pytest.raises(SearchBackendError):
        index.ensure(EMBEDDER.name, DIMENSION * 2)


def test_replace_document_leaves_no_stale_chunk(index: VectorIndex) -> None:
    # Given a document of three chunks
    old = [
        make_chunk("acme", "guide", 0, "apple orchard pruning"),
        make_chunk("acme", "guide", 1, "banana ripening rooms"),
        make_chunk("acme", "guide", 2, "cherry blossom season"),
    ]
    put(index, *old)

    # When it is replaced by two chunks, the first one rewritten
    new = [make_chunk("acme", "guide", 0, "walnut harvest timing"), old[1]]
    put(index, *new)

    # Then only the new chunks are found, by either search, and the removed texts nowhere
    assert keyword(index, ALICE, "walnut") == [new[0].chunk_id]
    assert keyword(index, ALICE, "banana") == [new[1].chunk_id]
    assert keyword(index, ALICE, "apple cherry") == []
    assert sorted(vector(index, ALICE, "anything at all")) == sorted(c.chunk_id for c in new)
    [found] = index.keyword_search(ALICE, "walnut", None, 5)
    assert found.chunk == new[0]
    assert set(index.vectors_by_hash("acme", [c.content_hash for c in old + new])) == {c.content_hash for c in new}


def test_replacing_with_no_chunks_empties_the_document_and_replacing_again_restores_it(index: VectorIndex) -> None:
    # Given a document
    chunk = make_chunk("acme", "memo", 0, "quartz crystal inventory")
    put(index, chunk)

    # When replaced by nothing, then by its chunk again in quick succession
    index.replace_document("acme", "memo", [], [])
    emptied = keyword(index, ALICE, "quartz")
    put(index, chunk)
    put(index, chunk)

    # Then it was empty in between and holds exactly one copy now
    assert emptied == []
    assert keyword(index, ALICE, "quartz") == [chunk.chunk_id]


def test_delete_document_removes_its_chunks_only(index: VectorIndex) -> None:
    # Given two documents
    put(index, make_chunk("acme", "a", 0, "ginger tea recipe"), make_chunk("acme", "a", 1, "ginger biscuits"))
    put(index, make_chunk("acme", "b", 0, "ginger beer brewing"))

    # When one is deleted, twice
    removed = index.delete_document("acme", "a")
    removed_again = index.delete_document("acme", "a")

    # Then its chunks are gone and counted once; the other document stays
    assert (removed, removed_again) == (2, 0)
    assert keyword(index, ALICE, "ginger") == ["acme-b-00000"]
    assert vector(index, ALICE, "ginger tea recipe") == ["acme-b-00000"]


def test_delete_document_is_per_tenant(index: VectorIndex) -> None:
    # Given documents in two tenants
    put(index, make_chunk("acme", "acme-doc", 0, "salmon fishing"))
    put(index, make_chunk("globex", "globex-doc", 0, "salmon farming"))

    # When a tenant names the other tenant's document / Then nothing is removed
    assert index.delete_document("acme", "globex-doc") == 0
    assert keyword(index, Caller(tenant_id="globex", user_id="x"), "salmon") == ["globex-globex-doc-00000"]


def test_vectors_by_hash_returns_stored_vectors_within_the_tenant(index: VectorIndex) -> None:
    # Given the same text in two tenants, and another text in one
    shared_text = "pepper grinder review"
    put(index, make_chunk("acme", "d1", 0, shared_text), make_chunk("acme", "d1", 1, "salt cellar"))
    put(index, make_chunk("globex", "d2", 0, "only globex has this"))
    acme_hashes = [f"hash:{shared_text}", "hash:salt cellar"]

    # When each tenant asks for the hashes, with one unknown and one of the other tenant
    acme = index.vectors_by_hash("acme", [*acme_hashes, "hash:unknown", "hash:only globex has this"])
    globex = index.vectors_by_hash("globex", acme_hashes)

    # Then each gets only its own, with the stored vector
    assert set(acme) == set(acme_hashes)
    assert acme[f"hash:{shared_text}"] == pytest.approx(EMBEDDER.embed_query(shared_text), abs=1e-6)
    assert globex == {}
    assert index.vectors_by_hash("acme", []) == {}


def test_staged_vectors_are_found_by_hash_in_their_tenant_and_by_no_search(index: VectorIndex) -> None:
    # Given a shared document, and vectors staged for a new document whose texts share its words
    put(index, make_chunk("acme", "wiki", 0, "orchard pruning guide"))
    staged_texts = ["orchard pruning in winter", "orchard pruning tools"]
    staged = dict(zip([f"hash:{t}" for t in staged_texts], EMBEDDER.embed_documents(staged_texts), strict=True))
    index.stage_vectors("acme", "big", staged)
    index.stage_vectors("acme", "big", staged)  # a retried batch stages again

    # When the tenant's vectors are looked up by hash, and everyone searches
    found = index.vectors_by_hash("acme", [*staged, "hash:orchard pruning guide"])

    # Then the staged vectors are found, in their tenant only, once each hash
    assert set(found) == {*staged, "hash:orchard pruning guide"}
    for content_hash, staged_vector in staged.items():
        assert found[content_hash] == pytest.approx(staged_vector, abs=1e-6)
    assert index.vectors_by_hash("globex", list(staged)) == {}
    # and no search, by anyone, sees anything but the document's chunk: staged vectors are not chunks
    for caller in (ALICE, BOB):
        assert keyword(index, caller, "orchard pruning winter tools") == ["acme-wiki-00000"]
        assert vector(index, caller, staged_texts[0]) == ["acme-wiki-00000"]
    assert index.sources(ALICE) == ["s3"]


def test_replace_and_delete_drop_the_documents_staged_vectors_unless_asked_to_keep_them(index: VectorIndex) -> None:
    # Given vectors staged for two documents, one of which exists already
    put(index, make_chunk("acme", "big", 0, "old version"))
    texts = ["first batch text", "second batch text", "other document text"]
    vectors = dict(zip([f"hash:{t}" for t in texts], EMBEDDER.embed_documents(texts), strict=True))
    index.stage_vectors("acme", "big", {h: vectors[h] for h in list(vectors)[:2]})
    index.stage_vectors("acme", "other", {"hash:other document text": vectors["hash:other document text"]})

    # When the first document's chunks are deleted keeping its staged vectors (a transient failure)
    removed = index.delete_document("acme", "big", keep_staged=True)

    # Then its one chunk was removed and counted, its staged vectors kept
    assert removed == 1
    assert set(index.vectors_by_hash("acme", list(vectors))) == set(vectors)

    # When it is replaced by a chunk of the first staged text
    put(index, make_chunk("acme", "big", 0, "first batch text"))

    # Then only that chunk's vector and the other document's staged one are left
    assert set(index.vectors_by_hash("acme", list(vectors))) == {"hash:first batch text", "hash:other document text"}

    # When the other document is deleted (a delete, or a permanent failure) / Then its staged vector goes,
    # and a delete counts chunks only
    assert index.delete_document("acme", "other") == 0
    assert index.vectors_by_hash("acme", list(vectors)) == {
        "hash:first batch text": pytest.approx(vectors["hash:first batch text"], abs=1e-6)
    }


def test_staged_vectors_of_another_dimension_are_refused(index: VectorIndex) -> None:
    with pytest.raises(SearchBackendError):
        index.stage_vectors("acme", "big", {"hash:x": [1.0] * (DIMENSION + 1)})


def test_keyword_search_ranks_the_obvious_match_first(index: VectorIndex) -> None:
    # Given one chunk all about cherries, one mentioning them once, one without
    put(
        index,
        make_chunk("acme", "fruit", 0, "cherry cherry cherry: cherry varieties and cherry pies"),
        make_chunk("acme", "fruit", 1, "a long text about many fruits, apples, pears, plums and one cherry tree"),
        make_chunk("acme", "fruit", 2, "vegetables only: carrots and leeks"),
    )

    # When searched by keyword
    results = index.keyword_search(ALICE, "cherries", None, 10)

    # Then the dense chunk comes first, the unrelated one not at all, scores descending and positive
    assert ids(results) == ["acme-fruit-00000", "acme-fruit-00001"]
    assert results[0].score > results[1].score > 0


def test_keyword_search_stems_with_snowball_and_drops_the_english_stop_set_on_every_backend(
    index: VectorIndex,
) -> None:
    # Given chunks whose words differ from the query's only by suffixes Snowball English removes
    put(
        index,
        make_chunk("acme", "pool", 0, "the pool reuses connected sockets"),
        make_chunk("acme", "pool", 1, "connecting twice is generously allowed"),
        make_chunk("acme", "pool", 2, "nothing relevant here"),
    )

    # When searched by keyword / Then both match through their stems; a query of stopwords matches nothing
    assert sorted(keyword(index, ALICE, "connections")) == ["acme-pool-00000", "acme-pool-00001"]
    assert keyword(index, ALICE, "generous") == ["acme-pool-00001"]
    assert keyword(index, ALICE, "the is") == []


def test_a_word_of_the_title_outranks_the_same_word_in_the_text_on_every_backend(index: VectorIndex) -> None:
    # Given two documents of equal length, "cherry" in the title of one and in the text of the other
    put(index, make_chunk("acme", "a", 0, "pruning orchard trees in late winter", title="Cherry"))
    put(index, make_chunk("acme", "b", 0, "pruning cherry trees in late winter", title="Orchard"))

    # When searched by keyword / Then the title (weighted twice) ranks first on every backend
    assert keyword(index, ALICE, "cherry") == ["acme-a-00000", "acme-b-00000"]


def test_vector_search_ranks_the_identical_text_first_with_cosine_one(index: VectorIndex) -> None:
    # Given three chunks
    texts = ["rotate encryption keys yearly", "quarterly revenue report", "encryption key rotation policy"]
    put(index, *(make_chunk("acme", "sec", i, text) for i, text in enumerate(texts)))

    # When searched by the vector of the first text
    results = index.vector_search(ALICE, EMBEDDER.embed_query(texts[0]), None, 10)

    # Then it comes first with cosine similarity 1, and scores are cosines, descending
    assert ids(results)[0] == "acme-sec-00000"
    assert results[0].score == pytest.approx(1.0, abs=1e-4)
    assert all(-1.0 - 1e-6 <= r.score <= 1.0 + 1e-6 for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert len(results) == 3


def test_reads_never_cross_tenants(index: VectorIndex) -> None:
    # Given the same words in tenants whose ids differ only by case and suffix
    for tenant in ("acme", "Acme", "acme-2"):
        put(index, make_chunk(tenant, f"{tenant}-doc", 0, "walnut pepper ginger"))

    # When each tenant searches / Then it sees its own chunk only
    for tenant in ("acme", "Acme", "acme-2"):
        caller = Caller(tenant_id=tenant, user_id="alice")
        assert keyword(index, caller, "walnut") == [f"{tenant}-{tenant}-doc-00000"]
        assert vector(index, caller, "walnut pepper ginger") == [f"{tenant}-{tenant}-doc-00000"]
    assert keyword(index, Caller(tenant_id="umbrella", user_id="alice"), "walnut") == []


def test_private_documents_are_read_by_their_owner_only_and_filters_cannot_widen(index: VectorIndex) -> None:
    # Given alice's private document and a shared one
    put(index, make_chunk("acme", "diary", 0, "secret banana plans", visibility=Visibility.PRIVATE))
    put(index, make_chunk("acme", "wiki", 0, "public banana facts"))

    # When alice and bob search, bob also with filters that try to widen access
    widening = [
        Filter.model_validate({"equals": {"key": "visibility", "value": "private"}}),
        Filter.model_validate({"equals": {"key": "owner", "value": "alice"}}),
        Filter.model_validate(
            {
                "orAll": [
                    {"notEquals": {"key": "owner", "value": "bob"}},
                    {"equals": {"key": "visibility", "value": "private"}},
                ]
            }
        ),
    ]

    # Then alice reads both, bob only the shared one, however he filters
    assert sorted(keyword(index, ALICE, "banana")) == ["acme-diary-00000", "acme-wiki-00000"]
    assert sorted(vector(index, ALICE, "banana")) == ["acme-diary-00000", "acme-wiki-00000"]
    assert keyword(index, BOB, "banana") == ["acme-wiki-00000"]
    assert vector(index, BOB, "banana") == ["acme-wiki-00000"]
    for flt in widening:
        assert "acme-diary-00000" not in keyword(index, BOB, "banana", flt)
        assert "acme-diary-00000" not in vector(index, BOB, "secret banana plans", flt)


def test_each_entry_names_its_chunk_by_ids_and_holds_that_chunk(index: VectorIndex) -> None:
    # Given two documents
    chunks = [make_chunk("acme", "a", 0, "ginger tea"), make_chunk("acme", "a", 1, "ginger root")]
    put(index, *chunks)
    put(index, make_chunk("acme", "b", 0, "ginger biscuits"))

    # When either search finds them / Then each entry's ids (read without the chunk) are its chunk's
    for found in (
        index.keyword_search(ALICE, "ginger", None, 10),
        index.vector_search(ALICE, EMBEDDER.embed_query("ginger"), None, 10),
    ):
        assert len(found) == 3
        named = [(scored.chunk_id, scored.doc_id) for scored in found]
        assert named == [(scored.chunk.chunk_id, scored.chunk.document.doc_id) for scored in found]
        assert {chunk.chunk_id: chunk for chunk in chunks}.items() <= {s.chunk_id: s.chunk for s in found}.items()


def test_limit_is_respected(index: VectorIndex) -> None:
    # Given seven chunks that all match
    put(index, *(make_chunk("acme", "many", i, f"apple number {i} apple") for i in range(7)))

    # When searched with limits below and above the number of matches / Then each limit holds
    for limit in (1, 3):
        assert len(index.keyword_search(ALICE, "apple", None, limit)) == limit
        assert len(index.vector_search(ALICE, EMBEDDER.embed_query("apple"), None, limit)) == limit
    assert len(index.keyword_search(ALICE, "apple", None, 50)) == 7
    assert len(index.vector_search(ALICE, EMBEDDER.embed_query("apple"), None, 50)) == 7


# --- every filter operator, on one populated index per adapter -----------------------------------------

EXAMPLE = filter_example_chunk()  # tenant acme, doc-1: the chunk tests/unit/test_filters.py evaluates
FILTER_CALLER = Caller(tenant_id="acme", user_id="bob")


@pytest.fixture(scope="module", params=ADAPTERS)
def example_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VectorIndex]:
    """The example chunk, plus chunks whose same keys hold other types (in another document and tenant)."""
    with open_index(request.param, tmp_path_factory.mktemp(request.param)) as opened:
        opened.ensure(EMBEDDER.name, DIMENSION)
        put(opened, EXAMPLE)
        conflicting: dict[str, AttributeValue] = {
            "year": "2023",
            "dept": 7,
            "public": "yes",
            "regions": "eu",
            "rating": ["4.5"],
        }
        put(opened, make_chunk("acme", "doc-2", 0, "Unrelated chunk about walnuts.", attributes=conflicting))
        put(opened, make_chunk("globex", "doc-3", 0, "Rotate keys every ninety days.", attributes=conflicting))
        yield opened


def _matches(index: VectorIndex, flt: Filter) -> tuple[bool, bool] | str:
    """Whether the example chunk is returned by a keyword and by a vector search under `flt`; "refused"
    when both searches answer the 400 that names the operator and the search mode."""
    try:
        by_keyword = EXAMPLE.chunk_id in keyword(index, FILTER_CALLER, "rotate keys ninety days", flt)
    except ValidationError as refused:
        with pytest.raises(ValidationError):
            vector(index, FILTER_CALLER, EXAMPLE.text, flt)
        assert refused.details["operator"] == flt.operator and refused.details["mode"] in refused.message
        return "refused"
    by_vector = EXAMPLE.chunk_id in vector(index, FILTER_CALLER, EXAMPLE.text, flt)
    return by_keyword, by_vector


def _expected(index: VectorIndex, operator: str, key: str, value: Any, expected: bool) -> tuple[bool, bool] | str:
    """What a search under one comparison answers: `expected` by both searches, or "refused" in the
    S3 Vectors mode for what docs/s3vectors-design.md says it cannot evaluate exactly."""
    if isinstance(index, S3VectorsIndex) and _s3vectors_refuses(operator, key, value):
        return "refused"
    return expected, expected


def _s3vectors_refuses(operator: str, key: str, value: Any) -> bool:
    dates = ("created_at", "updated_at", "source_date")
    if operator == "stringContains":
        return True
    if operator == "startsWith":
        by_path = key == "path" and isinstance(value, str) and value.endswith("/")
        by_date = key in dates and isinstance(value, str) and len(value) in (4, 7, 10)
        return not (by_path or by_date)
    if operator in ("greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals"):
        return isinstance(value, str) and key not in dates
    return operator in ("equals", "notEquals", "listContains") and isinstance(value, list)


def _flt(operator: str, key: str, value: Any) -> Filter:
    return Filter.model_validate({operator: {"key": key, "value": value}})


@pytest.mark.parametrize(("operator", "key", "value", "expected"), CASES)
def test_each_operator_on_present_keys(
    example_index: VectorIndex, operator: str, key: str, value: Any, expected: bool
) -> None:
    assert _matches(example_index, _flt(operator, key, value)) == _expected(
        example_index, operator, key, value, expected
    )


@pytest.mark.parametrize(("operator", "value"), POSITIVE_ON_MISSING)
@pytest.mark.parametrize("key", ["no_such_key", "page"])
def test_positive_operators_never_match_a_missing_or_null_key(
    example_index: VectorIndex, operator: str, value: Any, key: str
) -> None:
    assert _matches(example_index, _flt(operator, key, value)) == _expected(example_index, operator, key, value, False)


@pytest.mark.parametrize(("operator", "value"), [("notEquals", "x"), ("notEquals", 3), ("notIn", ["x"])])
@pytest.mark.parametrize("key", ["no_such_key", "page"])
def test_negated_operators_always_match_a_missing_or_null_key(
    example_index: VectorIndex, operator: str, value: Any, key: str
) -> None:
    assert _matches(example_index, _flt(operator, key, value)) == _expected(example_index, operator, key, value, True)


@pytest.mark.parametrize(("operator", "key", "value"), TYPE_MISMATCHES)
def test_values_of_another_type_do_not_match(example_index: VectorIndex, operator: str, key: str, value: Any) -> None:
    assert _matches(example_index, _flt(operator, key, value)) == _expected(example_index, operator, key, value, False)


def test_not_equals_across_types_matches(example_index: VectorIndex) -> None:
    assert _matches(example_index, _flt("notEquals", "year", "2023")) == (True, True)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {
                "andAll": [
                    {"equals": {"key": "dept", "value": "engineering"}},
                    {"greaterThan": {"key": "year", "value": 2020}},
                ]
            },
            True,
        ),
        (
            {
                "andAll": [
                    {"equals": {"key": "dept", "value": "engineering"}},
                    {"lessThan": {"key": "year", "value": 2020}},
                ]
            },
            False,
        ),
        (
            {
                "orAll": [
                    {"equals": {"key": "dept", "value": "sales"}},
                    {"listContains": {"key": "regions", "value": "eu"}},
                ]
            },
            True,
        ),
        (
            {"orAll": [{"equals": {"key": "dept", "value": "sales"}}, {"equals": {"key": "no_such_key", "value": 1}}]},
            False,
        ),
        (
            {
                "andAll": [
                    {"orAll": [{"in": {"key": "source", "value": ["wiki"]}}]},
                    {"notIn": {"key": "regions", "value": ["apac"]}},
                ]
            },
            True,
        ),
    ],
)
def test_logical_operators(example_index: VectorIndex, raw: dict[str, Any], expected: bool) -> None:
    assert _matches(example_index, Filter.model_validate(raw)) == (expected, expected)


def test_the_other_tenant_never_matches_even_when_its_values_would(example_index: VectorIndex) -> None:
    # Given globex's chunk has the example's text and "2023" as a string
    flt = _flt("equals", "year", "2023")

    # When acme searches for it / Then acme's doc-2 matches, globex's chunk never appears
    assert keyword(example_index, FILTER_CALLER, "rotate keys walnuts", flt) == ["acme-doc-2-00000"]


def test_source_and_source_date_filter_alike_on_every_adapter(index: VectorIndex) -> None:
    # Given documents from two sources, written at three dates
    dated = [
        ("jira-1", "jira", datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("jira-2", "jira", datetime(2026, 1, 1, tzinfo=UTC)),
        ("wiki-1", "confluence", datetime(2026, 3, 1, 8, tzinfo=UTC)),
    ]
    for doc_id, origin, moment in dated:
        chunk = make_chunk("acme", doc_id, 0, "Queue retries and backoff.")
        document = chunk.document.model_copy(update={"source": origin, "channel": "s3", "source_date": moment})
        put(index, chunk.model_copy(update={"document": document}))
    since = {"greaterThanOrEquals": {"key": "source_date", "value": "2026-01-01T00:00:00+00:00"}}
    in_jira = {"in": {"key": "source", "value": ["jira"]}}
    # When filtered on the date, on the source, and on both / Then every adapter keeps the same documents
    for raw, expected in (
        (since, ["acme-jira-2-00000", "acme-wiki-1-00000"]),
        (in_jira, ["acme-jira-1-00000", "acme-jira-2-00000"]),
        ({"andAll": [since, in_jira]}, ["acme-jira-2-00000"]),
        (
            {"equals": {"key": "channel", "value": "s3"}},
            ["acme-jira-1-00000", "acme-jira-2-00000", "acme-wiki-1-00000"],
        ),
    ):
        flt = Filter.model_validate(raw)
        assert sorted(keyword(index, ALICE, "queue retries", flt)) == expected, raw
        assert sorted(vector(index, ALICE, "queue retries", flt)) == expected, raw


# --- versions compared as versions, on every adapter --------------------------------------------------

VERSIONED: dict[str, dict[str, AttributeValue]] = {
    "py39": {"version": "3.9"},
    "py312": {"version": "3.12"},
    "py312rc": {"version": "3.12.0rc1"},
    "fastapi": {"version": "0.100.0", "introduced_in": "0.95", "deprecated_in": "0.115"},
    "unversioned": {},
    # Written before versions were checked at ingest (the pipeline refuses it now): it is no version.
    "legacy": {"version": "latest"},
}
ALL_VERSIONED = sorted(VERSIONED)


@pytest.fixture(scope="module", params=ADAPTERS)
def versioned_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VectorIndex]:
    """One chunk per document of `VERSIONED`, all with the same text."""
    with open_index(request.param, tmp_path_factory.mktemp(request.param)) as opened:
        opened.ensure(EMBEDDER.name, DIMENSION)
        for doc_id, attributes in VERSIONED.items():
            put(opened, make_chunk("acme", doc_id, 0, "Configure the event loop policy.", attributes=attributes))
        yield opened


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"versionGreaterThan": {"key": "version", "value": "3.10"}}, ["py312", "py312rc"]),
        ({"versionLessThan": {"key": "version", "value": "3.12"}}, ["fastapi", "py312rc", "py39"]),
        ({"versionEquals": {"key": "version", "value": "3.12.0"}}, ["py312"]),
        ({"versionNotEquals": {"key": "version", "value": "v3.12"}}, [d for d in ALL_VERSIONED if d != "py312"]),
        ({"versionGreaterThanOrEquals": {"key": "version", "value": "0.99"}}, ["fastapi", "py312", "py312rc", "py39"]),
        ({"versionLessThanOrEquals": {"key": "version", "value": "0.100"}}, ["fastapi"]),
        ({"versionLessThanOrEquals": {"key": "introduced_in", "value": "0.95.0"}}, ["fastapi"]),
        ({"versionGreaterThan": {"key": "deprecated_in", "value": "0.114.9"}}, ["fastapi"]),
        ({"versionGreaterThan": {"key": "deprecated_in", "value": "0.115"}}, []),
        (
            {
                "orAll": [
                    {"versionEquals": {"key": "version", "value": "3.9"}},
                    {"versionGreaterThanOrEquals": {"key": "version", "value": "3.12rc2"}},
                ]
            },
            ["py312", "py39"],
        ),
        (
            {
                "andAll": [
                    {"versionLessThanOrEquals": {"key": "introduced_in", "value": "0.99"}},
                    {"versionGreaterThan": {"key": "deprecated_in", "value": "0.99"}},
                ]
            },
            ["fastapi"],
        ),
    ],
)
def test_version_operators_compare_versions_alike_on_every_adapter(
    versioned_index: VectorIndex, raw: dict[str, Any], expected: list[str]
) -> None:
    # Given documents of versions whose string order is not their version order (3.9 > 3.12 as strings)
    flt = Filter.model_validate(raw)

    # When both searches run under the version filter / Then each keeps exactly the documents of those versions
    by_keyword = versioned_index.keyword_search(BOB, "event loop policy", flt, 50)
    by_vector = versioned_index.vector_search(BOB, EMBEDDER.embed_query("event loop policy"), flt, 50)
    assert sorted(scored.doc_id for scored in by_keyword) == expected
    assert sorted(scored.doc_id for scored in by_vector) == expected


# --- the OpenSearch adapter: faults and extras ---------------------------------------------------------


@dataclass
class Double:
    server: RunningServer
    index: OpenSearchIndex

    @property
    def fake(self) -> FakeOpenSearch:
        return self.server.fake


@pytest.fixture(params=["domain", "serverless"])
def double(request: pytest.FixtureRequest) -> Iterator[Double]:
    with running(FakeOpenSearch(serverless=request.param == "serverless")) as server:
        client = OpenSearch(hosts=[server.url], timeout=10, max_retries=0)
        opened = OpenSearchIndex(client, "chunks", serverless=server.fake.serverless, page_size=2)
        opened.ensure(EMBEDDER.name, DIMENSION)
        yield Double(server, opened)
        client.close()


@dataclass
class Engine:
    """An ensured adapter on one index of the real node or of the double, with the raw client beside it:
    what both accept or refuse is asserted on both, so the double cannot drift from the engine."""

    index: OpenSearchIndex
    client: OpenSearch
    name: str
    fake: FakeOpenSearch | None = None

    def drop(self) -> None:
        # the double's index goes directly: a DELETE is no request citewise sends, which the wire check refuses
        if self.fake is not None:
            self.fake.indices.clear()
        else:
            self.client.indices.delete(index=self.name)

    def mapping(self) -> dict[str, Any]:
        return dict(self.client.indices.get_mapping(index=self.name)[self.name]["mappings"])


@pytest.fixture(params=[pytest.param("real", marks=pytest.mark.opensearch), "domain", "serverless"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    if request.param == "real":
        client, name = NODE.client(), fresh_index_name()
        opened = OpenSearchIndex(client, name, serverless=False)
        opened.ensure(EMBEDDER.name, DIMENSION)
        try:
            yield Engine(opened, client, name)
        finally:
            client.indices.delete(index=name, ignore_unavailable=True)
            client.close()
        return
    with running(FakeOpenSearch(serverless=request.param == "serverless")) as server:
        client = OpenSearch(hosts=[server.url], timeout=10, max_retries=0)
        opened = OpenSearchIndex(client, "chunks", serverless=server.fake.serverless)
        opened.ensure(EMBEDDER.name, DIMENSION)
        yield Engine(opened, client, "chunks", server.fake)
        client.close()


def _source_chunk_id(chunk_id: str) -> Callable[[str, Any], bool]:
    return lambda operation, source: source is not None and source["chunk_id"] == chunk_id


def test_a_bulk_item_failure_names_the_chunk_and_leaves_the_old_version(double: Double) -> None:
    # Given a document indexed once
    old = make_chunk("acme", "doc", 0, "walnut bread")
    put(double.index, old)

    # When a replace meets a mapping error on one of its chunks
    new = [make_chunk("acme", "doc", 0, "walnut cake"), make_chunk("acme", "doc", 1, "pepper cake")]
    double.fake.fail_bulk_items(
        _source_chunk_id(new[1].chunk_id), status=400, kind="mapper_parsing_exception", reason="failed to parse"
    )
    with pytest.raises(SearchBackendError) as raised:
        put(double.index, *new)

    # Then the error names the chunk and its cause, and nothing of the document was deleted
    assert raised.value.details["chunk_id"] == new[1].chunk_id
    assert raised.value.details["error_type"] == "mapper_parsing_exception"
    assert new[1].chunk_id in raised.value.message
    assert keyword(double.index, ALICE, "walnut") == [old.chunk_id]


def test_a_throttled_bulk_item_is_a_throttled_error(double: Double) -> None:
    # Given a bulk answer rejecting one item as too many requests
    double.fake.fail_bulk_items(
        lambda operation, source: True, status=429, kind="es_rejected_execution_exception", reason="queue full"
    )

    # When a document is written / Then the caller is told to retry later
    with pytest.raises(ThrottledError) as raised:
        put(double.index, make_chunk("acme", "doc", 0, "ginger"))
    assert raised.value.details["rejected"] == 1


def _throttled_cases() -> list[Any]:
    """(double, path, call): every request kind the adapter sends, on both doubles."""
    return [
        pytest.param(kind, path, call, id=f"{kind}-{path}")
        for kind in ("domain", "serverless")
        for path, call in (("_search", "search"), ("_bulk", "write"))
    ]


@pytest.mark.parametrize(("double", "path", "call"), _throttled_cases(), indirect=["double"])
def test_a_429_answer_is_a_throttled_error(double: Double, path: str, call: str) -> None:
    # Given the next request to `path` is throttled as a whole
    double.fake.fail_next_request(429, "too_many_requests", "Request rate exceeded", path=path)

    # When the adapter calls it / Then it raises ThrottledError, chained to the client's error
    with pytest.raises(ThrottledError) as raised:
        if call == "search":
            double.index.keyword_search(ALICE, "anything", None, 5)
        else:
            put(double.index, make_chunk("acme", "doc", 0, "ginger"))
    assert raised.value.__cause__ is not None
    assert raised.value.details["status"] == 429


def test_a_server_error_is_a_search_backend_error(double: Double) -> None:
    double.fake.fail_next_request(500, "internal_server_error", "boom", path="_search")
    with pytest.raises(SearchBackendError) as raised:
        double.index.vector_search(ALICE, EMBEDDER.embed_query("x"), None, 5)
    assert raised.value.details["status"] == 500


def test_an_unreachable_cluster_is_a_search_backend_error() -> None:
    # Given a client pointed at a port nothing listens on (a server started and stopped)
    with running(FakeOpenSearch()) as server:
        url = server.url
    client = OpenSearch(hosts=[url], timeout=2, max_retries=0)
    index = OpenSearchIndex(client, "chunks", serverless=False)

    # When the adapter is used / Then it raises SearchBackendError chained to the connection error
    with pytest.raises(SearchBackendError) as raised:
        index.ensure(EMBEDDER.name, DIMENSION)
    assert "unreachable" in raised.value.message
    assert raised.value.__cause__ is not None


@pytest.mark.parametrize(
    "body",
    [
        b"<html>bad gateway</html>",
        b'{"hits": {}}',
        b'{"hits": {"hits": [{"_score": 1.0}]}}',
        b'{"hits": {"hits": 3}}',
        b'{"hits": {"hits": [{"_score": 1.0, "_source": {"chunk": {"chunk_id": "acme-doc-00000"}}}]}}',
    ],
)
def test_a_malformed_search_answer_is_a_search_backend_error(double: Double, body: bytes) -> None:
    double.fake.respond_next_raw(body, path="_search")
    with pytest.raises(SearchBackendError):
        double.index.keyword_search(ALICE, "anything", None, 5)


def test_a_malformed_chunk_in_a_search_answer_fails_the_retrieval_with_a_search_backend_error(double: Double) -> None:
    # Given an answer whose hit is not a chunk (its `_source.chunk` lacks every required field)
    malformed = b'{"hits": {"hits": [{"_score": 1.0, "_source": {"chunk": {"chunk_id": "acme-doc-00000"}}}]}}'
    double.fake.respond_next_raw(malformed, path="_search")

    # When a retrieval reads it / Then it fails there, with the backend's structured error, not later
    with pytest.raises(SearchBackendError) as raised:
        Retriever(double.index, EMBEDDER, mode="bm25").search(ALICE, SearchRequest(query="anything"))
    assert raised.value.code == "SEARCH_BACKEND_ERROR" and "malformed" in raised.value.message


def test_a_bulk_answer_with_missing_items_is_a_search_backend_error(double: Double) -> None:
    double.fake.respond_next_raw(b'{"took": 1, "errors": false, "items": []}', path="_bulk")
    with pytest.raises(SearchBackendError) as raised:
        put(double.index, make_chunk("acme", "doc", 0, "ginger"))
    assert "malformed" in raised.value.message


def test_a_vector_of_the_wrong_dimension_is_refused_by_the_engine(engine: Engine) -> None:
    # Given an adapter that has not been told the dimension (no ensure), on the same index
    unchecked = OpenSearchIndex(engine.client, engine.name, serverless=engine.index._serverless)
    chunk = make_chunk("acme", "doc", 0, "ginger")

    # When it writes a 3-dimension vector / Then OpenSearch's mapping error names the chunk and the cause
    with pytest.raises(SearchBackendError) as raised:
        unchecked.replace_document("acme", "doc", [chunk], [[0.1, 0.2, 0.3]])
    assert raised.value.details == {"chunk_id": chunk.chunk_id, "error_type": "mapper_parsing_exception", "status": 400}
    assert "Vector dimension mismatch. Expected: 64, Given: 3" in raised.value.message
    assert "Preview" not in raised.value.message  # a preview of a field's value could be document text


def test_a_text_field_of_an_undefined_analyzer_is_refused_by_the_engine(engine: Engine) -> None:
    # Given an index body whose text field names an analyzer its settings do not define
    engine.drop()
    body = _index_body()
    del body["settings"]["analysis"]

    # When created / Then refused with OpenSearch's error type
    with pytest.raises(RequestError) as refused:
        engine.client.indices.create(index=engine.name, body=body)
    assert refused.value.error == "mapper_parsing_exception"


def test_an_ensured_adapter_checks_dimensions_before_sending(double: Double) -> None:
    with pytest.raises(SearchBackendError):
        double.index.vector_search(ALICE, [1.0, 0.0], None, 5)
    with pytest.raises(SearchBackendError):
        double.index.replace_document("acme", "doc", [make_chunk("acme", "doc", 0, "x")], [[1.0]])


def test_ensure_refuses_an_index_it_did_not_create(engine: Engine) -> None:
    # Given an index of the same name created by someone else, without citewise's _meta
    engine.drop()
    engine.client.indices.create(index=engine.name, body={"mappings": {"properties": {"x": {"type": "keyword"}}}})

    # When ensured / Then it is refused
    with pytest.raises(SearchBackendError):
        engine.index.ensure(EMBEDDER.name, DIMENSION)


def test_ensure_refuses_an_index_of_the_older_attribute_schema(engine: Engine) -> None:
    # Given an index created by an earlier citewise, whose attributes were one field per key (schema 1)
    engine.drop()
    older = _index_body()
    older["mappings"]["_meta"]["schema"] = "1"
    older["mappings"]["properties"]["attributes"] = {"type": "object", "dynamic": True}
    engine.client.indices.create(index=engine.name, body=older)

    # When ensured / Then it is refused, saying how to migrate
    with pytest.raises(SearchBackendError) as raised:
        engine.index.ensure(EMBEDDER.name, DIMENSION)
    assert raised.value.details["indexed_schema"] == "1"
    assert "re-ingest" in raised.value.message


def test_any_number_of_distinct_keys_across_tenants_costs_no_mapped_field(engine: Engine) -> None:
    # Given the engine's total-fields limit of 1,000 (the double enforces it too) and the mapping as created
    fields_before = json.dumps(engine.mapping(), sort_keys=True)

    # When 30 tenants each write documents with 40 keys of their own (1,200 distinct keys in all)
    for tenant in range(30):
        attributes: dict[str, AttributeValue] = {f"t{tenant}_key_{k}": k for k in range(40)}
        put(engine.index, make_chunk(f"tenant-{tenant}", "doc", 0, "pepper", attributes=attributes))

    # Then every write succeeded, the mapping did not grow, and a tenant's key filters as before
    assert json.dumps(engine.mapping(), sort_keys=True) == fields_before
    caller = Caller(tenant_id="tenant-29", user_id="alice")
    assert keyword(engine.index, caller, "pepper", _flt_num("t29_key_39", 39)) == ["tenant-29-doc-00000"]
    assert keyword(engine.index, caller, "pepper", _flt_num("t29_key_39", 38)) == []


def _flt_num(key: str, value: int) -> Filter:
    return Filter.model_validate({"equals": {"key": key, "value": value}})


def test_ensure_survives_losing_the_creation_race(double: Double) -> None:
    # Given an index that another writer creates between our existence check and our create
    double.fake.indices.clear()
    double.index._client.indices.create(index="chunks", body=_index_body())
    double.fake.fail_next_request(404, "index_not_found_exception", path="/chunks", method="HEAD")

    # When ensured / Then our create meets `resource_already_exists_exception` and the index is accepted
    double.index.ensure(EMBEDDER.name, DIMENSION)
    assert [m for m, path, _, _ in double.fake.requests[-3:]] == ["HEAD", "PUT", "GET"]


def _index_body() -> dict[str, Any]:
    return index_body(DIMENSION, embedder=EMBEDDER.name)


def test_a_failure_between_write_and_delete_leaves_a_superset_that_the_next_replace_repairs(double: Double) -> None:
    # Given a document of three chunks
    put(double.index, *(make_chunk("acme", "doc", i, f"pepper part {i}") for i in range(3)))

    # When a replace by one chunk fails while deleting the others
    double.fake.fail_bulk_items(
        lambda operation, source: operation == "delete", status=503, kind="unavailable_shards_exception"
    )
    new = make_chunk("acme", "doc", 0, "ginger only now")
    with pytest.raises(SearchBackendError):
        put(double.index, new)
    if not double.fake.serverless:
        double.index._client.indices.refresh(index="chunks")
    between = sorted(keyword(double.index, ALICE, "pepper ginger"))

    # Then the old chunks are still stored (never fewer), readers saw the new chunk beside them on a
    # domain and the newest generation alone on Serverless (it hides superseded chunks), and a retry converges
    overwritten = 1 if double.fake.serverless else 0  # a domain overwrites chunk 0 in place (same _id)
    assert stored_chunk_ids(double.fake, "doc") == ["acme-doc-00000"] * (1 + overwritten) + [
        "acme-doc-00001",
        "acme-doc-00002",
    ]
    if double.fake.serverless:
        assert between == [new.chunk_id]
    else:
        assert new.chunk_id in between and "acme-doc-00002" in between
    put(double.index, new)
    assert keyword(double.index, ALICE, "pepper ginger") == [new.chunk_id]


def stored_chunk_ids(fake: FakeOpenSearch, doc_id: str) -> list[str]:
    """The chunk ids of `doc_id` the double holds (searchable or not), sorted: what counts would see."""
    return sorted(source["chunk_id"] for source in fake.indices["chunks"].live.values() if source["doc_id"] == doc_id)


def test_writes_respect_the_payload_limit_and_pages_cover_every_chunk(double: Double) -> None:
    # Given an adapter limited to small bulk payloads (and two hits per page, from the fixture)
    small = OpenSearchIndex(
        double.index._client, "chunks", serverless=double.fake.serverless, max_bulk_bytes=6000, page_size=2
    )
    small.ensure(EMBEDDER.name, DIMENSION)
    chunks = [make_chunk("acme", "big", i, f"walnut paragraph {i}") for i in range(7)]

    # When a document of seven chunks is written, replaced by three, then deleted
    put(small, *chunks)
    bulk_sizes = [size for method, path, _, size in double.fake.requests if path.endswith("/_bulk")]
    put(small, *chunks[:3])
    after_replace = sorted(keyword(small, ALICE, "walnut"))
    searches_before = len(double.fake.requests)
    removed = small.delete_document("acme", "big")
    pages = [path for _, path, _, _ in double.fake.requests[searches_before:] if path.endswith("/_search")]

    # Then each payload fit, and paging found every chunk to remove
    assert len(bulk_sizes) > 1 and max(bulk_sizes) <= 6000
    assert after_replace == [c.chunk_id for c in chunks[:3]]
    assert removed == 3
    assert len(pages) == 2  # three chunks, two per page
    assert keyword(small, ALICE, "walnut") == []


def test_serverless_gets_no_client_ids_and_no_refresh_a_domain_waits_for_its_periodic_refresh(
    double: Double,
) -> None:
    # When a document of three chunks is written, then replaced by one chunk, then deleted
    put(double.index, *(make_chunk("acme", "doc", i, f"ginger {i}") for i in range(3)))
    put(double.index, make_chunk("acme", "doc", 0, "ginger"))
    stored_ids = list(double.fake.indices["chunks"].live)
    double.index.delete_document("acme", "doc")

    # Then no refresh was ever forced (a forced refresh per document makes a tiny segment each time)
    assert not any(path.endswith("/_refresh") for _, path, _, _ in double.fake.requests)
    bulks = [params.get("refresh") for _, path, params, _ in double.fake.requests if path.endswith("/_bulk")]
    if double.fake.serverless:  # and Serverless, which has no refresh, gets no refresh parameter nor ids
        assert bulks == [None] * len(bulks)
        assert stored_ids != ["acme/acme-doc-00000"]
    else:  # while each write and delete on a domain waits for the index's own periodic refresh
        assert bulks == ["wait_for"] * 4  # write, write, delete of the two stale chunks, delete
        assert stored_ids == ["acme/acme-doc-00000"]


def test_bulk_writes_go_to_the_index_path_without_naming_an_index(double: Double) -> None:
    # Given a double hardened with `rest.action.multi.allow_explicit_index: false` (the fixture's)
    # When a document is written, replaced and deleted
    put(double.index, make_chunk("acme", "doc", 0, "ginger"), make_chunk("acme", "doc", 1, "pepper"))
    put(double.index, make_chunk("acme", "doc", 0, "ginger"))
    assert double.index.delete_document("acme", "doc") == 1

    # Then every bulk request was a POST to /chunks/_bulk, and an action naming its index is refused whole
    bulks = [(method, path) for method, path, _, _ in double.fake.requests if path.endswith("/_bulk")]
    assert bulks and set(bulks) == {("POST", "/chunks/_bulk")}
    with pytest.raises(RequestError) as raised:
        double.index._client.bulk(body=[{"delete": {"_index": "chunks", "_id": "x"}}], index="chunks")
    assert raised.value.info["error"]["reason"] == "explicit index in bulk is not allowed"


def test_a_query_past_max_clause_count_is_refused_by_the_engine(engine: Engine) -> None:
    # Given a filter of 1,025 leaf clauses (no request model would let one through; a raw body can)
    too_many = {"bool": {"should": [{"term": {"doc_id": f"d{n}"}} for n in range(1025)]}}
    # When searched / Then the engine's own limit answers 400: every shard failed, for Lucene's clause limit
    with pytest.raises(RequestError) as raised:
        engine.client.search(index=engine.name, body={"query": too_many})
    assert raised.value.error == "search_phase_execution_exception"
    [root] = raised.value.info["error"]["root_cause"]
    assert (root["type"], root["reason"]) == (
        "query_shard_exception",
        "failed to create query: maxClauseCount is set to 1024",
    )
    [shard] = raised.value.info["error"]["failed_shards"]
    assert shard["reason"]["caused_by"]["type"] == "too_many_clauses"


def test_connect_signs_requests_with_sigv4_for_the_given_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given fake credentials in the environment (never a real profile) and the double on loopback
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with running(FakeOpenSearch(serverless=True)) as server:
        # When a client from `connect` makes a request to a Serverless collection
        client = connect(server.url, "eu-west-1", "aoss")
        exists = client.indices.exists(index="chunks")
        client.close()
        headers = {k.lower(): v for k, v in server.headers_seen[-1].items()}

    # Then it was signed for the aoss service in that region, with the payload hash aoss requires
    assert exists is False
    assert "/eu-west-1/aoss/aws4_request" in headers["authorization"]
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "x-amz-content-sha256" in headers


@pytest.mark.parametrize(
    ("endpoint", "service"),
    [("http://search.example.com", "es"), ("search.example.com", "opensearch"), ("ftp://localhost", "es")],
)
def test_connect_refuses_plain_http_off_loopback_and_unknown_services(endpoint: str, service: str) -> None:
    with pytest.raises(ValueError):
        connect(endpoint, "eu-west-1", service)


def test_connect_uses_https_and_verifies_certificates_without_contacting_anything() -> None:
    # Given a domain endpoint without a scheme / When a client is built (no credentials needed yet)
    client = connect("search-x.eu-west-1.es.amazonaws.com", "eu-west-1", "es")

    # Then it will talk HTTPS on 443 with certificate checks
    connection = client.transport.connection_pool.connections[0]
    assert connection.host == "https://search-x.eu-west-1.es.amazonaws.com:443"
    assert connection.use_ssl is True
    assert connection.pool.cert_reqs == "CERT_REQUIRED"


def test_mistakes_are_answered_alike_by_the_engine_and_the_double(engine: Engine) -> None:
    # Given the client talking to the engine (or the double) directly
    client = engine.client
    source = {"tenant_id": "acme", "surprise": "field"}

    # When a document has a field the strict mapping lacks / Then its bulk item fails with OpenSearch's error
    answer = client.bulk(body=[{"index": {}}, source], index=engine.name)
    item = answer["items"][0]["index"]
    assert answer["errors"] is True
    assert (item["status"], item["error"]["type"]) == (400, "strict_dynamic_mapping_exception")
    assert (
        item["error"]["reason"]
        == "mapping set to strict, dynamic introduction of [surprise] within [_doc] is not allowed"
    )

    # When a query uses an unknown query type / Then the search is a 400 parsing_exception
    with pytest.raises(RequestError) as raised:
        client.search(index=engine.name, body={"query": {"fuzzy_knn": {}}})
    assert raised.value.error == "parsing_exception"


def test_the_serverless_double_refuses_faiss_cosinesimil_as_its_2_17_does(double: Double) -> None:
    # When an index asks for Faiss cosinesimil (OpenSearch 2.19+, which the real node runs, not
    # Serverless's 2.17) / Then the double, answering as 2.17, refuses it
    with pytest.raises(RequestError):
        double.index._client.indices.create(index="other", body=index_body(8, embedder="e", space_type="cosinesimil"))


# --- Serverless refresh lag -------------------------------------------------------------------------

REFRESH_INTERVAL = 0.4  # seconds; a vector collection takes up to about 60


class RecordedSweeps:
    """A SweepScheduler that keeps the sweeps, for the test to deliver when it chooses."""

    def __init__(self) -> None:
        self.sweeps: list[StaleSweep] = []

    def schedule(self, sweep: StaleSweep) -> None:
        self.sweeps.append(sweep)


@dataclass
class Lagging:
    """An adapter on a Serverless double whose writes become searchable after `REFRESH_INTERVAL`."""

    index: OpenSearchIndex
    fake: FakeOpenSearch
    sweeps: RecordedSweeps

    def wait_for_refresh(self) -> None:
        time.sleep(REFRESH_INTERVAL + 0.1)


@pytest.fixture
def lagging() -> Iterator[Lagging]:
    with running(FakeOpenSearch(serverless=True, refresh_interval=REFRESH_INTERVAL)) as server:
        client = OpenSearch(hosts=[server.url], timeout=10)
        sweeps = RecordedSweeps()
        index = OpenSearchIndex(client, "chunks", serverless=True, sweeps=sweeps)
        index.ensure(EMBEDDER.name, DIMENSION)
        yield Lagging(index, server.fake, sweeps)
        client.close()


def test_a_replace_inside_the_refresh_window_shows_no_stale_chunk_and_the_delayed_sweep_removes_them(
    lagging: Lagging,
) -> None:
    # Given a document of three chunks replaced by two before the first write became searchable
    put(lagging.index, *(make_chunk("acme", "doc", i, f"pepper old part {i}") for i in range(3)))
    put(lagging.index, *(make_chunk("acme", "doc", i, f"ginger new part {i}") for i in range(2)))

    # Then the replace's own sweep could not see the old chunks: both generations are stored
    assert len(stored_chunk_ids(lagging.fake, "doc")) == 5
    lagging.wait_for_refresh()

    # and once both are searchable, no old text takes a result slot, by keyword or by vector
    assert keyword(lagging.index, ALICE, "pepper") == []
    assert sorted(keyword(lagging.index, ALICE, "ginger pepper part")) == ["acme-doc-00000", "acme-doc-00001"]
    assert sorted(vector(lagging.index, ALICE, "pepper old part 2", limit=2)) == ["acme-doc-00000", "acme-doc-00001"]
    texts = [s.chunk.text for s in lagging.index.vector_search(ALICE, EMBEDDER.embed_query("part"), None, 10)]
    assert sorted(texts) == ["ginger new part 0", "ginger new part 1"]

    # When the sweeps the replaces scheduled arrive (newest first: delivery order is not guaranteed)
    assert [(s.tenant_id, s.doc_id) for s in lagging.sweeps.sweeps] == [("acme", "doc")] * 2
    first, second = lagging.sweeps.sweeps
    assert first.before < second.before
    removed = [lagging.index.sweep_stale(second), lagging.index.sweep_stale(first)]

    # Then the old chunks are gone, the count is the new version's, and the earlier sweep touched nothing new
    assert removed == [3, 0]
    assert stored_chunk_ids(lagging.fake, "doc") == ["acme-doc-00000", "acme-doc-00001"]


def test_a_document_made_private_hides_its_older_shared_chunks_from_others_at_once(lagging: Lagging) -> None:
    # Given a shared document made private to alice inside the refresh window
    put(lagging.index, make_chunk("acme", "doc", 0, "salary table 2023"))
    put(lagging.index, make_chunk("acme", "doc", 0, "salary table 2024", visibility=Visibility.PRIVATE))
    lagging.wait_for_refresh()

    # Then bob (who may read only the old, shared generation) sees nothing of it; alice the new one
    assert keyword(lagging.index, BOB, "salary table") == []
    assert [s.chunk.text for s in lagging.index.keyword_search(ALICE, "salary", None, 5)] == ["salary table 2024"]


def test_a_delete_inside_the_refresh_window_is_completed_by_its_delayed_sweep(lagging: Lagging) -> None:
    # Given a document deleted before its chunks became searchable, then another document written
    put(lagging.index, make_chunk("acme", "doc", 0, "fennel seeds"))
    assert lagging.index.delete_document("acme", "doc") == 0
    put(lagging.index, make_chunk("acme", "other", 0, "fennel tea"))
    lagging.wait_for_refresh()

    # When the delete's delayed sweep arrives
    assert [s.doc_id for s in lagging.sweeps.sweeps] == ["doc", "doc", "other"]
    assert lagging.index.sweep_stale(lagging.sweeps.sweeps[1]) == 1

    # Then nothing of the deleted document is left, and the other document is untouched
    assert stored_chunk_ids(lagging.fake, "doc") == []
    lagging.wait_for_refresh()  # a delete too is searched only after a refresh
    assert keyword(lagging.index, ALICE, "fennel") == ["acme-other-00000"]


def test_a_sweep_naming_a_generation_in_the_future_is_refused(lagging: Lagging) -> None:
    # Given a document, and a sweep message claiming a generation a day ahead (forged or a broken clock)
    put(lagging.index, make_chunk("acme", "doc", 0, "anise"))
    ahead = new_generation(time.time_ns() + 86_400 * 10**9)

    # Then it is refused, and deletes nothing
    with pytest.raises(ValidationError, match="in the future"):
        lagging.index.sweep_stale(StaleSweep(tenant_id="acme", doc_id="doc", before=ahead))
    assert stored_chunk_ids(lagging.fake, "doc") == ["acme-doc-00000"]


def test_a_partly_failed_write_on_serverless_takes_back_what_it_wrote(double: Double) -> None:
    # Given a document indexed once
    put(double.index, make_chunk("acme", "doc", 0, "walnut bread"))

    # When a replace of two chunks fails on its second
    new = [make_chunk("acme", "doc", 0, "walnut cake"), make_chunk("acme", "doc", 1, "pepper cake")]
    double.fake.fail_bulk_items(_source_chunk_id(new[1].chunk_id), status=400, kind="mapper_parsing_exception")
    with pytest.raises(SearchBackendError):
        put(double.index, *new)

    # Then on Serverless the written chunk is taken back (readers show the newest generation only, which
    # would otherwise be the partial one); a domain overwrote chunk 0 in place (same _id) and keeps it,
    # searchable from the index's next periodic refresh, as a real domain shows it whether or not the
    # failed write asked to wait for that refresh
    stored = [source["chunk"]["text"] for source in double.fake.indices["chunks"].live.values()]
    assert stored == (["walnut bread"] if double.fake.serverless else ["walnut cake"])
    assert [s.chunk.text for s in double.index.keyword_search(ALICE, "walnut", None, 5)] == stored


def test_a_non_finite_vector_fails_its_chunk_on_the_engine_and_the_double(engine: Engine) -> None:
    # Given a NaN in a vector: it goes out as a bare NaN token (Python's json), which OpenSearch cannot parse
    chunk = make_chunk("acme", "doc", 0, "nan")
    # When written / Then the engine fails that document's bulk item, and the error names the chunk and why
    with pytest.raises(SearchBackendError) as raised:
        engine.index.replace_document("acme", "doc", [chunk], [[float("nan")] * DIMENSION])
    assert raised.value.details == {"chunk_id": chunk.chunk_id, "error_type": "mapper_parsing_exception", "status": 400}
    assert "json_parse_exception: Non-standard token 'NaN'" in raised.value.message


def test_the_double_refuses_oversized_bulks_and_serverless_refresh(double: Double) -> None:
    client = double.index._client
    # A bulk body over OpenSearch Service's HTTP payload limit (10 MiB; a node's own default is 100 MB)
    # is refused whole
    line = json.dumps({"delete": {"_id": "x" * 100}}) + "\n"
    with pytest.raises(TransportError) as too_long:
        client.bulk(body=line * (11 * 1024 * 1024 // len(line)), index="chunks")
    assert too_long.value.status_code == 413
    # and Serverless takes no refresh parameter, which a domain accepts
    if double.fake.serverless:
        with pytest.raises(RequestError, match="refresh"):
            client.bulk(body=line, index="chunks", refresh="true")
    else:
        assert client.bulk(body=line, index="chunks", refresh="true")["errors"] is False


# --- erasing a tenant (`citewise.ports.erasure`) -------------------------------------------------------


def test_erase_tenant_removes_every_entry_of_the_tenant_only(index: VectorIndex) -> None:
    # Given three tenants whose ids share a prefix, each with 2 documents of 3 chunks and 2 staged vectors
    tenants = ("acme", "acme-eu", "acme2")
    for tenant_id in tenants:
        for doc in ("d1", "d2"):
            put(index, *(make_chunk(tenant_id, doc, n, f"walnut bread {doc} {n}") for n in range(3)))
        index.stage_vectors(tenant_id, "d3", {"h1": EMBEDDER.embed_query("a"), "h2": EMBEDDER.embed_query("b")})
    assert index.count_tenant("acme") == 8
    # When acme is erased in steps of 3
    steps = []
    while step := index.erase_tenant("acme", limit=3):
        steps.append(step)
        assert step <= 3 and len(steps) < 20
    # Then all 8 entries went, nothing of acme is found, and the other tenants keep all of theirs
    assert sum(steps) == 8
    assert index.count_tenant("acme") == 0
    assert keyword(index, ALICE, "walnut") == []
    assert index.vectors_by_hash("acme", ["h1", "h2"]) == {}
    for tenant_id in tenants[1:]:
        caller = Caller(tenant_id=tenant_id, user_id="alice")
        assert index.count_tenant(tenant_id) == 8
        assert len(keyword(index, caller, "walnut")) == 6
        assert set(index.vectors_by_hash(tenant_id, ["h1", "h2"])) == {"h1", "h2"}
    # And erasing an empty tenant deletes nothing
    assert index.erase_tenant("acme") == 0 and index.count_tenant("nobody") == 0


def test_a_serverless_erasure_pages_past_what_it_deleted_and_counts_true_after_the_refresh_window(
    lagging: Lagging,
) -> None:
    # Given a tenant of 7 searchable chunks on a collection whose deletes become visible only after a window
    for doc in ("d1", "d2"):
        put(lagging.index, *(make_chunk("acme", doc, i, f"walnut {doc} {i}") for i in range(3 if doc == "d1" else 4)))
    put(lagging.index, make_chunk("acme-eu", "d1", 0, "walnut neighbour"))
    lagging.wait_for_refresh()
    # When it is erased in steps of 2 within the window
    steps = []
    while step := lagging.index.erase_tenant("acme", limit=2):
        steps.append(step)
        assert len(steps) < 10
    # Then each step deleted entries the earlier ones had not (the search still showed those): 7 in 4 steps
    assert steps == [2, 2, 2, 1]
    # And the count still sees the deleted entries until the window has passed, then none; acme-eu keeps its own
    assert lagging.index.count_tenant("acme") == 7
    lagging.wait_for_refresh()
    assert lagging.index.count_tenant("acme") == 0
    assert lagging.index.count_tenant("acme-eu") == 1
