"""`citewise eval` on a small BEIR-format dataset written by the test."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from opensearchpy import OpenSearch

from citewise.ingest.pipeline import Outcome
from citewise.runtime.services import Services, build_services
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
        "backend",
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
    assert summary["backend"] == {"name": "local"}
    defaults = Settings()
    assert summary["fusion"]["search_mode"] == "bm25"
    assert summary["fusion"]["method"] == defaults.fusion_method
    assert summary["fusion"]["candidates"] == defaults.candidates
    assert "vector_weight" not in summary["fusion"]  # the default relevance fusion has no weights
    assert summary["ndcg@10"] == summary["mrr@10"] == summary["recall@10"] == 1.0
    rows = [json.loads(line) for line in (tmp_path / "per-query.jsonl").read_text().splitlines()]
    assert [(r["query_id"], r["ranked"][0]) for r in rows] == [("q1", "d1"), ("q2", "d2"), ("q3", "d/4")]


def test_eval_text_is_a_table_of_what_json_gives(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a dataset evaluated as JSON
    dataset = _write_dataset(tmp_path / "tiny")
    args = ["--home", str(tmp_path / "home"), "eval", "--dataset", str(dataset), "--embedder", "hashing"]
    assert main([*args, "--mode", "bm25", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # When the same run prints text
    assert main([*args, "--mode", "bm25"]) == 0
    text = capsys.readouterr().out
    # Then it is a table, a line of settings and a line of facts: no Python dict in sight
    header, row, blank, settings, facts = text.splitlines()
    metrics = ["ndcg@10", "recall@10", "recall@100", "mrr@10"]
    assert header.split() == ["run", *metrics, "query_p50_ms", "query_p95_ms"]
    assert row.split()[0] == "bm25"
    assert [float(value) for value in row.split()[1:5]] == [summary[name] for name in metrics]
    assert blank == ""
    assert settings.split(None, 1) == ["bm25", ", ".join(f"{k} {v}" for k, v in summary["fusion"].items())]
    assert re.fullmatch(r"3 queries, embedder hashing-384, backend local, ingest \d+\.\d s, \d+\.\d s in all", facts)
    assert not set("{}[]'") & set(text)


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


def test_vectors_are_taken_from_the_other_index_instead_of_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the dataset ingested into one index
    dataset = evaluation.load_beir(_write_dataset(tmp_path / "tiny"))
    source = build_services(Settings(home=tmp_path / "source", embedder="hashing"))
    evaluation.ingest(source, dataset, Bars(quiet=True))
    # When it is ingested into another index whose vectors come from the first, with an embedder that
    # refuses documents
    target = build_services(Settings(home=tmp_path / "target", embedder="hashing"))
    index = evaluation.ReusedVectors(target.index, vectors=source.index)
    reusing = Services(Settings(home=tmp_path / "target", embedder="hashing"), index=index)

    def refuse(texts: object) -> list[list[float]]:
        raise AssertionError("embedded again")

    monkeypatch.setattr(reusing.embedder, "embed_documents", refuse)
    _, outcomes = evaluation.ingest(reusing, dataset, Bars(quiet=True))
    # Then every document is indexed there with the first index's vectors, and ranks the same
    caller = evaluation.CALLER
    vector = reusing.embedder.embed_query("coral reefs")
    ranked = [[hit.chunk_id for hit in s.index.vector_search(caller, vector, None, 10)] for s in (source, reusing)]
    for built in (source, reusing, target):
        built.close()
    assert outcomes == Counter({Outcome.NEW: 4})
    assert ranked[0] == ranked[1] and len(ranked[0]) == 4


# --- on the real OpenSearch node -----------------------------------------------------------------

TOPICS = {
    "volcano": "lava magma eruption basalt crater ash vent pumice",
    "glacier": "ice valley moraine crevasse snow melt fjord cirque",
    "desert": "dune sand wind cactus arid oasis mesa scorpion",
    "reef": "coral fish lagoon atoll polyp tide sponge kelp",
    "forest": "tree canopy fern moss bark fungus acorn lichen",
}
FILLER = [f"w{i}" for i in range(400)]


def _write_topical_dataset(folder: Path) -> Path:
    """40 documents on five topics, each a distinct draw of its topic's words, a few of another topic's
    and filler words (so no two score alike), and 10 judged queries."""
    rng = random.Random(25)  # noqa: S311 - test data
    folder.mkdir(parents=True)
    names = list(TOPICS)
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for t, name in enumerate(names):
        words, other = TOPICS[name].split(), TOPICS[names[(t + 1) % len(names)]].split()
        for i in range(8):
            text = rng.choices(words, k=3 + i) + rng.choices(other, k=i % 3) + rng.sample(FILLER, 10 + 3 * i)
            corpus.append({"_id": f"{name}-{i}", "title": f"{name.title()} {i}", "text": " ".join(text)})
        for j, query in enumerate((f"{words[0]} {words[3]} {words[6]}", f"{words[5]} {words[7]} {other[0]}")):
            queries.append({"_id": f"{name}-q{j}", "text": query})
            qrels += [f"{name}-q{j}\t{name}-{i}\t1" for i in range(8) if i % 2 == j]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (folder / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def _compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, *backend: str
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], list[str]]]:
    """`citewise eval --compare --json` of the topical dataset: the runs and each (run, query)'s top 10."""
    per_query = tmp_path / f"{name}.jsonl"
    home = ["--home", str(tmp_path / "home")]
    dataset = str(tmp_path / "topics")
    args = ["eval", "--dataset", dataset, "--embedder", "hashing", "--compare", "--json", "--per-query", str(per_query)]
    assert main([*home, *args, *backend]) == 0
    runs = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in per_query.read_text().splitlines()]
    return runs, {(row["run"], row["query_id"]): row["ranked"] for row in rows}


