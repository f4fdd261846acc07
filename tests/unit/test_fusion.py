"""Fusion by normalised scores (`citewise.query.fusion`), worked by hand, and the relevance model's features."""

from __future__ import annotations

import math

import pytest

from citewise.ports.index import ScoredChunk
from citewise.query.fusion import Fusion
from citewise.query.relevance import CALIBRATIONS, Calibration, estimates, evidence, relevance_scores
from tests.contract.test_index_contract import make_chunk


def _scored(name: str, score: float) -> ScoredChunk:
    return ScoredChunk(chunk=make_chunk("acme", name, 0, name), score=score)


def _fused(fusion: Fusion, keyword: list[tuple[str, float]], vector: list[tuple[str, float]]) -> dict[str, float]:
    rankings = {"keyword": [_scored(*entry) for entry in keyword], "vector": [_scored(*entry) for entry in vector]}
    return {scored.chunk.document.doc_id: score for scored, score, _ in fusion.fuse(rankings)}


KEYWORD = [("a", 12.0), ("b", 8.0), ("c", 4.0)]
VECTOR = [("b", 0.9), ("d", 0.7), ("a", 0.5)]


def test_minmax_maps_each_list_to_0_1_and_a_missing_entry_counts_0() -> None:
    # Given keyword a 12 > b 8 > c 4 (-> 1, 0.5, 0) and vector b 0.9 > d 0.7 > a 0.5 (-> 1, 0.5, 0)
    fused = _fused(Fusion("minmax"), KEYWORD, VECTOR)

    # Then each chunk is the mean of its two normalised scores, an absent one counting 0
    assert fused == pytest.approx({"b": (0.5 + 1) / 2, "a": (1 + 0) / 2, "d": (0 + 0.5) / 2, "c": 0.0})
    assert list(fused) == ["b", "a", "d", "c"]


def test_minmax_weights_scale_each_list_and_the_top_of_both_is_one() -> None:
    fused = _fused(Fusion("minmax", {"keyword": 1.0, "vector": 3.0}), KEYWORD, VECTOR)
    assert fused == pytest.approx({"b": (0.5 + 3) / 4, "a": 1 / 4, "d": 1.5 / 4, "c": 0.0})
    both_first = _fused(Fusion("minmax", {"keyword": 1.0, "vector": 3.0}), [("x", 2.0), ("y", 1.0)], [("x", 0.3)])
    assert both_first["x"] == 1.0


def test_zscore_gives_a_missing_entry_the_lists_lowest_z() -> None:
    # Given z-scores keyword a 1.2247, b 0, c -1.2247 and vector b 1.2247, d 0, a -1.2247
    z = math.sqrt(1.5)
    fused = _fused(Fusion("zscore"), KEYWORD, VECTOR)

    # Then the raw sums are b z, a 0, d -z, c -2z (a missing entry takes its list's floor -z),
    # scaled 0-1 between the lowest and the highest
    raw = {"b": z, "a": 0.0, "d": -z, "c": -2 * z}
    assert fused == pytest.approx({name: (value + 2 * z) / (3 * z) for name, value in raw.items()})


def test_relevance_fusion_scores_each_chunk_by_its_calibrated_estimate() -> None:
    # Given the hybrid model over cosine, cosine gap and BM25 ratio (a missing entry counts each list's floor:
    # the lowest cosine, BM25 0)
    calibration = CALIBRATIONS[frozenset({"keyword", "vector"})]
    best_cosine, lowest_cosine = 0.9, 0.5

    def expected(keyword: float, cosine: float) -> float:
        return calibration.probability(
            {"cosine": cosine, "cosine_gap": cosine - best_cosine, "keyword": keyword / 12.0}
        )

    # When fused by relevance
    fused = _fused(Fusion("relevance"), KEYWORD, VECTOR)

    # Then each chunk's fused score is its estimate, and the chunks come best estimate first
    assert fused == pytest.approx(
        {"a": expected(12.0, 0.5), "b": expected(8.0, 0.9), "c": expected(4.0, lowest_cosine), "d": expected(0.0, 0.7)}
    )
    assert list(fused) == sorted(fused, key=lambda name: -fused[name])
    assert list(fused)[0] == "b"  # the best cosine and two thirds of the best BM25


