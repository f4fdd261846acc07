"""Tenant and owner isolation of every index read, as properties over random corpora and filters.

The rule: a read sees only `tenant_id = caller.tenant AND (visibility = shared OR owner = caller.user)`,
and the user's filter is ANDed inside it, so it can only narrow the result, never widen it. Corpora are
drawn from a small vocabulary so that queries really match; tenant and user names include case and
prefix look-alikes (`acme`/`Acme`/`acme-2`, `alice`/`Alice`) and filters include deliberate attempts
to widen access (orAll with visibility, owner = another user, notEquals owner).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError as PydanticValidationError

from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.errors import ValidationError
from citewise.domain.matching import matches, metadata_view
from citewise.domain.models import (
    COMPARISON_OPERATORS,
    Caller,
    Chunk,
    DocumentMetadata,
    Filter,
    SearchRequest,
    Visibility,
)
from citewise.domain.textutil import STOPWORDS, content_terms, embedding_text
from citewise.ingest.pipeline import Outcome
from citewise.query.retrieval import MAX_KEYWORD_CHARS, Retriever
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings
from citewise_local import index as local_index
from citewise_local.index import LocalIndex
from tests.factories import source

DIMENSION = 64
EMBEDDER = HashingEmbedder(DIMENSION)
MODES = ("hybrid", "bm25", "vector")
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)

# No word is a stopword, none is changed by the index's stemmer, and none occurs in titles ("Report
# <n>"), so the oracle's "contains a query word" is plain set membership (checked by the first test).
VOCABULARY = ("apple", "banana", "cherry", "walnut", "pepper", "ginger", "salmon", "quartz")
TENANTS = ("acme", "Acme", "acme-2", "globex", "initech")
USERS = ("alice", "Alice", "bob", "carol")
OUTSIDERS_TENANT = "umbrella"  # a tenant that never has documents
OUTSIDER_USER = "mallory"  # a user who owns nothing anywhere
SOURCES = ("wiki", "s3")
DEPARTMENTS = ("eng", "ops", "sales")
LABELS = ("red", "blue", "green")


# --- the world: a corpus over several tenants, and probes into it --------------------------------


@dataclass(frozen=True)
class World:
    tenants: tuple[str, ...]
    users: tuple[str, ...]
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class Probe:
    caller: Caller
    words: tuple[str, ...]
    filters: Filter | None
    limit: int

    @property
    def query(self) -> str:
        return " ".join(self.words)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    tenants = tuple(draw(st.lists(st.sampled_from(TENANTS), min_size=2, max_size=4, unique=True)))
    users = tuple(draw(st.lists(st.sampled_from(USERS), min_size=2, max_size=3, unique=True)))
    chunks: list[Chunk] = []
    for number in range(draw(st.integers(min_value=1, max_value=10))):
        document = DocumentMetadata(
            tenant_id=draw(st.sampled_from(tenants)),
            doc_id=f"doc{number}",
            owner=draw(st.sampled_from(users)),
            visibility=draw(st.sampled_from(Visibility)),
            source=draw(st.sampled_from(SOURCES)),
            path=f"{draw(st.sampled_from(DEPARTMENTS))}/doc{number}.md",
            title=f"Report {number}",
            tags=tuple(draw(st.lists(st.sampled_from(LABELS), max_size=2, unique=True))),
            created_at=EPOCH + timedelta(days=number),
            updated_at=EPOCH + timedelta(days=number),
            attributes={
                "dept": draw(st.sampled_from(DEPARTMENTS)),
                "year": draw(st.integers(min_value=2019, max_value=2024)),
                "rating": draw(st.floats(min_value=0, max_value=5, allow_nan=False)),
                "pinned": draw(st.booleans()),
                "labels": draw(st.lists(st.sampled_from(LABELS), max_size=3, unique=True)),
                # A forged access attribute: the system fields must override it in every check.
                "visibility": "shared",
            },
        )
        for ordinal in range(draw(st.integers(min_value=1, max_value=3))):
            text = " ".join(draw(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6)))
            chunks.append(
                Chunk(
                    chunk_id=f"doc{number}-{ordinal:05d}",
                    ordinal=ordinal,
                    text=text,
                    start=0,
                    end=len(text),
                    content_hash=f"doc{number}-{ordinal}",
                    document=document,
                )
            )
    return World(tenants, users, tuple(chunks))


_KEYS = (
    "owner",
    "visibility",
    "source",
    "path",
    "title",
    "tags",
    "doc_id",
    "created_at",
    "dept",
    "year",
    "rating",
    "pinned",
    "labels",
    "page",
    "no_such_key",
)
_VALUES = st.one_of(
    st.sampled_from(
        (
            *USERS,
            OUTSIDER_USER,
            "shared",
            "private",
            *SOURCES,
            *DEPARTMENTS,
            *LABELS,
            "eng/",
            "Report",
            "doc1",
        )
    ),
    st.integers(min_value=2018, max_value=2025),
    st.floats(min_value=-1, max_value=6, allow_nan=False),
    st.booleans(),
    st.lists(st.sampled_from((*USERS, "shared", "private", *DEPARTMENTS, *LABELS)), min_size=1, max_size=3),
)
_OPERATORS = COMPARISON_OPERATORS


def _comparison(operator: str, key: str, value: Any) -> dict[str, Any]:
    return {operator: {"key": key, "value": value}}


_COMPARISONS = st.builds(_comparison, st.sampled_from(_OPERATORS), st.sampled_from(_KEYS), _VALUES)
# Filters written to widen access if they were ORed with, or replaced, the access filter.
_WIDENING = st.one_of(
    st.builds(lambda user: _comparison("equals", "owner", user), st.sampled_from((*USERS, OUTSIDER_USER))),
    st.builds(lambda user: _comparison("notEquals", "owner", user), st.sampled_from(USERS)),
    st.just(_comparison("equals", "visibility", "private")),
    st.just(_comparison("in", "visibility", ["shared", "private"])),
    st.just(_comparison("notEquals", "visibility", "nothing")),
    st.builds(
        lambda user: {
            "orAll": [
                _comparison("equals", "visibility", "shared"),
                _comparison("equals", "visibility", "private"),
                _comparison("notEquals", "owner", user),
            ]
        },
        st.sampled_from(USERS),
    ),
    st.builds(
        lambda users: {"orAll": [_comparison("equals", "owner", user) for user in users]},
        st.lists(st.sampled_from(USERS), min_size=1, max_size=3),
    ),
)
_FILTER_TREES = st.recursive(
    st.one_of(_COMPARISONS, _WIDENING),
    lambda children: st.builds(
        lambda operator, items: {operator: items},
        st.sampled_from(("andAll", "orAll")),
        st.lists(children, min_size=1, max_size=3),
    ),
    max_leaves=6,
)
FILTERS = _FILTER_TREES.map(Filter.model_validate)


@st.composite
def probes(draw: st.DrawFn, world: World, *, filtered: bool | None = None, limit: int | None = None) -> Probe:
    """A caller and a query: mostly a tenant and user with documents, sometimes outsiders."""
    populated = sorted({c.document.tenant_id for c in world.chunks})
    owners = sorted({c.document.owner for c in world.chunks})
    caller = Caller(
        tenant_id=draw(st.sampled_from(populated) | st.sampled_from((*world.tenants, OUTSIDERS_TENANT))),
        user_id=draw(st.sampled_from(owners) | st.sampled_from((*world.users, OUTSIDER_USER))),
    )
    words = draw(st.lists(st.sampled_from((*VOCABULARY, "the", "of", "zebra")), min_size=1, max_size=4))
    if filtered is None:
        filters = draw(st.none() | FILTERS)
    else:
        filters = draw(FILTERS) if filtered else None
    return Probe(caller, tuple(words), filters, limit or draw(st.integers(min_value=1, max_value=40)))


# Every example builds a fresh SQLite file; on a RAM-backed directory, where there is one, creating and
# checkpointing it costs no disk flushes, which keeps the properties fast on a busy machine.
_SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


@contextmanager
def indexed(world: World) -> Iterator[LocalIndex]:
    """A fresh LocalIndex on a temporary file holding the world's chunks, closed afterwards."""
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as home:
        index = LocalIndex(Path(home) / "index.db")
        try:
            index.ensure(EMBEDDER.name, DIMENSION)
            documents: dict[tuple[str, str], list[Chunk]] = {}
            for chunk in world.chunks:
                documents.setdefault((chunk.document.tenant_id, chunk.document.doc_id), []).append(chunk)
            for (tenant, doc_id), chunks in documents.items():
                vectors = EMBEDDER.embed_documents(
                    [embedding_text(c.document.title, c.heading_path, c.text) for c in chunks]
                )
                index.replace_document(tenant, doc_id, chunks, vectors)
            yield index
        finally:
            index.close()


