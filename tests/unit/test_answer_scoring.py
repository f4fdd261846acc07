"""The answers benchmark's scoring (`citewise_local.answers`) on answers written by hand."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from citewise.domain.errors import ValidationError
from citewise.domain.models import Answer, SearchHit
from citewise.ports.synthesizer import cite, unanswered
from citewise_local import packaged
from citewise_local.answers import Question, contains, load_squad, normalize, score, select, split_of, summary
from tests.factories import hit

WATT = hit(1, "James Watt improved the steam engine in 1776. It spread through the mills.")
NEWCOMEN = hit(2, "Thomas Newcomen built the first practical engine in 1712.")
ANSWERABLE = Question("q1", "Steam_engine", "Who improved the steam engine?", ("James Watt", "Watt"))
UNANSWERABLE = Question("q2", "Steam_engine", "Who improved the steam turbine?", ())


def answer(text: str, *cited: tuple[SearchHit, str]) -> Answer:
    """An answer citing each (hit, quote) as its own source, in order."""
    hits = [h for h, _ in cited]
    citations = [cite(h, number, quote) for number, (h, quote) in enumerate(cited, start=1)]
    return Answer(answer=text, citations=citations, sources=hits, grounded=bool(citations))


# --- normalisation and containment ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The Normans", "normans"),
        ("  An   apple a day ", "apple day"),
        ("U.S. (1776)!", "us 1776"),
        ("Theatre and anthem", "theatre and anthem"),  # articles are whole words only
        ("Rock-and-roll", "rockandroll"),  # SQuAD removes punctuation, it does not split on it
        ("the", ""),
    ],
)
def test_normalize_is_squads(text: str, normalised: str) -> None:
    assert normalize(text) == normalised


def test_contains_matches_whole_normalised_words() -> None:
    assert contains("James Watt improved the steam engine. [1]", ["james watt"])
    assert contains("It was the 10th century.", ["10th century"])
    assert contains("In the U.S., it did.", ["US"])
    assert not contains("In 1066 the Normans came.", ["106"])  # part of a word
    assert not contains("In 1066 the Normans came.", ["Watt"])


def test_contains_ignores_citation_markers_and_empty_gold_answers() -> None:
    # Given answers whose only match would be a marker or an article
    assert not contains("Watt improved it. [1]", ["1"])
    assert not contains("Watt improved it. [2, 3]", ["2 3"])
    assert not contains("The engine.", ["the", ""])
    # A number in the text itself still counts
    assert contains("It ran at 1 bar [1].", ["1"])


# --- one answer -------------------------------------------------------------------------------------


def test_an_answer_quoting_the_gold_answer_from_a_chunk_holding_it() -> None:
    scored = score(ANSWERABLE, answer("James Watt improved the steam engine in 1776. [1]", (WATT, "x")), 5.0)
    assert (scored.refused, scored.contains_gold, scored.citations, scored.citations_with_gold) == (False, True, 1, 1)


def test_citation_precision_reads_the_cited_chunk_not_the_quote() -> None:
    # Given an answer whose text lacks the gold answer, citing one chunk that does not hold it, then one
    # that does (though not in the quoted part)
    text = "An engine came first [1]. It was improved in 1776 [2]."
    scored = score(ANSWERABLE, answer(text, (NEWCOMEN, "Thomas Newcomen"), (WATT, "It spread")), 5.0)
    # Then the answer does not contain gold, and one citation of two is precise
    assert (scored.refused, scored.contains_gold, scored.citations, scored.citations_with_gold) == (False, False, 2, 1)


def test_a_gold_answer_in_the_cited_chunks_heading_only_is_not_evidence() -> None:
    # Given chunks that start with their article's title, the gold answer of a question
    titled = hit(3, "Steam engine\n\nIt was improved in 1776.", heading=("Steam engine",))
    holding = hit(4, "Steam engine\n\nThe steam engine drove the mills.", heading=("Steam engine",))
    question = Question("q3", "Steam_engine", "What drove the mills?", ("steam engine",))
    # When an answer cites both
    scored = score(question, answer("It was improved [1]. It drove the mills [2].", (titled, "x"), (holding, "x")), 1.0)
    # Then only the chunk whose text holds it counts
    assert (scored.citations, scored.citations_with_gold) == (2, 1)


def test_a_refusal_is_an_answer_without_citations() -> None:
    assert score(ANSWERABLE, unanswered(), 1.0).refused
    assert not score(ANSWERABLE, unanswered(), 1.0).contains_gold
    # Even if its text happened to hold the gold answer
    assert score(ANSWERABLE, Answer(answer="Watt", citations=[], sources=[], grounded=False), 1.0).refused


def test_an_unanswerable_question_answered_scores_no_gold() -> None:
    scored = score(UNANSWERABLE, answer("James Watt improved the steam engine. [1]", (WATT, "x")), 1.0)
    assert (scored.refused, scored.contains_gold, scored.citations_with_gold) == (False, False, 0)


# --- the summary ------------------------------------------------------------------------------------


def test_summary_counts_refusals_and_citation_precision_over_answered_answerable_questions() -> None:
    # Given four answerable questions (one answered with gold, one answered without, two refused) and
    # three unanswerable ones (one answered, two refused)
    right = score(ANSWERABLE, answer("James Watt did. [1]", (WATT, "James Watt")), 10.0)
    wrong = score(ANSWERABLE, answer("Thomas Newcomen did. [1]", (NEWCOMEN, "Thomas Newcomen")), 20.0)
    refused = score(ANSWERABLE, unanswered(), 30.0)
    answered_unanswerable = score(UNANSWERABLE, answer("James Watt did. [1]", (WATT, "x")), 40.0)
    refused_unanswerable = score(UNANSWERABLE, unanswered(), 50.0)
    results = [right, wrong, refused, refused, answered_unanswerable, refused_unanswerable, refused_unanswerable]

    measured = summary(results)

    # Then (a) 1 of 4, (b) 2 of 3, (c) 2 of 4, (d) 1 of the 2 citations of the two answered answerable
    # questions (the citation of the answered unanswerable one does not count)
    assert measured == {
        "questions": 7,
        "answerable": 4,
        "unanswerable": 3,
        "contains_gold": 0.25,
        "unanswerable_refused": round(2 / 3, 4),
        "wrongly_refused": 0.5,
        "citation_precision": 0.5,
        "answer_words": 3.0,  # of the three answered questions, markers left out
        "counts": {
            "contains_gold": 1,
            "unanswerable_refused": 2,
            "wrongly_refused": 2,
            "answered_answerable": 2,
            "citations": 2,
            "citations_with_gold": 1,
        },
    }


def test_a_summary_without_a_kind_of_question_has_no_rate_for_it() -> None:
    measured = summary([score(UNANSWERABLE, unanswered(), 1.0)])
    assert (measured["contains_gold"], measured["wrongly_refused"], measured["citation_precision"]) == (None,) * 3
    assert (measured["unanswerable_refused"], measured["answer_words"]) == (1.0, None)


# --- data -------------------------------------------------------------------------------------------


def _squad(folder: Path, *, compressed: bool) -> Path:
    data = {
        "version": "v2.0",
        "data": [
            {
                "title": "Steam_engine",
                "paragraphs": [
                    {
                        "context": "James Watt improved the steam engine.",
                        "qas": [
                            {
                                "id": "a",
                                "question": "Who?",
                                "answers": [{"text": "James Watt"}, {"text": "James Watt"}],
                            },
                            {
                                "id": "b",
                                "question": "Who not?",
                                "answers": [],
                                "plausible_answers": [{"text": "Watt"}],
                                "is_impossible": True,
                            },
                            # Some conversions keep the plausible answer in `answers`: the flag decides
                            {"id": "c", "question": "Who else?", "answers": [{"text": "Watt"}], "is_impossible": True},
                        ],
                    }
                ],
            }
        ],
    }
    path = folder / ("squad.json.xz" if compressed else "squad.json")
    raw = json.dumps(data).encode()
    path.write_bytes(lzma.compress(raw) if compressed else raw)
    return path


@pytest.mark.parametrize("compressed", [False, True])
def test_load_squad_reads_the_official_format(tmp_path: Path, compressed: bool) -> None:
    squad = load_squad(_squad(tmp_path, compressed=compressed))
    assert (squad.articles, squad.corpus) == (
        1,
        {"Steam_engine-000": ("Steam engine", "James Watt improved the steam engine.")},
    )
    assert squad.questions == [
        Question("a", "Steam_engine", "Who?", ("James Watt",)),  # repeated gold answers once
        Question("b", "Steam_engine", "Who not?", ()),  # plausible answers are not gold
        Question("c", "Steam_engine", "Who else?", ()),
    ]


def test_a_file_that_is_not_squad_is_a_validation_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [{"title": "x"}]}')
    with pytest.raises(ValidationError, match="broken.json is not a SQuAD file: no 'paragraphs'"):
        load_squad(broken)
    broken.write_text('{"data": ["Normans"]}')
    with pytest.raises(ValidationError, match="broken.json is not a SQuAD file: string indices"):
        load_squad(broken)
    with pytest.raises(ValidationError, match="cannot read"):
        load_squad(tmp_path / "missing.json")


def test_the_split_is_by_article_title_alone() -> None:
    assert [split_of(t) for t in ("Normans", "Computational_complexity_theory", "Immune_system")] == ["tune"] * 3
    assert [split_of(t) for t in ("Steam_engine", "Scottish_Parliament", "Force")] == ["check"] * 3


def test_the_bundled_sample_is_six_whole_articles_split_three_and_three() -> None:
    squad = load_squad(packaged.squad_sample())
    tune, check = (select(squad.questions, part, None) for part in ("tune", "check"))
    assert (squad.articles, len(squad.corpus), len(squad.questions)) == (6, 265, 2262)
    assert (len(tune), sum(not q.answerable for q in tune)) == (1084, 576)
    assert (len(check), sum(not q.answerable for q in check)) == (1178, 572)
    assert packaged.squad_sample().stat().st_size < 200_000
    assert "CC BY-SA 4.0" in (packaged.squad_sample().parent / "NOTICE.md").read_text()


def test_limit_draws_the_same_questions_from_every_article_in_file_order() -> None:
    questions = [Question(f"q{i:02d}", "Normans" if i < 50 else "Force", "?", ()) for i in range(100)]
    first, second = select(questions, None, 10), select(questions, None, 10)
    assert first == second and len(first) == 10
    assert first == sorted(first, key=lambda q: q.question_id)
    assert {q.article for q in first} == {"Normans", "Force"}
    assert select(questions, "check", None) == questions[50:]
    assert select(questions, "tune", 1000) == questions[:50]
