"""`citewise eval` on a small BEIR-format dataset written by the test."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from citewise.ingest.pipeline import Outcome
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings
from citewise_local import evaluation
from citewise_local.cli import main
from citewise_local.progress import Bars

T = TypeVar("T")

CORPUS = {
    "d1": ("Volcanoes", "Lava flows from erupting volcanoes cool into basalt."),
    "d2": ("Glaciers", "Glaciers carve valleys as the ice slowly moves downhill."),
    "d3": ("Deserts", "Dunes in deserts migrate with the prevailing wind."),
    "d/4": ("Reefs", "Coral reefs grow in warm shallow seas."),
}
QUERIES = {"q1": "basalt from lava", "q2": "how ice carves valleys", "q3": "coral reefs", "q9": "unjudged"}


def _write_dataset(folder: Path, *, nested_qrels: bool = False) -> Path:
    folder.mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as out:
        for doc_id, (title, text) in CORPUS.items():
            out.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as out:
        for query_id, text in QUERIES.items():
            out.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    qrels = folder / "qrels" / "test.tsv" if nested_qrels else folder / "qrels.tsv"
    qrels.parent.mkdir(exist_ok=True)
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td/4\t1\n")
    return folder


@pytest.mark.parametrize("nested_qrels", [False, True])
def test_eval_prints_one_json_object_with_the_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nested_qrels: bool
) -> None:
    dataset = _write_dataset(tmp_path / "tiny", nested_qrels=nested_qrels)
    status = main(
        [
            "--home",
            str(tmp_path / "home"),
            "eval",
            "--dataset",
            str(dataset),
            "--embedder",
            "hashing",
            "--mode",
            "bm25",
            "--json",
            "--per-query",
            str(tmp_path / "per-query.jsonl"),
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert status == 0
    assert list(summary) == [
        "mode",
        "embedder",
        "queries",
        "ndcg@10",
        "recall@10",
        "recall@100",
        "mrr@10",
        "ingest_s",
        "query_p50_ms",
        "query_p95_ms",
        "fusion",
        "elapsed_s",
    ]
    assert (summary["mode"], summary["embedder"], summary["queries"]) == ("bm25", "hashing-384", 3)
    defaults = Settings()
    assert summary["fusion"]["search_mode"] == "bm25"
    assert summary["fusion"]["method"] == defaults.fusion_method
    assert summary["fusion"]["candidates"] == defaults.candidates
    assert "vector_weight" not in summary["fusion"]  # the default relevance fusion has no weights
    assert summary["ndcg@10"] == summary["mrr@10"] == summary["recall@10"] == 1.0
    rows = [json.loads(line) for line in (tmp_path / "per-query.jsonl").read_text().splitlines()]
    assert [(r["query_id"], r["ranked"][0]) for r in rows] == [("q1", "d1"), ("q2", "d2"), ("q3", "d/4")]


def test_compare_scores_every_mode_and_plain_rrf_from_one_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a dataset and a fusion setting chosen by the environment
    dataset = _write_dataset(tmp_path / "tiny")
    monkeypatch.setenv("CITEWISE_FUSION_METHOD", "zscore")
    monkeypatch.setenv("CITEWISE_CANDIDATES", "120")
    ingests = []
    real_ingest = evaluation.ingest
    monkeypatch.setattr(evaluation, "ingest", lambda *a: ingests.append(1) or real_ingest(*a))
    home = ["--home", str(tmp_path / "home")]

    # When compared, as JSON and as text
    status = main([*home, "eval", "--dataset", str(dataset), "--embedder", "hashing", "--compare", "--json"])
    runs = json.loads(capsys.readouterr().out)
    text_status = main([*home, "eval", "--dataset", str(dataset), "--embedder", "hashing", "--compare"])
    text = capsys.readouterr().out

    # Then one ingest per command serves four runs, each saying how it fused
    assert (status, text_status, len(ingests)) == (0, 0, 2)
    assert [run["mode"] for run in runs] == ["hybrid", "bm25", "vector", "rrf60"]
    fusion = {run["mode"]: run["fusion"] for run in runs}
    assert fusion["hybrid"]["method"] == fusion["bm25"]["method"] == "zscore"
    assert [fusion[m]["search_mode"] for m in ("hybrid", "bm25", "vector")] == ["hybrid", "bm25", "vector"]
    assert fusion["rrf60"] == {
        "search_mode": "hybrid",
        "method": "rrf",
        "rrf_k": 60,
        "keyword_weight": 1.0,
        "vector_weight": 1.0,
        "candidates": 120,
    }
    assert all(run["queries"] == 3 and 0 < run["ndcg@10"] <= 1 for run in runs)
    assert runs[1]["ndcg@10"] == 1.0  # BM25 finds each query's one document first (as in the test above)
    assert [line.split()[0] for line in text.splitlines()[1:5]] == ["hybrid", "bm25", "vector", "rrf60"]
    assert "method zscore" in text and "rrf_k 60" in text


def test_a_second_run_reuses_the_index(tmp_path: Path) -> None:
    # Given a dataset evaluated once
    dataset = evaluation.load_beir(_write_dataset(tmp_path / "tiny"))
    settings = Settings(home=evaluation.index_home(tmp_path, dataset, "hashing", 400, 50), embedder="hashing")
    services = build_services(settings)
    _, first = evaluation.ingest(services, dataset, Bars(quiet=True))
    # When ingested again with the same settings
    _, second = evaluation.ingest(services, dataset, Bars(quiet=True))
    services.close()
    # Then nothing is parsed or embedded again
    assert first == Counter({Outcome.NEW: 4}) and second == Counter({Outcome.UNCHANGED: 4})
    assert evaluation.index_home(tmp_path, dataset, "minilm", 400, 50) != settings.home


def test_a_folder_without_qrels_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("")
    status = main(["--home", str(tmp_path / "home"), "eval", "--dataset", str(folder), "--embedder", "hashing"])
    assert status == 2
    assert capsys.readouterr().err.startswith(
        "error: VALIDATION_ERROR: " + f"{folder} is not a BEIR dataset: missing queries.jsonl, qrels.tsv"
    )


class _CountingBars(Bars):
    """Bars that remember the totals they were given (and draw nothing: not a terminal)."""

    def __init__(self) -> None:
        super().__init__(quiet=True)
        self.totals: list[tuple[str, int, str]] = []

    def items(self, iterable: Iterable[T], total: int, what: str, unit: str) -> Iterator[T]:
        self.totals.append((what, total, unit))
        return super().items(iterable, total, what, unit)


def test_eval_progress_knows_its_totals(tmp_path: Path) -> None:
    # Given the tiny dataset (4 documents, 3 judged queries)
    dataset = evaluation.load_beir(_write_dataset(tmp_path / "tiny"))
    services = build_services(Settings(home=tmp_path / "home", embedder="hashing"))
    bars = _CountingBars()
    # When it is ingested and queried
    evaluation.ingest(services, dataset, bars)
    evaluation.run_queries(services, dataset, 10, bars)
    services.close()
    # Then each bar had its total (so tqdm shows an ETA)
    assert bars.totals == [("ingest", 4, "doc"), ("queries", 3, "q")]