# --- the oracle -----------------------------------------------------------------------------------


def visible_to(caller: Caller, chunk: Chunk) -> bool:
    document = chunk.document
    return document.tenant_id == caller.tenant_id and (
        document.visibility is Visibility.SHARED or document.owner == caller.user_id
    )


def passes(filters: Filter | None, chunk: Chunk) -> bool:
    return filters is None or matches(filters, metadata_view(chunk))


def contains_query_word(words: tuple[str, ...], chunk: Chunk) -> bool:
    content = {w for w in words if w not in STOPWORDS}
    return bool(content & set(chunk.text.split()))


def expected_keyword_hits(world: World, probe: Probe) -> set[str]:
    return {
        c.chunk_id
        for c in world.chunks
        if visible_to(probe.caller, c) and passes(probe.filters, c) and contains_query_word(probe.words, c)
    }


def expected_visible(world: World, probe: Probe) -> set[str]:
    return {c.chunk_id for c in world.chunks if visible_to(probe.caller, c) and passes(probe.filters, c)}


def assert_inside_access_and_filter(caller: Caller, filters: Filter | None, chunks: list[Chunk]) -> None:
    for chunk in chunks:
        assert chunk.document.tenant_id == caller.tenant_id, (chunk.chunk_id, caller)
        assert chunk.document.visibility is Visibility.SHARED or chunk.document.owner == caller.user_id, (
            chunk.chunk_id,
            caller,
        )
        assert passes(filters, chunk), (chunk.chunk_id, filters)
    assert len({c.chunk_id for c in chunks}) == len(chunks), "a chunk was returned twice"


