"""The reranking hook of the Retriever, on the local stack with a fake reranker: what it reorders, what it
keeps, and how any failure leaves the fused order with the reason.

The fake reranker scores each candidate by how often its text says a word: a stand-in for a
cross-encoder whose order is known in advance. The Bedrock adapter has its own Stubber tests
(tests/unit/test_bedrock_rerank.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from citewise.aws.bedrock_rerank import BedrockReranker
from citewise.domain.errors import ThrottledError
from citewise.domain.models import Reranking, SearchHit, SearchRequest
from citewise.domain.textutil import embedding_text
from citewise.ingest.pipeline import Outcome
from citewise.ports.reranker import Relevance, Reranker, reranked_order
from citewise.query.answering import answer_question
from citewise.query.retrieval import Retrieval, Retriever
from citewise.runtime.services import Services, build_reranker
from citewise.runtime.settings import load_settings
from tests.factories import source
from tests.unit.test_retrieval import ALICE, CHUNKS, DOCUMENTS


@dataclass
class ByWord:
    """Scores a candidate by how often its text says `word`; records what it was asked."""

    word: str
    name: str = "fake-reranker"
    asked: list[tuple[str, list[str]]] = field(default_factory=list)

    def rerank(self, query: str, documents: Sequence[str]) -> list[Relevance]:
        self.asked.append((query, list(documents)))
        return [Relevance(index, float(text.lower().count(self.word))) for index, text in enumerate(documents)]


@dataclass
class Failing:
    """A reranker whose every answer is `answer()` (which may raise)."""

    answer: Callable[[int], list[Relevance]]
    name: str = "failing-reranker"

    def rerank(self, query: str, documents: Sequence[str]) -> list[Relevance]:
        return self.answer(len(documents))


@pytest.fixture
def corpus(services: Services) -> Services:
    for path, data in DOCUMENTS.items():
        assert services.ingestor.ingest(source("acme", path, data)).outcome is Outcome.NEW
    return services


def retrieve(
    services: Services, reranker: Reranker | None = None, candidates: int = 50, **request: object
) -> Retrieval:
    # BM25 alone with k = 60: seven "field" chunks, each with its own fused score 61 / (60 + rank)
    retriever = Retriever(
        services.index,
        services.embedder,
        mode="bm25",
        fusion="rrf",
        rrf_k=60,
        reranker=reranker,
        rerank_candidates=candidates,
    )
    return retriever.retrieve(ALICE, SearchRequest.model_validate({"query": "field", "top_k": 50, **request}))


def _ids(hits: list[SearchHit]) -> list[str]:
    return [hit.chunk.chunk_id for hit in hits]


def test_the_reranker_orders_the_fused_hits_and_every_other_field_stays(corpus: Services) -> None:
    # Given the fused ranking of seven chunks, and a reranker that prefers chunks about invoices
    fused = retrieve(corpus).hits
    assert len(fused) == CHUNKS
    reranker = ByWord("invoice")
    # When the same query is retrieved with it
    retrieval = retrieve(corpus, reranker)
    # Then the hits are the same chunks in the reranker's order (ties in fused order), each keeping its
    # fused score and raw scores, with the reranker's score beside them
    texts = {
        hit.chunk.chunk_id: embedding_text(hit.chunk.document.title, hit.chunk.heading_path, hit.chunk.text)
        for hit in fused
    }
    expected = sorted(fused, key=lambda hit: -texts[hit.chunk.chunk_id].lower().count("invoice"))
    assert _ids(retrieval.hits) == _ids(expected)
    assert retrieval.hits[0].chunk.document.path == "finance/invoices.md"
    assert _ids(retrieval.hits) != _ids(fused)
    by_id = {hit.chunk.chunk_id: hit for hit in fused}
    for hit in retrieval.hits:
        assert hit.model_copy(update={"rerank_score": None}) == by_id[hit.chunk.chunk_id]
        assert hit.rerank_score == texts[hit.chunk.chunk_id].lower().count("invoice")
    # And it was asked with the query and the indexed text of each candidate, in fused order
    assert reranker.asked == [("field", [texts[chunk_id] for chunk_id in _ids(fused)])]
    assert retrieval.reranking == Reranking(reranker="fake-reranker", candidates=CHUNKS)


def test_only_the_best_candidates_are_reranked_and_the_rest_follow_as_fused(corpus: Services) -> None:
    fused = retrieve(corpus).hits
    retrieval = retrieve(corpus, ByWord("oxygen"), candidates=3)
    # The first three are the fused top three in the reranker's order; the rest are untouched
    assert sorted(_ids(retrieval.hits[:3])) == sorted(_ids(fused[:3]))
    assert retrieval.hits[3:] == fused[3:]
    assert all(hit.rerank_score is not None for hit in retrieval.hits[:3])
    assert retrieval.reranking is not None and retrieval.reranking.candidates == 3


def test_without_a_reranker_there_is_no_report_and_no_rerank_score(corpus: Services) -> None:
    retrieval = retrieve(corpus)
    assert retrieval.reranking is None
    assert all(hit.rerank_score is None for hit in retrieval.hits)


def test_min_score_applies_to_the_relevance_score_also_out_of_order(corpus: Services) -> None:
    # Given a reranker that reverses the fused order, and a threshold that keeps the fused top three
    fused = retrieve(corpus).hits
    reverse = Failing(lambda count: [Relevance(index, float(index)) for index in range(count)], name="reverse")
    threshold = fused[2].relevance_score
    kept = [hit for hit in fused if hit.relevance_score >= threshold]
    assert len(kept) >= 3 and len(kept) < len(fused)  # the threshold leaves some out
    # When retrieved with both
    hits = retrieve(corpus, reverse, min_score=threshold).hits
    # Then the hits are those above it, in the reranker's order, though the first reranked ones rank last
    assert _ids(hits) == _ids(kept)[::-1]


def test_the_reranker_order_reaches_the_answer(corpus: Services) -> None:
    retriever = Retriever(corpus.index, corpus.embedder, mode="bm25", reranker=ByWord("invoice"))
    answer = answer_question(retriever, corpus.synthesizer, ALICE, SearchRequest(query="field", top_k=1))
    assert answer.sources[0].chunk.document.path == "finance/invoices.md"
    assert answer.reranking == Reranking(reranker="fake-reranker", candidates=CHUNKS)


def _raise(error: Exception) -> Callable[[int], list[Relevance]]:
    def answer(_: int) -> list[Relevance]:
        raise error

    return answer


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_raise(ThrottledError("bedrock:Rerank was throttled")), "THROTTLED: bedrock:Rerank was throttled"),
        (
            _raise(ThrottledError("x", details={"aws_error": "ThrottlingException", "action": "bedrock:Rerank"})),
            "THROTTLED (ThrottlingException)",
        ),
        (_raise(RuntimeError("a bug")), "RuntimeError"),
        (
            lambda count: [Relevance(0, 1.0)] * count,
            "unusable answer: the reranker scored positions [0, 0, 0, 0, 0, 0, 0]",
        ),
        (lambda count: [Relevance(index, 1.0) for index in range(count - 1)], "unusable answer"),
        (lambda count: [Relevance(index + 1, 1.0) for index in range(count)], "unusable answer"),
    ],
)
def test_any_failure_keeps_the_fused_order_and_says_why(
    corpus: Services,
    caplog: pytest.LogCaptureFixture,
    answer: Callable[[int], list[Relevance]],
    reason: str,
) -> None:
    # Given the fused ranking, and a reranker that fails in some way
    fused = retrieve(corpus).hits
    # When retrieved with it
    with caplog.at_level(logging.WARNING, logger="citewise.query.retrieval"):
        retrieval = retrieve(corpus, Failing(answer))
    # Then the hits are exactly the fused ones, and the report and a warning say why (without any text)
    assert retrieval.hits == fused
    assert retrieval.reranking is not None and retrieval.reranking.fallback is not None
    assert retrieval.reranking.fallback.startswith(reason)
    (record,) = [r for r in caplog.records if r.message == "reranking failed, the fused order is kept"]
    assert record.reason == retrieval.reranking.fallback  # type: ignore[attr-defined]
    assert record.reranker == "failing-reranker"  # type: ignore[attr-defined]
    assert "field" not in record.getMessage() and "Chlorophyll" not in str(record.__dict__)


def test_reranked_order_refuses_an_order_that_loses_or_repeats_a_candidate() -> None:
    assert reranked_order([Relevance(1, 0.5), Relevance(0, 0.5), Relevance(2, 0.9)], 3) == [
        Relevance(2, 0.9),
        Relevance(0, 0.5),
        Relevance(1, 0.5),
    ]
    with pytest.raises(ValueError, match=r"positions \[0, 1\] of 3"):
        reranked_order([Relevance(0, 0.5), Relevance(1, 0.4)], 3)


# --- settings and wiring ---------------------------------------------------------------------------


def test_reranking_is_off_unless_configured() -> None:
    settings = load_settings()
    assert settings.reranker == "none"
    assert build_reranker(settings) is None


def test_the_bedrock_reranker_is_wired_from_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CITEWISE_RERANKER", "bedrock")
    monkeypatch.setenv("CITEWISE_RERANK_MODEL_ID", "cohere.rerank-v3-5:0")
    monkeypatch.setenv("CITEWISE_RERANK_CANDIDATES", "20")
    monkeypatch.setenv("CITEWISE_AWS_REGION", "us-east-1")
    settings = load_settings(home=tmp_path, embedder="hashing")
    reranker = build_reranker(settings)
    assert isinstance(reranker, BedrockReranker) and reranker.name == "cohere.rerank-v3-5:0"
    assert reranker._region == "us-east-1" and reranker._read_timeout == 5
    services = Services(settings)
    assert isinstance(services.retriever.reranker, BedrockReranker) and services.retriever.rerank_candidates == 20
    services.close()
    # A region of its own wins over the function's
    separate = build_reranker(load_settings(home=tmp_path, reranker="bedrock", rerank_region="us-west-2"))
    assert isinstance(separate, BedrockReranker) and separate._region == "us-west-2"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RERANKER", "cohere"),
        ("RERANK_MODEL_ID", "rerank v1"),
        ("RERANK_CANDIDATES", "0"),
        ("RERANK_CANDIDATES", "1001"),
        ("RERANK_TIMEOUT", "0"),
    ],
)
def test_bad_reranking_settings_name_their_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(f"CITEWISE_{name}", value)
    with pytest.raises(Exception, match=f"CITEWISE_{name}"):
        load_settings()
