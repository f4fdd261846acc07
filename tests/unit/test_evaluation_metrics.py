"""Retrieval metrics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from citewise_local.evaluation import mrr_at_k, ndcg_at_k, recall_at_k, score_query

RANKED = ["a", "b", "c", "d"]
BINARY = {"b": 1, "d": 1, "e": 1}


def test_ndcg_with_binary_grades() -> None:
    # DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3) + 1/log2(4)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3) + 0.5
    assert ndcg_at_k(RANKED, BINARY, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(RANKED, BINARY, 10) == pytest.approx(0.498189, abs=1e-6)


def test_ndcg_with_graded_relevance_and_cut_off() -> None:
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 10) == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    # cut at 1: only "b" (gain 1) against the ideal "a" (gain 2)
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 1) == pytest.approx(0.5)
    assert ndcg_at_k(["a", "b"], {"a": 2, "b": 1}, 10) == pytest.approx(1.0)


def test_recall_and_mrr() -> None:
    assert recall_at_k(RANKED, BINARY, 10) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, BINARY, 2) == pytest.approx(1 / 3)
    assert mrr_at_k(RANKED, BINARY, 10) == pytest.approx(0.5)
    assert mrr_at_k(RANKED, BINARY, 1) == 0.0


def test_nothing_relevant_found_scores_zero_and_zero_grades_are_not_relevant() -> None:
    assert score_query(["x", "y"], {"a": 1}) == {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    assert recall_at_k(["a"], {"a": 0, "b": 1}, 10) == 0.0
    assert mrr_at_k(["a", "b"], {"a": 0, "b": 1}, 10) == 0.5
