"""Fusion, depth, query feedback and relevance calibration, tuned on one part of a BEIR dataset and
confirmed on the rest: the procedure behind the defaults in docs/evaluation.md.

Usage: python -m benchmarks.fusion_tuning [--dataset ../shared/datasets/scifact-train] [--home DIR] [--json PATH]

1. The corpus is ingested as `citewise eval` does (same index folder under `--home`, reused: run
   `citewise eval` once with the same CITEWISE_HOME and nothing is embedded again).
2. The judged queries are split by a fixed seed (`SEED`) into a tuning part (`TUNING_SHARE`) and a
   held-out part. Every query's BM25 and vector lists are read once, `MAX_DEPTH` deep, through the
   index port (as `Retriever.rank` reads them); every fusion setting is then replayed from them with
   the library's own `Fusion`, so a setting here ranks exactly as `CITEWISE_FUSION_METHOD` etc. would.
3. Every setting of the grid is scored on the tuning part; the best nDCG@10 is chosen (at the shallowest
   depth within `DEPTH_TOLERANCE` of it: depth costs latency). Only then are
   the chosen setting and the baselines (BM25 alone, vectors alone, plain RRF k = 60 of the same
   lists) scored on the held-out part, with a paired bootstrap interval of the differences.
4. Pseudo-relevance feedback (Rocchio: the query vector moved toward the mean of its top documents'
   vectors) is tried on the tuning part the same way.
5. The relevance calibration (`citewise.query.relevance`) is fitted by logistic regression on the
   tuning part's top 10 documents per query, and what thresholds keep is measured on the held-out part.

It prints Markdown tables (stdout) and writes everything as JSON (`--json`).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import random
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from citewise.domain.textutil import word_prefix
from citewise.ports.index import ScoredChunk
from citewise.query.fusion import Fusion, FusionMethod
from citewise.query.relevance import FEATURES, evidence
from citewise.query.retrieval import MAX_KEYWORD_CHARS
from citewise.runtime.services import Services
from citewise.runtime.settings import Settings
from citewise_local import evaluation

SEED = 16
TUNING_SHARE = 0.6
MAX_DEPTH = 200
DEPTHS = (50, 100, 200)
RRF_KS = (2, 5, 10, 20, 60)
RRF_VECTOR_WEIGHTS = (0.75, 1.0, 1.5)
SCORE_VECTOR_WEIGHTS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
DEPTH_TOLERANCE = 0.002
"""A deeper list must beat the best shallower one by more than this (nDCG@10 on tuning) to be chosen: each
step of depth costs query latency (docs/evaluation.md), and smaller gains are within the tuning noise."""
ROCCHIO = ((3, 0.5), (5, 1.0))
"""(top documents, weight of their mean) pairs tried for pseudo-relevance feedback."""
CALIBRATION_DEPTH = 10
THRESHOLDS = (0.3, 0.5, 0.7, 0.9)
FEATURE_SETS: dict[frozenset[str], list[tuple[str, ...]]] = {
    frozenset({"keyword", "vector"}): [("cosine", "keyword"), ("cosine", "cosine_gap", "keyword")],
    frozenset({"keyword"}): [("keyword",)],
    frozenset({"vector"}): [("cosine",), ("cosine", "cosine_gap")],
}


@dataclass(frozen=True)
class Setting:
    """One point of the grid."""

    method: FusionMethod
    depth: int
    vector_weight: float = 1.0
    rrf_k: int = 60
    per_document: bool = False

    def label(self) -> str:
        if self.method == "relevance":
            return f"relevance depth={self.depth}{' per-document' if self.per_document else ''}"
        k = f" k={self.rrf_k}" if self.method == "rrf" else ""
        each = " per-document" if self.per_document else ""
        return f"{self.method}{k} vector_weight={self.vector_weight} depth={self.depth}{each}"

    def fusion(self) -> Fusion:
        return Fusion(self.method, {"keyword": 1.0, "vector": self.vector_weight}, self.rrf_k)


@dataclass
class Lists:
    """One query's two ranked lists (`MAX_DEPTH` deep) and its judgements."""

    keyword: list[ScoredChunk]
    vector: list[ScoredChunk]
    query_vector: list[float]
    grades: dict[str, int]


