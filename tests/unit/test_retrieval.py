"""Hybrid retrieval: reciprocal rank fusion by hand, and the Retriever's limits and modes on a real stack."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from citewise.domain.models import Caller, Chunk, DocumentMetadata, SearchHit, SearchRequest
from citewise.ingest.pipeline import Outcome
from citewise.ports.index import ScoredChunk
from citewise.query.fusion import Fused, Fusion
from citewise.query.relevance import CALIBRATIONS
from citewise.query.retrieval import Retriever, much_weaker
from citewise.runtime.services import Services
from tests.factories import source

K = 60
EQUAL_WEIGHTS = {"keyword": 1.0, "vector": 1.0}
MODES = ("hybrid", "bm25", "vector")
ALICE = Caller(tenant_id="acme", user_id="alice")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _rrf(rankings: dict[str, list[ScoredChunk]], weights: dict[str, float]) -> Fused:
    return Fusion("rrf", weights, K).fuse(rankings)


def _scored(chunk_id: str, score: float) -> ScoredChunk:
    document = DocumentMetadata(
        tenant_id="acme",
        doc_id=f"doc-{chunk_id}",
        owner="alice",
        source="wiki",
        path=f"{chunk_id}.md",
        title=chunk_id,
        created_at=NOW,
        updated_at=NOW,
    )
    chunk = Chunk(chunk_id=chunk_id, ordinal=0, text=chunk_id, start=0, end=1, content_hash=chunk_id, document=document)
    return ScoredChunk(chunk=chunk, score=score)


def _fused(
    rankings: dict[str, list[ScoredChunk]], weights: dict[str, float] = EQUAL_WEIGHTS
) -> dict[str, tuple[float, dict[str, float]]]:
    return {scored.chunk.chunk_id: (score, raw) for scored, score, raw in _rrf(rankings, weights)}


# --- reciprocal rank fusion -----------------------------------------------------------------------


def test_rrf_first_in_both_lists_scores_one() -> None:
    # Given chunk a ranked first by both BM25 and vector search
    rankings = {"keyword": [_scored("a", 7.5)], "vector": [_scored("a", 0.9)]}

    # When fused
    fused = _fused(rankings)

    # Then a scores (1/61 + 1/61) / (2/61) = 1.0 and keeps both raw scores
    assert fused == {"a": (1.0, {"keyword": 7.5, "vector": 0.9})}


def test_rrf_first_in_one_list_only_scores_half() -> None:
    # Given a first by BM25 only and b first by vector only
    rankings = {"keyword": [_scored("a", 3.0)], "vector": [_scored("b", 0.8)]}

    # When fused
    result = _rrf(rankings, EQUAL_WEIGHTS)

    # Then each scores (1/61) / (2/61) = 0.5, ties keep first appearance, raw scores name their list
    assert [(s.chunk.chunk_id, score, raw) for s, score, raw in result] == [
        ("a", 0.5, {"keyword": 3.0}),
        ("b", 0.5, {"vector": 0.8}),
    ]


def test_rrf_second_in_both_lists() -> None:
    # Given a first and b second in both lists
    rankings = {
        "keyword": [_scored("a", 9.0), _scored("b", 4.0)],
        "vector": [_scored("a", 0.9), _scored("b", 0.5)],
    }

    # When fused
    fused = _fused(rankings)

    # Then b scores (2/62) / (2/61) = 61/62
    assert fused["a"][0] == pytest.approx(1.0)
    assert fused["b"][0] == pytest.approx((2 / 62) / (2 / 61))
    assert fused["b"][0] == pytest.approx(61 / 62)


def test_rrf_mixed_ranks_and_order() -> None:
    # Given a: 1st and 3rd, b: 2nd and 1st, c: 3rd in BM25 only, d: 2nd in vector only
    rankings = {
        "keyword": [_scored("a", 3.0), _scored("b", 2.0), _scored("c", 1.0)],
        "vector": [_scored("b", 0.9), _scored("d", 0.8), _scored("a", 0.7)],
    }

    # When fused
    result = _rrf(rankings, EQUAL_WEIGHTS)

    # Then each score is sum(1/(60+rank)) / (2/61), best first, each chunk once
    expected = {
        "a": (1 / 61 + 1 / 63) * 61 / 2,
        "b": (1 / 62 + 1 / 61) * 61 / 2,
        "c": (1 / 63) * 61 / 2,
        "d": (1 / 62) * 61 / 2,
    }
    assert [s.chunk.chunk_id for s, _, _ in result] == ["b", "a", "d", "c"]
    assert {s.chunk.chunk_id: score for s, score, _ in result} == pytest.approx(expected)


def test_rrf_single_list_scales_rank_one_to_one() -> None:
    # Given only a BM25 ranking (the bm25 mode) of three chunks
    rankings = {"keyword": [_scored("a", 5.0), _scored("b", 4.0), _scored("c", 3.0)]}

    # When fused
    result = _rrf(rankings, EQUAL_WEIGHTS)

    # Then rank r scores (1/(60+r)) / (1/61)
    assert [score for _, score, _ in result] == pytest.approx([1.0, 61 / 62, 61 / 63])


def test_rrf_weights_scale_each_list() -> None:
    # Given BM25 weighted twice as much as vectors, a first in BM25 only, b first in vectors only
    rankings = {"keyword": [_scored("a", 1.0)], "vector": [_scored("b", 1.0)]}

    # When fused
    fused = _fused(rankings, {"keyword": 2.0, "vector": 1.0})

    # Then a scores (2/61) / (3/61) = 2/3 and b (1/61) / (3/61) = 1/3
    assert fused["a"][0] == pytest.approx(2 / 3)
    assert fused["b"][0] == pytest.approx(1 / 3)


def test_rrf_of_empty_rankings_is_empty() -> None:
    # Given rankings with nothing in them / When fused / Then nothing comes out
    assert _rrf({"keyword": [], "vector": []}, EQUAL_WEIGHTS) == []


# --- the Retriever on the local stack -------------------------------------------------------------

DOCUMENTS = {
    "biology/photosynthesis.md": b"""# Photosynthesis

