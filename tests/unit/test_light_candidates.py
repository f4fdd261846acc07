"""Light candidates: a search hands back ids and scores, and a chunk is parsed only when something needs it.

The port's `ScoredChunk` holds the stored body and parses it once, on first access; the local index reads
the body in its one access-checked statement but parses it only for a filter; retrieval builds
`SearchHit`s for the hits it returns, not for every fused candidate (docs/benchmarks.md, 9e). What must
not change: the access rule in the SQL, filters, and a malformed chunk reported as SEARCH_BACKEND_ERROR.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from citewise.domain.errors import SearchBackendError
from citewise.domain.models import Caller, Chunk, Filter, SearchRequest, Visibility
from citewise.ports.index import ScoredChunk
from citewise.query.ranking import Signals
from citewise.query.relevance import relevance_scores
from citewise.query.retrieval import Retriever
from citewise_local.index import LocalIndex
from tests.contract.test_index_contract import EMBEDDER, make_chunk, put

BOB = Caller(tenant_id="acme", user_id="bob")
DOCUMENTS = 6
CHUNKS_PER_DOCUMENT = 5


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every chunk body parsed from JSON from now on (the chunk ids, in order)."""
    parsed: list[str] = []
    original = Chunk.model_validate_json

    def counting(data: str | bytes, *args: Any, **kwargs: Any) -> Chunk:
        chunk = original(data, *args, **kwargs)
        parsed.append(chunk.chunk_id)
        return chunk

    monkeypatch.setattr(Chunk, "model_validate_json", counting)
    return parsed


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LocalIndex]:
    """acme's six documents of five chunks; d0 is alice's private one, the rest are shared."""
    opened = LocalIndex(tmp_path / "index.db")
    opened.ensure(EMBEDDER.name, EMBEDDER.dimension)
    for doc in range(DOCUMENTS):
        visibility = Visibility.PRIVATE if doc == 0 else Visibility.SHARED
        team = "core" if doc % 2 else "web"
        text = "apple orchard note {doc} {i}"
        put(
            opened,
            *(
                make_chunk(
                    "acme", f"d{doc}", i, text.format(doc=doc, i=i), visibility=visibility, attributes={"team": team}
                )
                for i in range(CHUNKS_PER_DOCUMENT)
            ),
        )
    try:
        yield opened
    finally:
        opened.close()


def _corrupt(tmp_path: Path, chunk_id: str, body: str) -> None:
    """Overwrite one stored chunk body behind the index's back."""
    conn = sqlite3.connect(tmp_path / "index.db")
    try:
        conn.execute("UPDATE chunks SET body = ? WHERE chunk_id = ?", (body, chunk_id))
        conn.commit()
    finally:
        conn.close()


# --- the port type -------------------------------------------------------------------------------------


def test_a_stored_entry_parses_its_chunk_once_and_only_when_asked(parses: list[str]) -> None:
    # Given an entry made from a stored body
    chunk = make_chunk("acme", "doc", 3, "ginger tea")
    scored = ScoredChunk.stored(chunk.chunk_id, "doc", chunk.model_dump_json(), 0.75)

    # Then its ids and score are there without parsing anything
    assert (scored.chunk_id, scored.doc_id, scored.score) == (chunk.chunk_id, "doc", 0.75)
    assert parses == []
    # When the chunk is read twice / Then it was parsed once, and is the stored chunk
    assert scored.chunk == chunk
    assert scored.chunk is scored.chunk
    assert parses == [chunk.chunk_id]


def test_an_entry_made_from_a_parsed_chunk_takes_its_ids_from_it(parses: list[str]) -> None:
    chunk = make_chunk("acme", "doc", 0, "ginger tea")
    scored = ScoredChunk(chunk=chunk, score=0.5)
    assert (scored.chunk_id, scored.doc_id, scored.chunk) == (chunk.chunk_id, "doc", chunk)
    assert parses == []


def test_an_entry_cannot_be_changed() -> None:
    scored = ScoredChunk(make_chunk("acme", "doc", 0, "ginger"), 0.5)
    with pytest.raises(AttributeError):
        scored.score = 1.0  # type: ignore[misc]
    assert scored.score == 0.5


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{not json", "validation errors"),
        ('{"chunk_id": "acme-doc-00000"}', "validation errors"),
        (make_chunk("acme", "other", 0, "x").model_dump_json(), "its body is chunk 'acme-other-00000'"),
    ],
)
def test_a_malformed_body_is_a_search_backend_error_naming_the_chunk(body: str, reason: str) -> None:
    scored = ScoredChunk.stored("acme-doc-00000", "doc", body, 0.5)
    with pytest.raises(SearchBackendError) as raised:
        _ = scored.chunk
    assert raised.value.details == {"chunk_id": "acme-doc-00000", "doc_id": "doc"}
    assert reason in raised.value.message


# --- the local index -----------------------------------------------------------------------------------