Ranked = list[tuple[ScoredChunk, float, dict[str, float]]]


def collect(services: Services, dataset: evaluation.Dataset, log: Callable[[str], None]) -> dict[str, Lists]:
    """Every judged query's lists, read once."""
    lists = {}
    for number, query_id in enumerate(q for q in dataset.queries if q in dataset.qrels):
        if number % 100 == 0:
            log(f"  {number} queries read")
        text = dataset.queries[query_id]
        vector = services.embedder.embed_query(text)
        lists[query_id] = Lists(
            keyword=services.index.keyword_search(
                evaluation.CALLER, word_prefix(text, MAX_KEYWORD_CHARS), None, MAX_DEPTH
            ),
            vector=services.index.vector_search(evaluation.CALLER, vector, None, MAX_DEPTH),
            query_vector=list(vector),
            grades=dataset.qrels[query_id],
        )
    return lists


def split(query_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """(tuning, held-out): the sorted ids shuffled by `SEED`, the first `TUNING_SHARE` for tuning."""
    shuffled = sorted(query_ids)
    random.Random(SEED).shuffle(shuffled)  # noqa: S311 - a reproducible split, not security
    cut = round(len(shuffled) * TUNING_SHARE)
    return sorted(shuffled[:cut]), sorted(shuffled[cut:])


def corpus_id(scored: ScoredChunk) -> str:
    return evaluation.corpus_id_of(scored.chunk.document.path)


def documents(fused: Ranked) -> list[str]:
    """Corpus ids in order of their best chunk."""
    return list(dict.fromkeys(corpus_id(scored) for scored, _, _ in fused))


def rankings(lists: Lists, setting: Setting, mode: str = "hybrid") -> dict[str, list[ScoredChunk]]:
    """The lists a mode fuses, cut to the setting's depth (each document's best chunk only, if asked)."""
    named = {"keyword": lists.keyword[: setting.depth], "vector": lists.vector[: setting.depth]}
    if setting.per_document:
        named = {name: best_chunks(ranking) for name, ranking in named.items()}
    if mode == "hybrid":
        return named
    name = "keyword" if mode == "bm25" else "vector"
    return {name: named[name]}


def best_chunks(ranking: list[ScoredChunk]) -> list[ScoredChunk]:
    """Each document once, by its best chunk (max over chunks before fusion rather than after)."""
    seen: set[str] = set()
    kept = []
    for scored in ranking:
        if scored.chunk.document.doc_id not in seen:
            seen.add(scored.chunk.document.doc_id)
            kept.append(scored)
    return kept


def per_query(
    lists: Mapping[str, Lists], ids: Sequence[str], setting: Setting, mode: str = "hybrid"
) -> dict[str, dict[str, float]]:
    """Each query's four metrics under this setting and mode."""
    fusion = setting.fusion()
    return {
        q: evaluation.score_query(documents(fusion.fuse(rankings(lists[q], setting, mode))), lists[q].grades)
        for q in ids
    }


def mean(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    first = next(iter(scores.values()))
    return {name: round(statistics.fmean(s[name] for s in scores.values()), 4) for name in first}


def bootstrap(a: Mapping[str, Mapping[str, float]], b: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Paired bootstrap of mean nDCG@10 difference a - b: the difference and its 95% interval."""
    diffs = np.array([a[q]["ndcg@10"] - b[q]["ndcg@10"] for q in a])
    rng = np.random.default_rng(SEED)
    means = diffs[rng.integers(0, len(diffs), size=(2000, len(diffs)))].mean(axis=1)
    return {
        "better": int((diffs > 0).sum()),
        "worse": int((diffs < 0).sum()),
        "difference": round(float(diffs.mean()), 4),
        "low": round(float(np.percentile(means, 2.5)), 4),
        "high": round(float(np.percentile(means, 97.5)), 4),
    }


def grid() -> list[Setting]:
    settings = [Setting("relevance", depth) for depth in DEPTHS]
    settings += [Setting("rrf", depth, weight, k) for depth in DEPTHS for k in RRF_KS for weight in RRF_VECTOR_WEIGHTS]
    settings += [
        Setting(method, depth, weight)
        for method in ("minmax", "zscore")
        for depth in DEPTHS
        for weight in SCORE_VECTOR_WEIGHTS
    ]
    return settings


def choose(settings: Sequence[Setting], ndcg: Sequence[float]) -> Setting:
    """The best setting on tuning, at the shallowest depth whose best is within `DEPTH_TOLERANCE` of it."""
    best = max(ndcg)
    for depth in sorted({setting.depth for setting in settings}):
        at_depth = [i for i, setting in enumerate(settings) if setting.depth == depth]
        winner = max(at_depth, key=lambda i: ndcg[i])
        if ndcg[winner] >= best - DEPTH_TOLERANCE:
            return settings[winner]
    raise AssertionError("the best setting has a depth")


def rocchio(
    services: Services, lists: Mapping[str, Lists], ids: Sequence[str], top: int, beta: float
) -> dict[str, Lists]:
    """The lists with the vector list re-read for q' = q + beta * mean(top vector hits' vectors), normalised."""
    moved = {}
    for q in ids:
        found = lists[q].vector[:top]
        stored = services.index.vectors_by_hash(evaluation.EVAL_TENANT, [s.chunk.content_hash for s in found])
        matrix: NDArray[np.float32] = np.array([stored[s.chunk.content_hash] for s in found], dtype=np.float32)
        query = np.asarray(lists[q].query_vector, dtype=np.float32) + beta * matrix.mean(axis=0)
        query /= np.linalg.norm(query)
        vector = services.index.vector_search(evaluation.CALLER, query.tolist(), None, MAX_DEPTH)
        moved[q] = Lists(lists[q].keyword, vector, query.tolist(), lists[q].grades)
    return moved


# --- calibration -------------------------------------------------------------------------------------


def examples(
    lists: Mapping[str, Lists], ids: Sequence[str], setting: Setting, mode: str
) -> tuple[list[dict[str, float]], list[int]]:
    """Features and labels (relevant or not) of each query's top `CALIBRATION_DEPTH` documents' best chunks."""
    rows, labels = [], []
    fusion = setting.fusion()
    for q in ids:
        named = rankings(lists[q], setting, mode)
        features = evidence(named)
        seen: set[str] = set()
        for scored, _, raw in fusion.fuse(named):
            doc = corpus_id(scored)
            if doc in seen:
                continue
            seen.add(doc)
            rows.append(features(raw))
            labels.append(1 if lists[q].grades.get(doc, 0) > 0 else 0)
            if len(seen) == CALIBRATION_DEPTH:
                break
    return rows, labels


def fit_logistic(x: NDArray[np.float64], y: NDArray[np.float64], ridge: float = 1e-3) -> NDArray[np.float64]:
    """Intercept and coefficients by Newton's method (a light ridge keeps it finite on separable data)."""
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-design @ beta))
        gradient = design.T @ (p - y) + ridge * beta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + ridge * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def predict(beta: NDArray[np.float64], x: NDArray[np.float64]) -> NDArray[np.float64]:
    result: NDArray[np.float64] = 1 / (1 + np.exp(-(beta[0] + x @ beta[1:])))
    return result