# --- properties -----------------------------------------------------------------------------------


def test_the_vocabulary_is_indexed_word_for_word() -> None:
    # Given the corpus vocabulary / When reduced to index terms / Then each word is its own term
    assert [content_terms(word) for word in VOCABULARY] == [[word] for word in VOCABULARY]
    assert not set(content_terms("Report 12")) & set(VOCABULARY)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), world=worlds())
def test_keyword_search_stays_inside_access_and_filter(data: st.DataObject, world: World) -> None:
    # Given a random multi-tenant corpus in a local index
    with indexed(world) as index:
        for probe in data.draw(st.lists(probes(world), min_size=1, max_size=5)):
            # When a caller runs a keyword search with a random (possibly widening) filter
            results = index.keyword_search(probe.caller, probe.query, probe.filters, probe.limit)

            # Then every chunk is the caller's to read and satisfies the filter, within the limit
            chunks = [r.chunk for r in results]
            assert_inside_access_and_filter(probe.caller, probe.filters, chunks)
            assert len(chunks) == min(probe.limit, len(expected_keyword_hits(world, probe)))
            assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), world=worlds())
def test_vector_search_stays_inside_access_and_filter(data: st.DataObject, world: World) -> None:
    # Given a random multi-tenant corpus in a local index
    with indexed(world) as index:
        for probe in data.draw(st.lists(probes(world), min_size=1, max_size=5)):
            # When a caller runs a vector search with a random (possibly widening) filter
            vector = EMBEDDER.embed_query(probe.query)
            results = index.vector_search(probe.caller, vector, probe.filters, probe.limit)

            # Then every chunk is the caller's to read and satisfies the filter, within the limit
            chunks = [r.chunk for r in results]
            assert_inside_access_and_filter(probe.caller, probe.filters, chunks)
            assert len(chunks) == min(probe.limit, len(expected_visible(world, probe)))
            assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), world=worlds())
