"""The S3 Vectors adapter beyond the index contract: limits checked before the call, the service's
errors translated, the replace loop past one query's 100 hits, the BUILDING analyzer; and the double held
to moto 5.2 where both answer (buckets, indexes, put/get/list/delete vectors), so it cannot drift there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from citewise.aws.s3vectors import S3VectorsIndex
from citewise.aws.s3vectors_requests import index_name, index_request
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.errors import SearchBackendError, ThrottledError, ValidationError
from citewise.domain.models import Caller, Chunk, SearchRequest, Visibility
from citewise.query.retrieval import Retriever, RoutingOptions
from citewise.query.routing import DeterministicRouter
from tests.contract.test_index_contract import make_chunk, put
from tests.doubles.s3vectors import FakeS3Vectors

DIMENSION = 64
EMBEDDER = HashingEmbedder(DIMENSION)
ALICE = Caller(tenant_id="acme", user_id="alice")
BUCKET = "citewise-test"


@dataclass
class Opened:
    fake: FakeS3Vectors
    index: S3VectorsIndex

    def calls(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.fake.requests if name == operation]

    def stored(self, tenant_id: str = "acme", *, markers: bool = False) -> list[str]:
        """The keys in the tenant's index: its chunks and staged vectors, and its source markers if asked."""
        keys = self.fake.buckets[BUCKET].indexes[index_name(tenant_id)].vectors
        return sorted(key for key in keys if markers or not key.startswith("m:"))


@pytest.fixture
def opened() -> Opened:
    fake = FakeS3Vectors()
    fake.create_bucket(BUCKET)
    index = S3VectorsIndex(fake.client(), BUCKET)
    index.ensure(EMBEDDER.name, DIMENSION)
    return Opened(fake, index)


def test_the_first_write_creates_the_tenants_index_as_designed(opened: Opened) -> None:
    put(opened.index, make_chunk("acme", "doc", 0, "walnut"))
    [created] = opened.calls("CreateIndex")
    assert created == {"vectorBucketName": BUCKET, "indexName": index_name("acme"), **index_request(DIMENSION)}
    put(opened.index, make_chunk("acme", "doc", 0, "walnut"))
    assert len(opened.calls("CreateIndex")) == 1 and len(opened.calls("GetIndex")) == 1


def test_searches_past_the_limits_are_refused_before_any_call(opened: Opened) -> None:
    put(opened.index, make_chunk("acme", "doc", 0, "walnut"))
    before = len(opened.fake.requests)
    with pytest.raises(ValidationError, match="at most 100 results"):
        opened.index.vector_search(ALICE, EMBEDDER.embed_query("walnut"), None, 101)
    with pytest.raises(ValidationError, match="at most 1024 characters"):
        opened.index.keyword_search(ALICE, "walnut " * 200, None, 10)
    assert len(opened.fake.requests) == before


def test_a_document_over_the_metadata_budget_is_refused_before_any_write(opened: Opened) -> None:
    chunk = make_chunk("acme", "doc", 0, "walnut", attributes={"notes": "x" * 3000})
    with pytest.raises(ValidationError) as refused:
        put(opened.index, chunk)
    assert refused.value.details["attributes"] == ["notes"]
    assert opened.calls("PutVectors") == []


@pytest.mark.parametrize("operation", ["QueryVectors", "PutVectors"])
def test_throttling_is_a_throttled_error(opened: Opened, operation: str) -> None:
    put(opened.index, make_chunk("acme", "doc", 0, "walnut"))
    opened.fake.fail_next(operation, "TooManyRequestsException")
    with pytest.raises(ThrottledError) as raised:
        if operation == "QueryVectors":
            opened.index.keyword_search(ALICE, "walnut", None, 5)
        else:
            put(opened.index, make_chunk("acme", "doc", 0, "pecan"))
    assert raised.value.__cause__ is not None