def log_loss(p: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    clipped = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-(y * np.log(clipped) + (1 - y) * np.log(1 - clipped)).mean())


def matrix(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> NDArray[np.float64]:
    return np.array([[row[name] for name in names] for row in rows], dtype=np.float64)


def calibrate(
    lists: Mapping[str, Lists], tuning: Sequence[str], held_out: Sequence[str], setting: Setting
) -> dict[str, Any]:
    """Per mode: each feature set fitted on tuning, the lowest tuning log loss chosen, then measured held out."""
    report: dict[str, Any] = {}
    for mode, lists_named in (
        ("hybrid", frozenset({"keyword", "vector"})),
        ("bm25", frozenset({"keyword"})),
        ("vector", frozenset({"vector"})),
    ):
        train_rows, train_labels = examples(lists, tuning, setting, mode)
        test_rows, test_labels = examples(lists, held_out, setting, mode)
        y_train, y_test = np.array(train_labels, float), np.array(test_labels, float)
        tried = []
        for names in FEATURE_SETS[lists_named]:
            beta = fit_logistic(matrix(train_rows, names), y_train)
            tried.append(
                {
                    "features": list(names),
                    "tuning_log_loss": round(log_loss(predict(beta, matrix(train_rows, names)), y_train), 4),
                    "held_out_log_loss": round(log_loss(predict(beta, matrix(test_rows, names)), y_test), 4),
                    "intercept": round(float(beta[0]), 4),
                    "coefficients": {n: round(float(b), 4) for n, b in zip(names, beta[1:], strict=True)},
                }
            )
        chosen = min(tried, key=lambda entry: entry["tuning_log_loss"])
        beta = np.array([chosen["intercept"], *chosen["coefficients"].values()])
        p = predict(beta, matrix(test_rows, chosen["features"]))
        report[mode] = {
            "tried": tried,
            "chosen": chosen,
            "held_out": thresholds(p, y_test, len(held_out)),
            "reliability": reliability(p, y_test),
        }
    return report


def thresholds(p: NDArray[np.float64], y: NDArray[np.float64], queries: int) -> list[dict[str, float]]:
    """For each threshold: hits kept per query, precision of what is kept, share of relevant hits kept."""
    rows = []
    for threshold in THRESHOLDS:
        kept = p >= threshold
        rows.append(
            {
                "threshold": threshold,
                "kept_per_query": round(float(kept.sum()) / queries, 2),
                "precision": round(float(y[kept].mean()), 3) if kept.any() else float("nan"),
                "relevant_kept": round(float(y[kept].sum() / y.sum()), 3),
            }
        )
    return rows


def reliability(p: NDArray[np.float64], y: NDArray[np.float64]) -> list[dict[str, float]]:
    """Mean predicted against observed relevance in bins of predicted probability."""
    edges = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0001)
    rows = []
    for low, high in itertools.pairwise(edges):
        inside = (p >= low) & (p < high)
        if inside.any():
            rows.append(
                {
                    "bin": f"{low:.1f}-{min(high, 1.0):.1f}",
                    "hits": int(inside.sum()),
                    "predicted": round(float(p[inside].mean()), 3),
                    "observed": round(float(y[inside].mean()), 3),
                }
            )
    return rows