def test_retriever_search_stays_inside_access_and_filter(mode: str, data: st.DataObject, world: World) -> None:
    # Given a random multi-tenant corpus and a retriever in one of the three modes
    with indexed(world) as index:
        retriever = Retriever(index, EMBEDDER, mode=mode)  # type: ignore[arg-type]
        for probe in data.draw(st.lists(probes(world), min_size=1, max_size=4)):
            request = SearchRequest(
                query=probe.query,
                top_k=min(probe.limit, 50),
                max_sources=data.draw(st.none() | st.integers(min_value=1, max_value=5)),
                filters=probe.filters,
            )

            # When the caller searches
            hits = retriever.search(probe.caller, request)

            # Then every hit is readable by the caller, satisfies the filter, and respects the limits
            assert_inside_access_and_filter(probe.caller, probe.filters, [h.chunk for h in hits])
            assert len(hits) <= request.top_k
            sources = {h.chunk.document.doc_id for h in hits}
            assert len(sources) <= (request.max_sources or request.top_k)
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            # Normalised-score fusion (the default since issue 16) scores the weakest fused candidate 0; RRF never did.
            assert all(0.0 <= h.score <= 1.0 and 0.0 <= h.relevance_score <= 1.0 for h in hits)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), world=worlds())
def test_keyword_search_without_filter_finds_exactly_the_visible_chunks_with_a_query_word(
    data: st.DataObject, world: World
) -> None:
    # Given a random multi-tenant corpus in a local index
    with indexed(world) as index:
        for probe in data.draw(st.lists(probes(world, filtered=False, limit=1000), min_size=1, max_size=5)):
            # When a caller searches without a filter and with a limit above the corpus size
            results = index.keyword_search(probe.caller, probe.query, None, probe.limit)

            # Then the result is exactly the visible chunks containing a query word: none missing
            assert {r.chunk.chunk_id for r in results} == expected_keyword_hits(world, probe)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), world=worlds())
def test_filtered_searches_find_exactly_the_visible_matching_chunks(data: st.DataObject, world: World) -> None:
    # Given a random multi-tenant corpus in a local index
    with indexed(world) as index:
        for probe in data.draw(st.lists(probes(world, filtered=True, limit=1000), min_size=1, max_size=5)):
            # When a caller searches both ways with a filter and a limit above the corpus size
            keyword = index.keyword_search(probe.caller, probe.query, probe.filters, probe.limit)
            vector = index.vector_search(probe.caller, EMBEDDER.embed_query(probe.query), probe.filters, probe.limit)

            # Then each returns exactly what the oracle says: access AND filter (AND a query word)
            assert {r.chunk.chunk_id for r in keyword} == expected_keyword_hits(world, probe)
            assert {r.chunk.chunk_id for r in vector} == expected_visible(world, probe)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), world=worlds())
def test_vector_search_top_k_are_the_best_of_the_visible_chunks(data: st.DataObject, world: World) -> None:
    # Given a random corpus and the cosine similarity of every chunk to a query, computed independently
    with indexed(world) as index:
        for probe in data.draw(st.lists(probes(world), min_size=1, max_size=5)):
            query = EMBEDDER.embed_query(probe.query)
            similarities = sorted(
                (
                    sum(a * b for a, b in zip(_vector(c), query, strict=True))
                    for c in world.chunks
                    if visible_to(probe.caller, c) and passes(probe.filters, c)
                ),
                reverse=True,
            )

            # When a caller asks for the top `limit`
            results = index.vector_search(probe.caller, query, probe.filters, probe.limit)

            # Then the scores are the `limit` best similarities among the chunks it may read
            assert [r.score for r in results] == pytest.approx(similarities[: probe.limit], abs=1e-5)


def _vector(chunk: Chunk) -> list[float]:
    return EMBEDDER.embed_documents([embedding_text(chunk.document.title, chunk.heading_path, chunk.text)])[0]