def test_a_full_bucket_is_a_backend_error_not_throttling() -> None:
    fake = FakeS3Vectors(max_indexes=1)
    fake.create_bucket(BUCKET)
    index = S3VectorsIndex(fake.client(), BUCKET)
    index.ensure(EMBEDDER.name, DIMENSION)
    put(index, make_chunk("acme", "doc", 0, "walnut"))
    with pytest.raises(SearchBackendError, match="maximum of indexes") as raised:
        put(index, make_chunk("globex", "doc", 0, "walnut"))
    assert not isinstance(raised.value, ThrottledError)


def test_a_replace_removes_more_stale_chunks_than_one_query_returns_and_batches_its_writes(opened: Opened) -> None:
    # Given a document of 620 chunks (two PutVectors of at most 500, the first with the source marker)
    put(opened.index, *(make_chunk("acme", "big", n, f"walnut part {n}") for n in range(620)))
    assert [len(call["vectors"]) for call in opened.calls("PutVectors")] == [500, 121]

    # When it is replaced by three chunks
    put(opened.index, *(make_chunk("acme", "big", n, f"pecan part {n}") for n in range(3)))

    # Then the 617 others are gone, found 100 at a time
    assert opened.stored(markers=True) == [*(f"c:acme-big-{n:05d}" for n in range(3)), "m:big"]
    assert opened.index.count_tenant("acme") == 3


def test_a_failure_between_write_and_delete_leaves_a_superset_that_the_retry_repairs(opened: Opened) -> None:
    put(opened.index, *(make_chunk("acme", "doc", n, f"pepper part {n}") for n in range(3)))
    opened.fake.fail_next("DeleteVectors", "ServiceUnavailableException")
    new = make_chunk("acme", "doc", 0, "ginger only now")
    with pytest.raises(ThrottledError):  # a 503 is capacity: the ingest queue retries
        put(opened.index, new)
    assert len(opened.stored()) == 3  # never fewer: chunk 0 overwritten, 1 and 2 still there
    put(opened.index, new)
    assert opened.stored() == ["c:acme-doc-00000"]


def test_a_building_analyzer_empties_the_keyword_list_until_it_is_active(opened: Opened) -> None:
    put(opened.index, make_chunk("acme", "doc", 0, "walnut bread"))
    fresh = S3VectorsIndex(opened.fake.client(), BUCKET)  # another process, which has not seen the index
    fresh.ensure(EMBEDDER.name, DIMENSION)
    opened.fake.buckets[BUCKET].indexes[index_name("acme")].building = True
    queries = len(opened.calls("QueryVectors"))

    assert fresh.keyword_search(ALICE, "walnut", None, 5) == []
    assert len(opened.calls("QueryVectors")) == queries  # no full-text query was sent
    assert [s.chunk_id for s in fresh.vector_search(ALICE, EMBEDDER.embed_query("walnut bread"), None, 5)] == [
        "acme-doc-00000"
    ]

    opened.fake.buckets[BUCKET].indexes[index_name("acme")].building = False
    assert [s.chunk_id for s in fresh.keyword_search(ALICE, "walnut", None, 5)] == ["acme-doc-00000"]


def test_erasing_a_tenant_drops_its_index_once_empty(opened: Opened) -> None:
    put(opened.index, make_chunk("acme", "doc", 0, "walnut"))
    assert opened.index.erase_tenant("acme") == 1
    assert opened.index.erase_tenant("acme") == 0
    assert index_name("acme") not in opened.fake.buckets[BUCKET].indexes
    assert opened.index.count_tenant("acme") == 0 and opened.index.keyword_search(ALICE, "walnut", None, 5) == []


# --- the double against moto, where both answer --------------------------------------------------------


@pytest.fixture
def moto_client(aws_credentials: None) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3vectors", region_name="us-east-1")
        client.create_vector_bucket(vectorBucketName=BUCKET)
        yield client


