"""The extractive synthesizer: every [n] resolves to a given source and every quote is verbatim."""

from __future__ import annotations

import random
import re
import string
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.builtin.extractive import ExtractiveSynthesizer
from citewise.domain.models import Caller, SearchHit, SearchRequest
from citewise.domain.textutil import MAX_QUOTE_CHARS
from citewise.ports.synthesizer import MARKER_RE, NO_ANSWER, quotable
from citewise.query.answering import answer_question
from tests.contract.synthesis_rules import assert_keeps_the_contract
from tests.factories import hit, source

NOW = datetime(2026, 1, 1, tzinfo=UTC)
VOCABULARY = ["tenant", "index", "queue", "vector", "answer", "page", "alarm", "cost", "the", "is", "of"]


def _hit(number: int, text: str, page: int | None = None) -> SearchHit:
    return hit(number, text, page=page, heading=("Doc", "Section"))


sentence = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=40).map(lambda ws: " ".join(ws) + ".")
chunk_text = st.lists(sentence, min_size=1, max_size=6).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(chunk_text, min_size=0, max_size=6),
    st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6),
)
def test_every_marker_maps_to_a_given_source_and_every_quote_is_verbatim(
    texts: list[str], question_words: list[str]
) -> None:
    # Given hits and a question
    hits = [_hit(i, text) for i, text in enumerate(texts, start=1)]
    # When answered
    answer = ExtractiveSynthesizer().answer(" ".join(question_words) + "?", hits)
    # Then markers and citations agree, point only at given sources, and are numbered in reading order
    markers = [int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)]
    assert set(markers) == {c.source for c in answer.citations}
    assert list(dict.fromkeys(markers)) == list(range(1, len(set(markers)) + 1))
    if answer.grounded:
        assert sorted(h.chunk.chunk_id for h in answer.sources) == sorted(h.chunk.chunk_id for h in hits)
    for citation in answer.citations:
        assert 1 <= citation.source <= len(answer.sources)
        cited = answer.sources[citation.source - 1].chunk
        assert citation.chunk_id == cited.chunk_id and citation.doc_id == cited.document.doc_id
        assert citation.quote in cited.text
        assert len(citation.quote) <= MAX_QUOTE_CHARS
    if not answer.grounded:
        assert answer.answer == NO_ANSWER and answer.citations == [] and answer.sources == []


def test_it_quotes_the_sentence_that_answers_and_names_its_page() -> None:
    # Given two sources, the answer on page 3 of the second
    hits = [
        _hit(1, "Alarms fire on queue depth. Costs are reported per tenant."),
        _hit(2, "Rotate the signing key every ninety days. Keys live in KMS.", page=3),
    ]
    # When asked about key rotation
    answer = ExtractiveSynthesizer().answer("How often should the signing key be rotated?", hits)
    # Then the rotation sentence is quoted and cited with its page
    assert answer.grounded
    assert answer.answer.startswith("Rotate the signing key every ninety days. [1]")
    first = answer.citations[0]
    assert (first.source, first.path, first.page, first.section) == (1, "docs/2.md", 3, "Doc > Section")
    assert answer.sources == [hits[1], hits[0]]


def test_headings_and_unrelated_text_are_not_answers() -> None:
    # Given a chunk whose only overlap with the question is its heading line
    hits = [_hit(1, "Section\n\nNothing here mentions it.")]
    # When asked
    answer = ExtractiveSynthesizer().answer("What is in the section?", hits)
    # Then it says so and cites nothing
    assert (answer.grounded, answer.answer, answer.citations) == (False, NO_ANSWER, [])


def test_a_long_sentence_is_quoted_as_a_verbatim_prefix() -> None:
    long_sentence = "tenant " * 200 + "end."
    hits = [_hit(1, long_sentence)]
    answer = ExtractiveSynthesizer().answer("tenant?", hits)
    quote = answer.citations[0].quote
    assert long_sentence.startswith(quote) and len(quote) <= MAX_QUOTE_CHARS
    assert answer.answer.endswith("... [1]")


def test_nothing_above_min_score_gives_a_plain_no_answer(services) -> None:  # type: ignore[no-untyped-def]
    # Given an indexed document
    services.ingestor.ingest(source("acme", "notes.md", b"# Notes\n\nThe vault opens at nine."))
    caller = Caller(tenant_id="acme", user_id="alice")
    # When asked something only the vector ranking returns (fused score 0.5) with min_score 0.6,
    # and then a matching question
    strict = answer_question(
        services.retriever,
        services.synthesizer,
        caller,
        SearchRequest(query="zebra crossing", min_score=0.6),
    )
    loose = answer_question(
        services.retriever, services.synthesizer, caller, SearchRequest(query="When does the vault open?")
    )
    # Then the strict one says so plainly and cites nothing; the loose one answers with a citation
    assert (strict.grounded, strict.answer, strict.citations, strict.sources) == (False, NO_ANSWER, [], [])
    assert loose.grounded and loose.citations[0].quote == "The vault opens at nine."


def test_quotable_text_shows_a_documents_markers_inert_and_is_stable() -> None:
    # Given document text with every form of marker, and controls
    text = "Lunch is free [2]. See [Source 3], [1, 2] and [ 4 ].\u202e Done\x9b."
    # When made quotable
    shown = quotable(text)
    # Then the markers read in parentheses, the controls are gone, and quoting it again changes nothing
    assert shown == "Lunch is free (2). See (Source 3), (1, 2) and ( 4 ). Done ."
    assert quotable(shown) == shown and not MARKER_RE.search(shown)
    # And text without either is returned unchanged (a quote of it is verbatim of the chunk itself)
    assert quotable("Rotate keys every (90) days: see a[i].") == "Rotate keys every (90) days: see a[i]."


def _words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 9))) for _ in range(count)]


@pytest.mark.parametrize("shape", ["one word repeated", "distinct words", "no spaces", "words without spaces"])
def test_a_long_question_costs_the_answerer_little(shape: str) -> None:
    # Given ten hits of thirty sentences in words of their own, and a 10,000-character question
    vocabulary = _words(3000, seed=32)
    hits = [
        hit(n, " ".join(" ".join(vocabulary[(n * 450 + s * 15) % 2985 :][:15]) + "." for s in range(30)))
        for n in range(1, 11)
    ]
    question = {
        "one word repeated": "rotation " * 1200,
        "distinct words": " ".join(vocabulary + _words(2000, seed=33)),
        "no spaces": "x" * 10_000,
        "words without spaces": ",".join(vocabulary),
    }[shape][:10_000]
    # When answered
    started = time.perf_counter()
    answer = ExtractiveSynthesizer().answer(question, hits)
    elapsed = time.perf_counter() - started
    # Then it took well under a second (quadratic matching took 5-20 s here), and keeps the contract
    assert elapsed < 1.0, f"{elapsed:.2f} s"
    assert_keeps_the_contract(answer, hits)
