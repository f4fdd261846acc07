"""Fit the extractive answerer's models (`citewise.builtin.extractive.VECTOR_MODELS`, `WORDS_MODEL`) on the
`tune` part of a SQuAD 2.0 file, and print what each threshold would answer there.

Usage: python -m benchmarks.answer_calibration [--squad FILE] [--embedder minilm]

Every paragraph is ingested into a throwaway home as `citewise eval --answers` does; each `tune` question's
top 5 chunks are retrieved as `citewise query` does, and each candidate passage is labelled by whether it
contains a gold answer (SQuAD's normalisation; none does for an unanswerable question). A logistic
regression over the passages' features (maximum likelihood, Newton's method) gives the coefficients;
then, per threshold, the share of unanswerable questions refused, of answerable ones refused, and of
answerable ones whose best passages (as the answerer chooses them) hold a gold answer. Choose the
threshold that refuses unanswerable questions at least as often as before with the fewest answerable
ones refused (docs/generation.md). Never fit on `check`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from citewise.builtin.extractive import MIN_HIT_RELEVANCE, VECTOR_MODELS, WORDS_MODEL, ExtractiveSynthesizer, candidates
from citewise.domain.models import SearchRequest
from citewise.runtime.services import build_services
from citewise.runtime.settings import load_settings
from citewise_local import evaluation, packaged
from citewise_local.answers import load_squad, normalize
from citewise_local.progress import Bars

THRESHOLDS = (0.09, 0.1, 0.105, 0.11, 0.115, 0.12, 0.13, 0.14, 0.15)
FEATURES = {"vectors": ("coverage", "similarity", "relevance"), "words": ("coverage", "relevance")}


def collect(squad_path: Path, embedder: str) -> tuple[str, list[tuple[bool, list[dict[str, float]], list[bool]]]]:
    """The embedder's name, and for each `tune` question: unanswerable or not, its passages' features, and which
    hold a gold answer."""
    squad = load_squad(squad_path)
    with tempfile.TemporaryDirectory(prefix="citewise-calibration-") as home:
        services = build_services(load_settings(home=Path(home), embedder=embedder))
        try:
            evaluation.ingest(services, evaluation.Dataset(squad.name, squad.corpus, {}, {}), Bars(quiet=True))
            answerer = ExtractiveSynthesizer(services.embedder)
            rows = []
            for question in (q for q in squad.questions if q.split == "tune"):
                retrieved = services.retriever.retrieve(evaluation.CALLER, SearchRequest(query=question.text))
                passages = candidates(retrieved.hits)
                golds = [f" {normalize(gold)} " for gold in question.answers]
                held = [any(gold in f" {normalize(p.text)} " for gold in golds) for p in passages]
                rows.append((not question.answerable, answerer.features(question.text, retrieved.hits, passages), held))
            return services.embedder.name, rows
        finally:
            services.close()


def fit(rows: list[tuple[bool, list[dict[str, float]], list[bool]]], names: tuple[str, ...]) -> np.ndarray:
    """Intercept and coefficients of the logistic regression of "holds a gold answer" on `names`."""
    x = np.array([[1.0, *(f[n] for n in names)] for _, features, _ in rows for f in features])
    y = np.array([label for _, _, labels in rows for label in labels], dtype=float)
    weights = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-x @ weights))
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + 1e-6 * np.eye(x.shape[1])
        weights += np.linalg.solve(hessian, x.T @ (y - p))
    return weights


def sweep(rows: list[tuple[bool, list[dict[str, float]], list[bool]]], names: tuple[str, ...], w: np.ndarray) -> None:
    """Per threshold: unanswerable refused, answerable refused, answerable whose chosen passages hold gold."""
    for threshold in THRESHOLDS:
        unanswerable = refused_unanswerable = answerable = refused = held = 0
        for impossible, features, labels in rows:
            scores = [
                1.0 / (1.0 + np.exp(-(w[0] + sum(c * f[n] for c, n in zip(w[1:], names, strict=True)))))
                if f["relevance"] >= MIN_HIT_RELEVANCE
                else 0.0
                for f in features
            ]
            best = max(scores, default=0.0)
            unanswerable += impossible
            answerable += not impossible
            if best < threshold:
                refused_unanswerable += impossible
                refused += not impossible
            elif not impossible:
                top = sorted(range(len(scores)), key=lambda i: -scores[i])[:3]
                held += any(labels[i] for i in top if scores[i] >= max(threshold, best / 2))
        print(
            f"  {threshold:<6} unanswerable refused {refused_unanswerable / unanswerable:.3f}, "
            f"answerable refused {refused / answerable:.3f}, best passages hold gold {held / answerable:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--squad", type=Path, default=packaged.squad_sample())
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    embedder, rows = collect(args.squad, args.embedder)
    print(f"{len(rows)} tune questions, {sum(len(f) for _, f, _ in rows)} passages")
    current = VECTOR_MODELS.get(embedder, WORDS_MODEL)
    names = tuple(current.coefficients)
    print("the current model: " + ", ".join(f"{n} {c:.3f}" for n, c in current.coefficients.items()))
    sweep(rows, names, np.array([current.intercept, *current.coefficients.values()]))
    for model, names in FEATURES.items():
        weights = fit(rows, names)
        print(
            f"{model}: intercept {weights[0]:.3f}, "
            + ", ".join(f"{n} {c:.3f}" for n, c in zip(names, weights[1:], strict=True))
        )
        sweep(rows, names, weights)


if __name__ == "__main__":
    main()
