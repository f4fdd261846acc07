"""`citewise eval --answers` end to end on a tiny SQuAD-format file written by the test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from citewise_local.cli import main

# "Normans" is in the tune part, "Steam_engine" in the check part (`answers.split_of`).
SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Normans",
            "paragraphs": [
                {
                    "context": "The Normans gave their name to Normandy, a region in northern France. "
                    "Their ancestors were Norse raiders and pirates led by their chieftain Rollo.",
                    "qas": [
                        {
                            "id": "n1",
                            "question": "Which chieftain led the Norse raiders and pirates?",
                            "answers": [{"text": "Rollo", "answer_start": 140}],
                            "is_impossible": False,
                        },
                        {
                            "id": "n2",
                            "question": "How many moons does the planet Jupiter have?",
                            "answers": [],
                            "plausible_answers": [{"text": "Rollo", "answer_start": 140}],
                            "is_impossible": True,
                        },
                    ],
                },
                {
                    "context": "Norman castles were built of stone after the conquest of England in 1066.",
                    "qas": [],
                },
            ],
        },
        {
            "title": "Steam_engine",
            "paragraphs": [
                {
                    "context": "The steam engine was greatly improved by James Watt in 1776. "
                    "Coal mines pumped water with the earlier Newcomen engine.",
                    "qas": [
                        {
                            "id": "s1",
                            "question": "Who greatly improved the steam engine in 1776?",
                            "answers": [{"text": "James Watt", "answer_start": 41}, {"text": "Watt"}],
                            "is_impossible": False,
                        },
                        {
                            "id": "s2",
                            "question": "Which recipe makes the best chocolate cake frosting?",
                            "answers": [],
                            "is_impossible": True,
                        },
                    ],
                }
            ],
        },
    ],
}


@pytest.fixture
def squad_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-squad.json"
    path.write_text(json.dumps(SQUAD))
    return path


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["--home", str(tmp_path / "home"), "eval", "--answers", "--embedder", "hashing", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_answers_are_asked_through_the_query_path_and_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], squad_file: Path
) -> None:
    # Given a SQuAD file of two articles, one in each part: two clear answerable questions and two
    # questions about things no paragraph mentions
    per_question = tmp_path / "answers.jsonl"

    # When every question is asked
    status, out, _ = _run(tmp_path, capsys, "--squad", str(squad_file), "--json", "--per-query", str(per_question))

    # Then the report covers each part and both together, with the data and what answered
    report = json.loads(out)
    assert status == 0
    assert report["mode"] == "answers"
    assert report["data"] == {"file": str(squad_file), "articles": 2, "paragraphs": 3}
    assert (report["embedder"], report["synthesizer"], report["top_k"]) == ("hashing-384", "extractive", 5)
    assert list(report["splits"]) == ["tune", "check", "all"]
    assert all(report[key] >= 0 for key in ("ingest_s", "question_p50_ms", "question_p95_ms", "elapsed_s"))
    # And each question was answered from the ingested paragraphs: the answerable ones with their gold
    # answer, cited from the paragraph that holds it; the off-corpus ones refused
    rows = {row["id"]: row for row in map(json.loads, per_question.read_text().splitlines())}
    assert [(rows[q]["split"], rows[q]["refused"], rows[q]["contains_gold"]) for q in ("n1", "n2", "s1", "s2")] == [
        ("tune", False, True),
        ("tune", True, False),
        ("check", False, True),
        ("check", True, False),
    ]
    assert "Rollo" in rows["n1"]["answer"] and rows["n1"]["citations_with_gold"] >= 1
    assert rows["s1"]["gold"] == ["James Watt", "Watt"]
    # And the measures are those of the rows
    every = report["splits"]["all"]
    assert (every["questions"], every["answerable"], every["unanswerable"]) == (4, 2, 2)
    assert (every["contains_gold"], every["unanswerable_refused"], every["wrongly_refused"]) == (1.0, 1.0, 0.0)
    answered = [rows[q] for q in ("n1", "s1")]
    precision = sum(r["citations_with_gold"] for r in answered) / sum(r["citations"] for r in answered)
    assert every["citation_precision"] == round(precision, 4)
    tune = report["splits"]["tune"]
    assert (tune["questions"], tune["counts"]["contains_gold"], tune["counts"]["unanswerable_refused"]) == (2, 1, 1)
    # And nothing was left in the home: the paragraphs went to a throwaway one
    assert not list((tmp_path / "home").glob("*.db")) and not (tmp_path / "home" / "blobs").exists()


def test_one_part_and_a_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str], squad_file: Path) -> None:
    status, out, _ = _run(tmp_path, capsys, "--squad", str(squad_file), "--split", "check", "--limit", "1", "--json")
    report: dict[str, Any] = json.loads(out)
    assert status == 0
    assert list(report["splits"]) == ["check"]
    assert report["splits"]["check"]["questions"] == 1
    assert report["data"]["paragraphs"] == 3  # every paragraph is ingested whatever the part asked


def test_the_text_report_is_a_table_of_the_four_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], squad_file: Path
) -> None:
    status, out, _ = _run(tmp_path, capsys, "--squad", str(squad_file))
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split() == ["tune", "check", "all"]
    assert [line[:36].strip() for line in lines[1:5]] == [
        "(a) answer contains a gold answer",
        "(b) unanswerable refused",
        "(c) answerable wrongly refused",
        "(d) citation precision",
    ]
    assert lines[1].split()[-2:] == ["100.0%", "2/2"]
    assert lines[3].split()[-2:] == ["0.0%", "0/2"]
    assert "synthesizer extractive" in out and "2 articles, 3 paragraphs ingested" in out


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--compare"], "--answers does not take --compare"),
        (["--backend", "opensearch", "--opensearch-url", "http://127.0.0.1:1"], "--answers does not take"),
        (["--top-k", "51"], "--top-k with --answers is 1-50"),
        (["--split", "tune"], "holds no question in the tune part"),
    ],
)
def test_options_that_do_not_apply_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], error: str
) -> None:
    only_check = {"version": "v2.0", "data": [SQUAD["data"][1]]}  # type: ignore[index]
    path = tmp_path / "check-only.json"
    path.write_text(json.dumps(only_check))
    status, _, err = _run(tmp_path, capsys, "--squad", str(path), *args)
    assert status == 2
    assert err.startswith("error: VALIDATION_ERROR: ") and error in err


def test_answers_options_need_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["--home", str(tmp_path / "home"), "eval", "--dataset", str(tmp_path), "--split", "tune"])
    assert status == 2
    assert "--dataset does not take --split" in capsys.readouterr().err