def test_relevance_fusion_ignores_weights_and_ranks_one_list_as_that_list_does() -> None:
    weighted = _fused(Fusion("relevance", {"keyword": 0.0, "vector": 5.0}), KEYWORD, VECTOR)
    assert weighted == _fused(Fusion("relevance"), KEYWORD, VECTOR)
    # The one-list models rise with their only evidence, so they keep that list's order
    alone = Fusion("relevance").fuse({"vector": [_scored(*e) for e in VECTOR]})
    assert [s.chunk.document.doc_id for s, _, _ in alone] == ["b", "d", "a"]
    keyword_alone = Fusion("relevance").fuse({"keyword": [_scored(*e) for e in KEYWORD]})
    assert [s.chunk.document.doc_id for s, _, _ in keyword_alone] == ["a", "b", "c"]


def test_rrf_is_unchanged_by_the_refactoring() -> None:
    # Given k = 60: rank r scores 61 / (60 + r) in each list, averaged over the two lists
    fused = _fused(Fusion("rrf", rrf_k=60), KEYWORD, VECTOR)
    assert fused == pytest.approx({"a": (1 + 61 / 63) / 2, "b": (61 / 62 + 1) / 2, "d": 61 / 62 / 2, "c": 61 / 63 / 2})


@pytest.mark.parametrize("method", ["minmax", "zscore"])
def test_equal_scores_and_single_entries_do_not_divide_by_zero(method: str) -> None:
    fused = _fused(Fusion(method), [("a", 3.0), ("b", 3.0)], [("a", 0.4)])  # type: ignore[arg-type]
    assert list(fused) == ["a", "b"] and all(0.0 <= s <= 1.0 for s in fused.values())


def test_empty_rankings_fuse_to_nothing() -> None:
    for method in ("relevance", "rrf", "minmax", "zscore"):
        assert Fusion(method).fuse({"keyword": [], "vector": []}) == []  # type: ignore[arg-type]


def test_raw_scores_of_each_list_are_kept() -> None:
    rankings = {"keyword": [_scored(*e) for e in KEYWORD], "vector": [_scored(*e) for e in VECTOR]}
    raw = {s.chunk.document.doc_id: r for s, _, r in Fusion("minmax").fuse(rankings)}
    assert raw == {
        "a": {"keyword": 12.0, "vector": 0.5},
        "b": {"keyword": 8.0, "vector": 0.9},
        "c": {"keyword": 4.0},
        "d": {"vector": 0.7},
    }


# --- relevance ------------------------------------------------------------------------------------------


def test_evidence_reads_cosine_gap_and_keyword_ratio_against_the_lists() -> None:
    rankings = {"keyword": [_scored(*e) for e in KEYWORD], "vector": [_scored(*e) for e in VECTOR]}
    features = evidence(rankings)
    # a chunk in both lists
    assert features({"keyword": 8.0, "vector": 0.9}) == pytest.approx(
        {"cosine": 0.9, "cosine_gap": 0.0, "keyword": 8 / 12}
    )
    # a chunk only BM25 found counts the vector list's lowest cosine, one only vectors found keyword 0
    assert features({"keyword": 4.0})["cosine"] == 0.5
    assert features({"vector": 0.7}) == pytest.approx({"cosine": 0.7, "cosine_gap": -0.2, "keyword": 0.0})


def test_calibration_is_a_logistic_of_its_features() -> None:
    calibration = Calibration(-2.0, {"cosine": 4.0})
    assert calibration.probability({"cosine": 0.5, "keyword": 9.0}) == 0.5  # keyword has no coefficient
    assert calibration.probability({"cosine": 1.0}) == 1 / (1 + math.exp(-2.0))


def test_a_hit_reports_its_estimate_rounded_to_four_places() -> None:
    rankings = {"keyword": [_scored(*e) for e in KEYWORD], "vector": [_scored(*e) for e in VECTOR]}
    raw = {"keyword": 8.0, "vector": 0.9}
    estimate = estimates(rankings)(raw)
    assert relevance_scores(rankings)(raw) == round(estimate, 4) != estimate


def test_every_mode_has_a_calibration_that_rises_with_evidence() -> None:
    # More cosine and more BM25 never make a hit less relevant, in each mode's fitted model
    for lists, calibration in CALIBRATIONS.items():
        assert calibration.coefficients, f"{sorted(lists)} is not fitted"
        assert all(calibration.coefficients.get(name, 0.0) >= 0 for name in ("cosine", "keyword"))
    rankings = {"keyword": [_scored(*e) for e in KEYWORD], "vector": [_scored(*e) for e in VECTOR]}
    relevance = relevance_scores(rankings)
    assert relevance({"keyword": 12.0, "vector": 0.9}) > relevance({"keyword": 4.0, "vector": 0.5})