def _exercise(client: Any) -> list[Any]:
    """One sequence of the calls moto implements; what each answered, without ARNs and timestamps."""
    at = {"vectorBucketName": BUCKET, "indexName": "t-acme"}
    client.create_index(**at, **index_request(3))
    vectors = [
        {"key": f"k{n}", "data": {"float32": [float(n), 1.0, 0.5]}, "metadata": {"doc_id": "d", "n": n, "tags": ["a"]}}
        for n in range(5)
    ]
    client.put_vectors(**at, vectors=vectors)
    client.put_vectors(**at, vectors=[{**vectors[0], "metadata": {"doc_id": "d", "n": 99}}])  # overwrite
    client.delete_vectors(**at, keys=["k1", "missing"])
    got = client.get_vectors(**at, keys=["k0", "k1", "k2"], returnData=True, returnMetadata=True)["vectors"]
    listed = client.list_vectors(**at, returnMetadata=True)["vectors"]
    index = client.get_index(**at)["index"]
    answers: list[Any] = [
        sorted(got, key=lambda v: v["key"]),
        sorted(listed, key=lambda v: v["key"]),
        {key: index[key] for key in ("indexName", "dimension", "distanceMetric", "dataType")},
    ]
    # (moto answers a second CreateIndex of a name with success; the model lists ConflictException for it)
    with pytest.raises(client.exceptions.NotFoundException):
        client.get_index(**{**at, "indexName": "t-none"})
    return answers


def test_the_double_answers_as_moto_where_moto_implements_the_call(moto_client: Any) -> None:
    fake = FakeS3Vectors()
    fake.create_bucket(BUCKET)
    assert _exercise(fake.client()) == _exercise(moto_client)


def test_calls_per_write_and_per_hybrid_query(opened: Opened) -> None:
    """The figures docs/s3vectors-design.md quotes ("Calls per operation")."""
    # Given a tenant whose index exists and is known to this process
    put(opened.index, make_chunk("acme", "seed", 0, "seed"))
    opened.index.keyword_search(ALICE, "seed", None, 5)
    opened.fake.requests.clear()

    # When a new document of 40 chunks is written, replaced by 30, then searched (hybrid) and deleted
    put(opened.index, *(make_chunk("acme", "doc", n, f"walnut part {n}") for n in range(40)))
    written = [name for name, _ in opened.fake.requests]
    opened.fake.requests.clear()
    put(opened.index, *(make_chunk("acme", "doc", n, f"walnut part {n}") for n in range(30)))
    replaced = [name for name, _ in opened.fake.requests]
    opened.fake.requests.clear()
    hits = Retriever(opened.index, EMBEDDER).search(ALICE, SearchRequest(query="walnut part", route=False))
    queried = [name for name, _ in opened.fake.requests]
    opened.fake.requests.clear()
    removed = opened.index.delete_document("acme", "doc")
    deleted = [name for name, _ in opened.fake.requests]

    # Then a write is one PutVectors and one QueryVectors (no stale chunk), a replace adds a DeleteVectors,
    # a hybrid query is two QueryVectors, and a delete is a query and a delete per kind of entry
    assert written == ["PutVectors", "QueryVectors"]
    assert replaced == ["PutVectors", "QueryVectors", "DeleteVectors"]
    assert hits and sorted(queried) == ["QueryVectors", "QueryVectors"]
    assert removed == 30 and deleted == ["QueryVectors", "DeleteVectors", "QueryVectors"]


def test_a_process_that_saw_an_index_before_it_was_dropped_reads_nothing_and_writes_into_a_new_one(
    opened: Opened,
) -> None:
    # Given a process that knows the tenant's index, which another process then erases and drops
    put(opened.index, make_chunk("acme", "doc", 0, "walnut"))
    other = S3VectorsIndex(opened.fake.client(), BUCKET)
    other.ensure(EMBEDDER.name, DIMENSION)
    while other.erase_tenant("acme"):
        pass
    assert index_name("acme") not in opened.fake.buckets[BUCKET].indexes

    # When the first process searches, then writes / Then it finds nothing, and its write makes a new index
    assert opened.index.keyword_search(ALICE, "walnut", None, 5) == []
    put(opened.index, make_chunk("acme", "doc", 0, "pecan"))
    assert opened.stored() == ["c:acme-doc-00000"]
    assert [s.chunk_id for s in opened.index.keyword_search(ALICE, "pecan", None, 5)] == ["acme-doc-00000"]