@pytest.mark.opensearch
def test_eval_on_opensearch_gives_the_local_metrics_and_rankings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], opensearch_url: str
) -> None:
    # Given a small dataset evaluated on the local index
    _write_topical_dataset(tmp_path / "topics")
    local_runs, local_ranked = _compare(tmp_path, capsys, "local")
    # When it is evaluated on the real OpenSearch node, in a fresh index
    runs, ranked = _compare(
        tmp_path, capsys, "opensearch", "--backend", "opensearch", "--opensearch-url", opensearch_url
    )
    # Then the report has the same shape, names the engine, and the index is gone
    assert [list(run) for run in runs] == [list(run) for run in local_runs]
    assert [run["mode"] for run in runs] == ["hybrid", "bm25", "vector", "rrf60"]
    backend = runs[0]["backend"]
    assert (backend["name"], backend["version"], backend["kept"]) == ("opensearch", "2.19.1", False)
    assert backend["index"].startswith("citewise-eval-")
    client = OpenSearch(hosts=[opensearch_url])
    assert not client.indices.exists(index=backend["index"])
    client.close()
    # And it ranks as the local index does. The vectors are the same and HNSW is as good as exact at this
    # size, and BM25 differs only where the engines' formulas do (Lucene's IDF adds 1 inside the log and
    # stores lengths in one byte; FTS5 does neither), so near-ties may swap: every top 10 holds the same
    # documents but for at most one swap at its edge, vector and hybrid runs put the same document first,
    # and every run finds as many relevant documents with an nDCG@10 within the 0.01 (MRR@10 over 10
    # queries moves by 0.05 for one such swap at the top of one query)
    assert ranked.keys() == local_ranked.keys()
    for key, local_list in local_ranked.items():
        assert len(set(ranked[key][:10]) ^ set(local_list[:10])) <= 2, key
        if key[0] in ("vector", "hybrid"):
            assert ranked[key][0] == local_list[0], key
    for run, local_run in zip(runs, local_runs, strict=True):
        assert run["queries"] == local_run["queries"] == 10
        assert run["ndcg@10"] == pytest.approx(local_run["ndcg@10"], abs=0.01), run["mode"]
        assert (run["recall@10"], run["recall@100"]) == (local_run["recall@10"], local_run["recall@100"])


@pytest.mark.opensearch
def test_eval_on_opensearch_keeps_the_index_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], opensearch_url: str
) -> None:
    _write_topical_dataset(tmp_path / "topics")
    runs, _ = _compare(
        tmp_path, capsys, "kept", "--backend", "opensearch", "--opensearch-url", opensearch_url, "--keep-index"
    )
    index = runs[0]["backend"]["index"]
    client = OpenSearch(hosts=[opensearch_url])
    try:
        assert runs[0]["backend"]["kept"] is True
        assert client.count(index=index)["count"] == 40
    finally:
        client.indices.delete(index=index)
        client.close()


def test_eval_on_opensearch_needs_its_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _write_dataset(tmp_path / "tiny")
    status = main(
        [
            "--home",
            str(tmp_path / "home"),
            "eval",
            "--dataset",
            str(dataset),
            "--embedder",
            "hashing",
            "--backend",
            "opensearch",
        ]
    )
    assert status == 2
    assert "--backend opensearch needs --opensearch-url" in capsys.readouterr().err


def test_eval_on_an_unreachable_opensearch_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _write_dataset(tmp_path / "tiny")
    home = ["--home", str(tmp_path / "home")]
    backend = ["--backend", "opensearch", "--opensearch-url", "http://127.0.0.1:1"]  # nothing listens on port 1
    status = main([*home, "eval", "--dataset", str(dataset), "--embedder", "hashing", *backend])
    assert status == 2
    assert capsys.readouterr().err.startswith(
        "error: SEARCH_BACKEND_ERROR: cannot reach OpenSearch at http://127.0.0.1:1"
    )