# --- the run --------------------------------------------------------------------------------------


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def run(dataset_path: Path, settings: Settings, log: Callable[[str], None]) -> dict[str, Any]:
    """Everything above on the dataset, with the index `citewise eval` keeps for these settings."""
    dataset = evaluation.load_beir(dataset_path)
    with evaluation.indexed(dataset, settings, log) as services:
        log("reading lists")
        lists = collect(services, dataset, log)
        tuning, held_out = split(list(lists))
        log(f"{len(tuning)} tuning and {len(held_out)} held-out queries; sweeping {len(grid())} settings")
        swept = [{"setting": s.label(), **mean(per_query(lists, tuning, s))} for s in grid()]
        chosen = choose(grid(), [entry["ndcg@10"] for entry in swept])
        log(f"chosen on tuning: {chosen.label()}; trying query feedback")
        feedback = []
        for top, beta in ROCCHIO:
            moved = rocchio(services, lists, tuning, top, beta)
            feedback.append(
                {
                    "setting": f"rocchio top={top} beta={beta}",
                    "vector_ndcg@10": mean(per_query(moved, tuning, chosen, "vector"))["ndcg@10"],
                    "hybrid_ndcg@10": mean(per_query(moved, tuning, chosen))["ndcg@10"],
                }
            )
        feedback.insert(
            0,
            {
                "setting": "no feedback",
                "vector_ndcg@10": mean(per_query(lists, tuning, chosen, "vector"))["ndcg@10"],
                "hybrid_ndcg@10": mean(per_query(lists, tuning, chosen))["ndcg@10"],
            },
        )
        per_document = dataclasses.replace(chosen, per_document=True)
        chunks_or_documents = [
            {"setting": s.label(), **mean(per_query(lists, ids, s))}
            for ids in (tuning, held_out)
            for s in (chosen, per_document)
        ]
        rrf60 = Setting("rrf", chosen.depth, 1.0, 60)
        runs = {
            "hybrid (chosen)": (chosen, "hybrid"),
            "bm25": (chosen, "bm25"),
            "vector": (chosen, "vector"),
            "rrf k=60": (rrf60, "hybrid"),
            "previous default (zscore, depth 100)": (Setting("zscore", 100), "hybrid"),
        }
        confirmed: dict[str, Any] = {}
        for part, ids in (("held_out", held_out), ("tuning", tuning), ("all", sorted(lists))):
            scores = {name: per_query(lists, ids, s, mode) for name, (s, mode) in runs.items()}
            confirmed[part] = {name: mean(v) for name, v in scores.items()}
            confirmed[part]["bootstrap vs"] = {
                name: bootstrap(scores["hybrid (chosen)"], scores[name]) for name in runs if name != "hybrid (chosen)"
            }
        log("fitting the relevance calibration")
        calibration = calibrate(lists, tuning, held_out, chosen)
    return {
        "seed": SEED,
        "tuning_share": TUNING_SHARE,
        "queries": {"tuning": len(tuning), "held_out": len(held_out)},
        "chosen": chosen.label(),
        "sweep": swept,
        "feedback": feedback,
        "per_document": chunks_or_documents,
        "confirmed": confirmed,
        "calibration": calibration,
        "features": list(FEATURES),
    }