def test_entries_outside_the_callers_access_are_dropped_even_if_the_service_returned_them(opened: Opened) -> None:
    # Given alice's private chunk, a staged vector, and a service that (wrongly) ignores filters
    put(opened.index, make_chunk("acme", "diary", 0, "secret walnut plans", visibility=Visibility.PRIVATE))
    put(opened.index, make_chunk("acme", "wiki", 0, "public walnut facts"))
    opened.index.stage_vectors("acme", "big", {"hash:x": EMBEDDER.embed_query("walnut")})
    opened.fake.ignore_filters = True
    bob = Caller(tenant_id="acme", user_id="bob")

    # When bob searches / Then he gets the shared chunk only, by either search, and only its source
    assert [s.chunk_id for s in opened.index.keyword_search(bob, "walnut", None, 10)] == ["acme-wiki-00000"]
    assert [s.chunk_id for s in opened.index.vector_search(bob, EMBEDDER.embed_query("walnut"), None, 10)] == [
        "acme-wiki-00000"
    ]


@pytest.mark.parametrize("bad", [[0.0] * DIMENSION, [float("nan")] * DIMENSION, [1.0] * (DIMENSION - 1)])
def test_vectors_the_service_refuses_are_refused_before_the_call(opened: Opened, bad: list[float]) -> None:
    chunk = make_chunk("acme", "doc", 0, "walnut")
    with pytest.raises(SearchBackendError, match=chunk.chunk_id):
        opened.index.replace_document("acme", "doc", [chunk], [bad])
    with pytest.raises(SearchBackendError, match="hash:x"):
        opened.index.stage_vectors("acme", "doc", {"hash:x": bad})
    assert opened.calls("PutVectors") == []


def test_the_double_refuses_a_zero_vector_under_cosine_as_the_api_reference_says(opened: Opened) -> None:
    client = opened.fake.client()
    at = {"vectorBucketName": BUCKET, "indexName": "t-zero"}
    client.create_index(**at, **index_request(3))
    with pytest.raises(client.exceptions.ValidationException, match="zero vectors"):
        client.put_vectors(**at, vectors=[{"key": "k", "data": {"float32": [0.0, 0.0, 0.0]}}])


# --- sources: the router's vocabulary, from one source marker per document -----------------------------


def _from(s: str, *chunks: Chunk) -> list[Chunk]:
    """The chunks, of a document whose source is `s`."""
    return [chunk.model_copy(update={"document": chunk.document.model_copy(update={"source": s})}) for chunk in chunks]


def test_a_routed_query_reads_the_sources_in_one_call_whatever_the_tenants_size(opened: Opened) -> None:
    # Given a tenant of 1,200 chunks in three documents of two sources (two ListVectors pages of 1,000)
    for doc, source in (("a", "wiki"), ("b", "jira"), ("c", "wiki")):
        put(opened.index, *_from(source, *(make_chunk("acme", doc, n, f"walnut part {n}") for n in range(400))))
    opened.index.keyword_search(ALICE, "walnut", None, 5)  # this process knows the analyzer is ACTIVE
    opened.fake.requests.clear()

    # When a routed hybrid query runs
    routing = RoutingOptions(router=DeterministicRouter())
    retrieval = Retriever(opened.index, EMBEDDER, routing=routing).retrieve(ALICE, SearchRequest(query="walnut part"))

    # Then it asked three QueryVectors (the sources, BM25, vector) and listed nothing
    assert retrieval.hits
    assert sorted(name for name, _ in opened.fake.requests) == ["QueryVectors"] * 3
    assert opened.index.sources(ALICE) == ["jira", "wiki"]