@settings(max_examples=50, deadline=None)
@given(query=st.text(min_size=1, max_size=300))
def test_keyword_search_never_raises_on_any_text(query: str) -> None:
    # Given a small index and an arbitrary string as a query (FTS5 syntax, quotes, unicode, controls)
    world = World(("acme",), ("alice",), (_plain_chunk("acme", "doc0", "apple banana"),))
    with indexed(world) as index:
        caller = Caller(tenant_id="acme", user_id="alice")

        # When searched / Then it returns a list of readable chunks rather than raising
        results = index.keyword_search(caller, query, None, 10)
        assert all(r.chunk.document.tenant_id == "acme" for r in results)


def _plain_chunk(
    tenant: str, doc_id: str, text: str, *, owner: str = "alice", visibility: Visibility = Visibility.SHARED
) -> Chunk:
    document = DocumentMetadata(
        tenant_id=tenant,
        doc_id=doc_id,
        owner=owner,
        visibility=visibility,
        source="wiki",
        path=f"{doc_id}.md",
        title="Report",
        created_at=EPOCH,
        updated_at=EPOCH,
    )
    return Chunk(
        chunk_id=f"{doc_id}-00000",
        ordinal=0,
        text=text,
        start=0,
        end=len(text),
        content_hash=doc_id,
        document=document,
    )