Chlorophyll in plant leaves absorbs sunlight and turns it into chemical energy. This field note covers
the basics.

## Light reactions

Thylakoid membranes split water and release oxygen. Field measurements of oxygen output vary with light.

## Calvin cycle

Rubisco fixes carbon dioxide into sugar in the stroma. The field of plant biochemistry studies this cycle.
""",
    "geology/volcanoes.md": b"""# Volcanoes

Magma rises through the crust and erupts as lava. This field guide covers volcano types.

## Eruptions

Explosive eruptions throw ash and pumice; effusive eruptions pour basalt lava. Field geologists sample
tephra.
""",
    "finance/invoices.md": b"""# Invoices

An invoice lists amounts owed, payment terms and tax. Every invoice field must be filled in.

## Late payment

Overdue invoices accrue interest after thirty days. The accounts field team chases reminders.
""",
}
CHUNKS = 7  # 3 + 2 + 2 sections; every one of them says "field"


@pytest.fixture
def corpus(services: Services) -> Services:
    for path, data in DOCUMENTS.items():
        result = services.ingestor.ingest(source("acme", path, data))
        assert result.outcome is Outcome.NEW
    assert sum(d.chunk_count for d in services.registry.list("acme").items) == CHUNKS
    return services


def _retriever(services: Services, mode: str) -> Retriever:
    # RRF with k = 60 (not the tuned default fusion) so the expected scores below are the classic 61 / (60 + r)
    return Retriever(services.index, services.embedder, mode=mode, fusion="rrf", rrf_k=60)  # type: ignore[arg-type]


def _search(services: Services, mode: str, **request: object) -> list[SearchHit]:
    return _retriever(services, mode).search(ALICE, SearchRequest.model_validate(request))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("chlorophyll sunlight leaves", "biology/photosynthesis.md"),
        ("magma lava eruption", "geology/volcanoes.md"),
        ("overdue invoice interest", "finance/invoices.md"),
    ],
)
def test_each_mode_ranks_the_obviously_relevant_document_first(
    corpus: Services, mode: str, query: str, expected: str
) -> None:
    # Given three documents on unrelated subjects
    # When a distinctive query is searched in each mode
    hits = _search(corpus, mode, query=query)

    # Then the document about it comes first, with the best possible fused score
    assert hits[0].chunk.document.path == expected
    assert hits[0].score == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("top_k", [1, 2, 5, 7, 50])
def test_top_k_bounds_the_hits(corpus: Services, mode: str, top_k: int) -> None:
    # Given seven chunks that all contain the word "field"
    # When searched for it with top_k
    hits = _search(corpus, mode, query="field", top_k=top_k)

    # Then exactly min(top_k, 7) hits come back, best first
    assert len(hits) == min(top_k, CHUNKS)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_fills_the_raw_scores_of_its_lists(corpus: Services, mode: str) -> None:
    # Given the corpus / When searched in one mode
    hits = _search(corpus, mode, query="field", top_k=50)

    # Then each hit carries the raw score of exactly the lists that mode ran
    assert all((h.keyword_score is not None) == (mode in ("hybrid", "bm25")) for h in hits)
    assert all((h.vector_score is not None) == (mode in ("hybrid", "vector")) for h in hits)


def test_bm25_scores_are_reciprocal_ranks_scaled_to_one(corpus: Services) -> None:
    # Given seven chunks matching "field" / When ranked by BM25 alone
    hits = _search(corpus, "bm25", query="field", top_k=50)

    # Then rank r scores 61 / (60 + r), rounded to six places
    assert [h.score for h in hits] == [round(61 / (60 + rank), 6) for rank in range(1, CHUNKS + 1)]


# `min_score` used to cut the fused rank score (so 0.975 kept "ranks 1-2" whatever they held); it now
# applies to the calibrated `relevance_score`, which does not follow rank, so these tests say so.


@pytest.mark.parametrize("mode", MODES)
def test_every_hit_carries_a_relevance_score_in_0_1(corpus: Services, mode: str) -> None:
    hits = _search(corpus, mode, query="magma lava eruption field", top_k=50)
    assert len(hits) == CHUNKS and all(0.0 <= h.relevance_score <= 1.0 for h in hits)
    assert len({h.relevance_score for h in hits}) > 1


@pytest.mark.parametrize("mode", MODES)
def test_min_score_keeps_exactly_the_hits_whose_relevance_reaches_it(corpus: Services, mode: str) -> None:
    # Given the full ranking of a query, and a threshold between its 2nd and 3rd distinct relevance scores
    baseline = _search(corpus, mode, query="magma lava eruption field", top_k=50)
    distinct = sorted({h.relevance_score for h in baseline}, reverse=True)
    assert len(distinct) >= 3
    threshold = (distinct[1] + distinct[2]) / 2

    # When searched with that minimum score
    hits = _search(corpus, mode, query="magma lava eruption field", top_k=50, min_score=threshold)

    # Then the hits are the baseline's hits at or above it, still in ranked order
    assert hits == [h for h in baseline if h.relevance_score >= threshold]
    assert 2 <= len(hits) < len(baseline)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("max_sources", [1, 2, 3])
def test_max_sources_keeps_the_best_documents_only(corpus: Services, mode: str, max_sources: int) -> None:
    # Given the full ranking of seven "field" chunks from three documents
    baseline = _search(corpus, mode, query="field", top_k=50)
    best_documents: list[str] = []
    for hit in baseline:
        if hit.chunk.document.doc_id not in best_documents:
            best_documents.append(hit.chunk.document.doc_id)
    kept = set(best_documents[:max_sources])

    # When searched with max_sources
    hits = _search(corpus, mode, query="field", top_k=10, max_sources=max_sources)

    # Then the hits are the baseline's chunks from the first max_sources documents, in order
    assert {h.chunk.document.doc_id for h in hits} == kept
    assert hits == [h for h in baseline if h.chunk.document.doc_id in kept]


def test_max_sources_and_top_k_combine(corpus: Services) -> None:
    # Given a query every chunk matches
    # When searched with top_k=2 and max_sources=3
    hits = _search(corpus, "hybrid", query="field", top_k=2, max_sources=3)

    # Then top_k still bounds the hits
    assert len(hits) == 2


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_tenant_finds_nothing(corpus: Services, mode: str) -> None:
    # Given documents only in tenant acme
    # When a caller of a tenant with no documents searches for words acme's documents contain
    hits = _retriever(corpus, mode).search(
        Caller(tenant_id="empty-tenant", user_id="alice"), SearchRequest(query="field chlorophyll magma")
    )

    # Then nothing comes back
    assert hits == []


@pytest.mark.parametrize("mode", MODES)
def test_an_unmatched_query_finds_nothing_by_keyword(corpus: Services, mode: str) -> None:
    # Given the corpus / When a query shares no word with any document
    hits = _search(corpus, mode, query="zeppelin quasar")

    # Then BM25 finds nothing; the vector list, which ranks every readable chunk, still returns top_k
    assert len(hits) == (0 if mode == "bm25" else 5)


@pytest.mark.parametrize(
    ("text", "query"),
    [
        pytest.param("Le café est ouvert le dimanche.", "café", id="french-accent"),
        pytest.param("Die Straße ist gesperrt.", "Straße", id="german-eszett"),
        pytest.param("Η Αθήνα είναι η πρωτεύουσα.", "Αθήνα", id="greek"),
        pytest.param("Ο φίλος μου ζει στην Αθήνα.", "φίλος", id="greek-final-sigma"),
        pytest.param("Ο ΚΟΣΜΟΣ ΕΙΝΑΙ ΜΕΓΑΛΟΣ.", "κόσμος ΚΟΣΜΟΣ", id="greek-final-sigma-upper"),
    ],
)
def test_bm25_finds_a_document_by_a_word_it_contains_in_any_script(services: Services, text: str, query: str) -> None:
    # Given a document whose text contains the query word exactly
    assert services.ingestor.ingest(source("acme", "note.txt", text.encode())).outcome is Outcome.NEW

    # When that word is searched by BM25 alone
    hits = _search(services, "bm25", query=query)

    # Then the document is found
    assert [h.chunk.document.path for h in hits] == ["note.txt"]


# --- issue 26: when a routed result is much weaker than the unrouted one ----------------------------------


def test_a_routed_hit_on_the_topic_but_below_the_best_is_not_much_weaker() -> None:
    # Given the hybrid calibration: the best hit overall (its lists' best cosine 0.6 and best BM25) and a
    # routed hit on the same topic, 0.1 lower in cosine with half the BM25 score (a newer ticket about it)
    hybrid = CALIBRATIONS[frozenset({"keyword", "vector"})]
    best = hybrid.probability({"cosine": 0.6, "cosine_gap": 0.0, "keyword": 1.0})
    on_topic = hybrid.probability({"cosine": 0.5, "cosine_gap": -0.1, "keyword": 0.5})
    # And one off the topic: far in meaning, few of the words
    off_topic = hybrid.probability({"cosine": 0.2, "cosine_gap": -0.4, "keyword": 0.1})
    # Then only the second makes the routed result much weaker
    assert not much_weaker(on_topic, best)
    assert much_weaker(off_topic, best)


@pytest.mark.parametrize(
    ("routed", "unrouted", "weaker"),
    [(0.0099, 0.1, True), (0.0099, 0.099, False), (0.01, 1.0, False), (0.0, 0.0, False), (0.0, 0.001, True)],
)
def test_much_weaker_needs_both_the_floor_and_the_ratio(routed: float, unrouted: float, weaker: bool) -> None:
    assert much_weaker(routed, unrouted) is weaker