def test_sources_follow_access_replaces_deletes_and_erasure(opened: Opened) -> None:
    bob = Caller(tenant_id="acme", user_id="bob")
    # Given a shared document, a private one of alice's and one of bob's, each of its own source
    put(opened.index, *_from("wiki", make_chunk("acme", "shared", 0, "walnut")))
    put(opened.index, *_from("diary", make_chunk("acme", "mine", 0, "walnut", visibility=Visibility.PRIVATE)))
    his = make_chunk("acme", "his", 0, "walnut", owner="bob", visibility=Visibility.PRIVATE)
    put(opened.index, *_from("mail", his))
    put(opened.index, *_from("", make_chunk("acme", "nameless", 0, "walnut")))

    # Then each caller sees the shared source and their own private ones only
    assert opened.index.sources(ALICE) == ["diary", "wiki"]
    assert opened.index.sources(bob) == ["mail", "wiki"]
    # even from a service that (wrongly) ignored the filter
    opened.fake.ignore_filters = True
    assert opened.index.sources(bob) == ["mail", "wiki"]
    opened.fake.ignore_filters = False

    # When the shared document moves to another source and turns private, and alice's private one is deleted
    put(opened.index, *_from("confluence", make_chunk("acme", "shared", 0, "walnut", visibility=Visibility.PRIVATE)))
    assert opened.index.delete_document("acme", "mine") == 1
    # Then the old source is gone for everyone, the new one is alice's alone, the deleted one is gone
    assert opened.index.sources(ALICE) == ["confluence"]
    assert opened.index.sources(bob) == ["mail"]

    # And the markers are no entries of the port's, and an erasure takes them with the rest
    assert opened.index.count_tenant("acme") == 3
    erased = []
    while step := opened.index.erase_tenant("acme", limit=1):
        erased.append(step)
    assert erased == [1, 1, 1] and opened.index.sources(ALICE) == [] and opened.index.sources(bob) == []


def test_sources_past_one_querys_100_markers_are_all_found(opened: Opened) -> None:
    # Given 240 documents of one source, whose markers fill the first query, and 10 of two others
    for n in range(250):
        source = "arxiv" if n < 240 else ("blog", "news")[n % 2]
        put(opened.index, *_from(source, make_chunk("acme", f"d{n:03d}", 0, "walnut")))
    opened.fake.requests.clear()
    # When the sources are asked / Then all three are found, the second query excluding the first's source
    assert opened.index.sources(ALICE) == ["arxiv", "blog", "news"]
    queries = opened.calls("QueryVectors")
    assert len(queries) == 2 and queries[1]["filter"]["$and"][-1] == {"source": {"$nin": ["arxiv"]}}


def test_the_doubles_hybrid_query_fuses_both_searches_by_reciprocal_rank(opened: Opened) -> None:
    # Given chunks that the words match, that the vector is near, or both
    put(opened.index, make_chunk("acme", "both", 0, "walnut bread recipe"))
    put(opened.index, make_chunk("acme", "words", 0, "walnut"))
    put(opened.index, make_chunk("acme", "near", 0, "bread recipe"))
    client, at = opened.fake.client(), {"vectorBucketName": BUCKET, "indexName": index_name("acme")}
    hybrid = {"queryTexts": [{"metadataKey": "#text", "text": "walnut"}], "topK": 2, "returnScores": True}
    vector = {"float32": EMBEDDER.embed_query("walnut bread recipe")}

    # When a hybrid query asks for the best 2
    hits = client.query_vectors(**at, **hybrid, queryVector=vector, filter={"#kind": {"$eq": "chunk"}})["vectors"]

    # Then each search ranked 2 deep (BM25: the shorter "walnut" first; vectors: "both" first), RRF ranked
    # their union, and each hit says what matched it
    assert [hit["key"] for hit in hits] == ["c:acme-both-00000", "c:acme-words-00000"]
    both, words = (hit["scores"] for hit in hits)
    assert both["fused"] == pytest.approx(1 / 61 + 1 / 62) and both["vectorDistance"] < 0.01 and both["bm25Scores"]
    assert words["fused"] == pytest.approx(1 / 61) and "vectorDistance" not in words
    assert all("distance" not in hit for hit in hits)