def test_another_tenants_documents_do_not_change_which_of_mine_match(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given acme's two documents, one about apples and one about bananas; and, in a second index, the
    # same two plus globex's documents that all say "apple" (more postings than the keyword budget,
    # scaled down from 20,000 to 5 so the test stays small)
    monkeypatch.setattr(local_index, "MAX_POSTINGS", 5)
    mine = (_plain_chunk("acme", "a1", "apple orchard"), _plain_chunk("acme", "a2", "banana split"))
    neighbours = tuple(_plain_chunk("globex", f"g{n}", "apple apple harvest") for n in range(10))
    alone = World(("acme",), ("alice",), mine)
    crowded = World(("acme", "globex"), ("alice",), mine + neighbours)
    caller = Caller(tenant_id="acme", user_id="alice")

    # When alice searches for both fruits in each index
    with indexed(alone) as index:
        found_alone = {r.chunk.chunk_id for r in index.keyword_search(caller, "apple banana", None, 50)}
    with indexed(crowded) as index:
        found_crowded = {r.chunk.chunk_id for r in index.keyword_search(caller, "apple banana", None, 50)}

    # Then she finds the same documents of hers: what another tenant stores neither hides her matches
    # nor reveals, through their absence, which words are common in other tenants' documents
    assert found_alone == {"a1-00000", "a2-00000"}
    assert found_crowded == found_alone


@pytest.mark.parametrize(
    ("newcomer_tenant", "newcomer_visibility"),
    [
        pytest.param("acme", Visibility.SHARED, id="another-tenants-document"),
        pytest.param("globex", Visibility.PRIVATE, id="a-colleagues-private-document"),
    ],
)
def test_a_write_landing_during_a_vector_search_never_leaks_a_chunk(
    monkeypatch: pytest.MonkeyPatch, newcomer_tenant: str, newcomer_visibility: Visibility
) -> None:
    # Given globex's shared document, the last one written, and a second handle on the same index file
    # (the CLI ingesting while the local server answers)
    gina = Caller(tenant_id="globex", user_id="gina")
    vector = EMBEDDER.embed_query("apple")
    newcomer = _plain_chunk(newcomer_tenant, "s1", "apple merger", owner="zoe", visibility=newcomer_visibility)
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as home:
        server, cli = LocalIndex(Path(home) / "index.db"), LocalIndex(Path(home) / "index.db")
        try:
            server.ensure(EMBEDDER.name, DIMENSION)
            cli.ensure(EMBEDDER.name, DIMENSION)
            server.replace_document("globex", "g1", [_plain_chunk("globex", "g1", "apple harvest")], [vector])

            # ...and the interleaving where, just after gina's search has loaded the vectors, the CLI
            # deletes globex's document and writes one gina may not read
            load_vectors = server._current_matrix

            def load_then_cli_writes() -> Any:
                loaded = load_vectors()
                cli.delete_document("globex", "g1")
                cli.replace_document(newcomer_tenant, "s1", [newcomer], [vector])
                return loaded

            monkeypatch.setattr(server, "_current_matrix", load_then_cli_writes)

            # When gina's vector search completes
            results = server.vector_search(gina, vector, None, 10)

            # Then it returns nothing she may not read (at most the chunk that was just deleted)
            assert_inside_access_and_filter(gina, None, [r.chunk for r in results])
        finally:
            server.close()
            cli.close()


# --- examples -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """One local stack for the read-only examples: two tenants, a shared and a private document.

    In acme: alice's shared roadmap and bob's private salary review; in globex: a shared roadmap. Every
    document contains the word "apple".
    """
    built = build_services(Settings(home=tmp_path_factory.mktemp("isolation"), embedder="hashing"))
    corpus = [
        source("acme", "roadmap.md", b"# Roadmap\n\nThe apple roadmap for next year.", owner="alice"),
        source(
            "acme",
            "salary.md",
            b"# Salary\n\nBob's apple salary review.",
            owner="bob",
            visibility=Visibility.PRIVATE,
        ),
        source("globex", "roadmap.md", b"# Roadmap\n\nGlobex apple roadmap secrets.", owner="gina"),
    ]
    for document in corpus:
        assert built.ingestor.ingest(document).outcome is Outcome.NEW
    yield built
    built.close()


def _retrievers(services: Services) -> list[Retriever]:
    return [Retriever(services.index, services.embedder, mode=mode) for mode in MODES]  # type: ignore[arg-type]


def _paths(retriever: Retriever, caller: Caller, request: SearchRequest) -> set[str]:
    return {h.chunk.document.path for h in retriever.search(caller, request)}


ALICE = Caller(tenant_id="acme", user_id="alice")
APPLE = SearchRequest(query="apple", top_k=50)

RESERVED_FILTERS = [
    pytest.param({"equals": {"key": "tenant_id", "value": "globex"}}, id="tenant_id"),
    pytest.param({"equals": {"key": "tenant", "value": "globex"}}, id="tenant"),
    pytest.param({"notEquals": {"key": "tenantId", "value": "acme"}}, id="tenantId"),
    pytest.param(
        {
            "orAll": [
                {"equals": {"key": "source", "value": "wiki"}},
                {"andAll": [{"in": {"key": "tenant_id", "value": ["acme", "globex"]}}]},
            ]
        },
        id="nested-tenant_id",
    ),
]


@pytest.mark.parametrize("raw_filter", RESERVED_FILTERS)
def test_a_filter_naming_the_tenant_is_refused(stack: Services, raw_filter: dict[str, Any]) -> None:
    # Given documents in tenants acme and globex, and a filter naming a tenant key
    request = SearchRequest(query="apple roadmap", filters=Filter.model_validate(raw_filter))

    for retriever in _retrievers(stack):
        # When a caller of acme searches with it, in each mode
        # Then the request is refused outright, naming the reserved key, before any index read
        with pytest.raises(ValidationError) as refused:
            retriever.search(ALICE, request)
        assert refused.value.code == "VALIDATION_ERROR", retriever.mode
        assert refused.value.details["field"] == "filters"
        assert set(refused.value.details["reserved_keys"]) <= {"tenant_id", "tenant", "tenantId"}


def test_an_oversized_query_is_rejected_by_the_request_model() -> None:
    # Given a 100 KB query
    query = "apple " * (100 * 1024 // 6)

    # When a SearchRequest is built / Then pydantic refuses it for exceeding 10,000 characters
    with pytest.raises(PydanticValidationError) as refused:
        SearchRequest(query=query)
    assert refused.value.errors()[0]["type"] == "string_too_long"
    assert refused.value.errors()[0]["loc"] == ("query",)


def test_the_longest_allowed_query_of_distinct_words_searches_without_error(stack: Services) -> None:
    # Given a 10,000-character query of ~1,400 distinct words that starts with one the documents contain
    filler = " ".join(f"w{n}" for n in range(2000))
    request = SearchRequest(query=("apple " + filler)[:10_000], top_k=5)

    for retriever in _retrievers(stack):
        # When alice searches with it in each mode
        # Then the one acme document she may read comes back rather than an error
        assert _paths(retriever, ALICE, request) == {"roadmap.md"}, retriever.mode


def test_the_keyword_ranking_reads_the_first_words_of_a_long_query(stack: Services) -> None:
    # Given the same query with its one known word past MAX_KEYWORD_CHARS: as OpenSearch cannot take more
    # clauses, BM25 reads the first MAX_KEYWORD_CHARS characters on every backend
    filler = " ".join(f"w{n}" for n in range(2000))
    late = SearchRequest(query=filler[: MAX_KEYWORD_CHARS + 10] + " apple", top_k=5)
    by_mode = {retriever.mode: _paths(retriever, ALICE, late) for retriever in _retrievers(stack)}
    # Then BM25 alone finds nothing, while the vector ranking, which reads all of it, still answers
    assert by_mode["bm25"] == set()
    assert by_mode["hybrid"] == by_mode["vector"] == {"roadmap.md"}


@pytest.mark.parametrize(
    "query",
    [
        '"NEAR( OR * -x ^y:z',
        "NEAR(apple pear, 2)",
        'apple" OR "1"="1',
        "* AND NOT OR",
        "^^^ ((( ))) ---",
        "search_text:apple",
        "'; DROP TABLE chunks; --",
        '"',
        "\\",
        "___",
        "apple\x00pear",
        "éàü 中文 ☃",
    ],
)
def test_fts_syntax_in_a_query_never_raises(stack: Services, query: str) -> None:
    for retriever in _retrievers(stack):
        # Given documents in two tenants
        # When a query full of FTS5 and SQL syntax is searched, in each mode
        hits = retriever.search(ALICE, SearchRequest(query=query))

        # Then results (or none) come back, only ones alice may read
        assert {h.chunk.document.path for h in hits} <= {"roadmap.md"}, retriever.mode
        assert all(h.chunk.document.tenant_id == "acme" for h in hits), retriever.mode
        # ...and the index is intact afterwards
        assert _paths(retriever, ALICE, APPLE) == {"roadmap.md"}, retriever.mode


WIDENING_FILTER = Filter.model_validate(
    {
        "orAll": [
            {"equals": {"key": "visibility", "value": "private"}},
            {"equals": {"key": "owner", "value": "bob"}},
            {"notEquals": {"key": "owner", "value": "alice"}},
        ]
    }
)


@pytest.mark.parametrize(
    ("tenant", "user", "filters", "expected"),
    [
        pytest.param("acme", "alice", None, {"roadmap.md"}, id="alice-sees-shared-only"),
        pytest.param("acme", "bob", None, {"roadmap.md", "salary.md"}, id="bob-sees-his-private"),
        pytest.param("acme", "Bob", None, {"roadmap.md"}, id="user-ids-are-case-sensitive"),
        pytest.param("globex", "bob", None, {"roadmap.md"}, id="other-tenant-own-docs-only"),
        pytest.param("ACME", "bob", None, set(), id="tenant-ids-are-case-sensitive"),
        pytest.param("acme", "alice", WIDENING_FILTER, set(), id="widening-filter-narrows-alice"),
        pytest.param("acme", "bob", WIDENING_FILTER, {"salary.md"}, id="widening-filter-narrows-bob"),
    ],
)
def test_ingested_documents_stay_with_their_tenant_and_private_ones_with_their_owner(
    stack: Services, tenant: str, user: str, filters: Filter | None, expected: set[str]
) -> None:
    caller = Caller(tenant_id=tenant, user_id=user)
    request = SearchRequest(query="apple", top_k=50, filters=filters)
    for retriever in _retrievers(stack):
        # Given a shared and a private document in acme and a shared one in globex, all about apples
        # When the caller searches for a word every document contains, in each mode
        hits = retriever.search(caller, request)

        # Then they see only their tenant's shared documents and their own private ones
        assert {h.chunk.document.path for h in hits} == expected, retriever.mode
        assert all(h.chunk.document.tenant_id == tenant for h in hits), retriever.mode