def markdown(result: Mapping[str, Any]) -> str:
    metrics = ["ndcg@10", "recall@10", "recall@100", "mrr@10"]
    parts = [f"Chosen on tuning: {result['chosen']} (seed {result['seed']}, {result['queries']})"]
    for part in ("held_out", "tuning", "all"):
        rows = [{"run": name, **values} for name, values in result["confirmed"][part].items() if name != "bootstrap vs"]
        parts += [f"\n### {part}\n", table(rows, ["run", *metrics])]
        parts.append(
            "\n"
            + "\n".join(
                f"- chosen - {name}: {b['difference']} [{b['low']}, {b['high']}]; "
                f"better on {b['better']} queries, worse on {b['worse']}"
                for name, b in result["confirmed"][part]["bootstrap vs"].items()
            )
        )
    parts += ["\n### sweep (tuning part)\n", table(result["sweep"], ["setting", *metrics])]
    parts += [
        "\n### query feedback (tuning part)\n",
        table(result["feedback"], ["setting", "vector_ndcg@10", "hybrid_ndcg@10"]),
    ]
    parts += [
        "\n### chunks or documents before fusion (tuning, then held-out)\n",
        table(result["per_document"], ["setting", *metrics]),
    ]
    for mode, fitted in result["calibration"].items():
        parts += [
            f"\n### calibration: {mode}\n",
            table(fitted["tried"], ["features", "tuning_log_loss", "held_out_log_loss", "intercept", "coefficients"]),
        ]
        parts += ["\n", table(fitted["held_out"], ["threshold", "kept_per_query", "precision", "relevant_kept"])]
        parts += ["\n", table(fitted["reliability"], ["bin", "hits", "predicted", "observed"])]
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact-train"))
    parser.add_argument("--home", type=Path, help="CITEWISE_HOME of the eval index (default: the setting)")
    parser.add_argument("--embedder", choices=["minilm", "hashing"], help="default: the setting")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = parser.parse_args()
    overrides = {"home": args.home, "embedder": args.embedder}
    settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
    result = run(args.dataset, settings, lambda message: print(message, file=sys.stderr, flush=True))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