Search = Callable[[LocalIndex, Caller, Filter | None, int], list[ScoredChunk]]
SEARCHES: dict[str, Search] = {
    "keyword": lambda index, caller, flt, limit: index.keyword_search(caller, "apple orchard", flt, limit),
    "vector": lambda index, caller, flt, limit: index.vector_search(
        caller, EMBEDDER.embed_query("apple orchard"), flt, limit
    ),
}


@pytest.mark.parametrize("search", SEARCHES)
def test_a_local_search_without_filters_parses_no_chunk(index: LocalIndex, parses: list[str], search: str) -> None:
    # When bob searches without a filter
    found = SEARCHES[search](index, BOB, None, 50)

    # Then he gets every chunk he may read, with ids and scores, and no body was parsed
    assert len(found) == (DOCUMENTS - 1) * CHUNKS_PER_DOCUMENT
    assert parses == []
    # And each chunk is the stored one, parsed when read
    assert all(scored.chunk.chunk_id == scored.chunk_id for scored in found)
    assert len(parses) == len(found)


@pytest.mark.parametrize("search", SEARCHES)
def test_a_local_search_with_a_filter_still_applies_it(index: LocalIndex, parses: list[str], search: str) -> None:
    core = Filter.model_validate({"equals": {"key": "team", "value": "core"}})
    found = SEARCHES[search](index, BOB, core, 50)
    assert {scored.doc_id for scored in found} == {"d1", "d3", "d5"}
    assert all(scored.chunk.document.attributes["team"] == "core" for scored in found)
    assert parses  # the filter read the chunks it tested


@pytest.mark.parametrize("search", SEARCHES)
def test_the_access_rule_is_still_checked_in_the_sql_that_reads_the_bodies(
    index: LocalIndex, monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    # Given in-memory access arrays that (wrongly) let bob read every row of acme
    monkeypatch.setattr("citewise_local.index._allowed", lambda matrix, caller, lo, hi: np.ones(hi - lo, dtype=bool))

    # When bob searches / Then alice's private document still never comes back
    found = SEARCHES[search](index, BOB, None, 50)
    assert found and "d0" not in {scored.doc_id for scored in found}
    assert "d0" in {
        scored.doc_id for scored in SEARCHES[search](index, Caller(tenant_id="acme", user_id="alice"), None, 50)
    }


def test_a_malformed_stored_chunk_is_a_search_backend_error_not_a_500(index: LocalIndex, tmp_path: Path) -> None:
    # Given a stored body that is no longer a chunk
    _corrupt(tmp_path, "acme-d1-00000", '{"chunk_id": 7}')
    retriever = Retriever(index, EMBEDDER)

    # When a search returns it / Then the retrieval fails with the backend's structured error
    with pytest.raises(SearchBackendError) as raised:
        retriever.search(BOB, SearchRequest(query="apple orchard note 1 0", top_k=50))
    assert raised.value.code == "SEARCH_BACKEND_ERROR"
    assert raised.value.details["chunk_id"] == "acme-d1-00000"


# --- retrieval -----------------------------------------------------------------------------------------


def test_retrieval_parses_only_the_chunks_it_returns(index: LocalIndex, parses: list[str]) -> None:
    # When bob asks for the top 3 of 25 readable candidates in each list
    hits = Retriever(index, EMBEDDER).search(BOB, SearchRequest(query="apple orchard note 2", top_k=3))

    # Then exactly the three chunks returned were parsed
    assert len(hits) == 3
    assert sorted(parses) == sorted(hit.chunk.chunk_id for hit in hits)


def test_ranking_signals_read_the_chunks_they_score(index: LocalIndex, parses: list[str]) -> None:
    signals = Signals(credibility_weight=0.5, credibility={"s3": 0.5})
    hits = Retriever(index, EMBEDDER, signals=signals).search(BOB, SearchRequest(query="apple orchard", top_k=3))
    assert len(hits) == 3 and all(hit.components and hit.components.credibility == 0.5 for hit in hits)
    assert len(set(parses)) == (DOCUMENTS - 1) * CHUNKS_PER_DOCUMENT  # every candidate's source was read


def test_the_relevance_score_is_the_relevance_models_estimate(index: LocalIndex) -> None:
    # Given the default fusion, whose fused score is the estimate itself (computed once, then rounded)
    retriever = Retriever(index, EMBEDDER)
    rankings = {
        "vector": index.vector_search(BOB, EMBEDDER.embed_query("apple note 4"), None, 100),
        "keyword": index.keyword_search(BOB, "apple note 4", None, 100),
    }
    relevance = relevance_scores(rankings)
    expected = {
        scored.chunk_id: relevance(
            {name: s.score for name, r in rankings.items() for s in r if s.chunk_id == scored.chunk_id}
        )
        for ranking in rankings.values()
        for scored in ranking
    }

    # When ranked / Then every hit's relevance score is the model's, rounded as the API reports it
    ranked = retriever.rank(BOB, "apple note 4", None, 100)
    assert len(ranked) == len(expected)
    assert {hit.chunk.chunk_id: hit.relevance_score for hit in ranked} == expected
