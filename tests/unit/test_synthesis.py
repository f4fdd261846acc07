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
from citewise_local.minilm import MiniLMEmbedder
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


MARKDOWN_LINES = [
    "",
    "- tenant index.",
    "1. queue vector",
    "| tenant | cost |",
    "| --- | --- |",
    "```",
    "    code",
    "answer page:",
    "See also the alarm.",
    "In the next chapter the cost.",
    "tenant | queue",
]
markdown_chunk = st.lists(st.sampled_from(MARKDOWN_LINES) | sentence, min_size=1, max_size=12).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(markdown_chunk, min_size=1, max_size=4), st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6))
def test_lists_tables_code_and_lead_ins_keep_the_contract(texts: list[str], question_words: list[str]) -> None:
    # Given chunks mixing prose, lists, tables, code fences, lead-ins and filler in any order
    hits = [_hit(i, text) for i, text in enumerate(texts, start=1)]
    # When answered
    answer = ExtractiveSynthesizer().answer(" ".join(question_words) + "?", hits)
    # Then every quote is verbatim text of its chunk, never empty, and the contract holds
    assert all(citation.quote.strip() for citation in answer.citations)
    assert_keeps_the_contract(answer, hits)


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


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    # The local default embedder, loaded once for the module (the weights are the slow part).
    return MiniLMEmbedder()


SEVERITY_TABLES = {
    # A Word table: the parser gives each row as a paragraph of its own, cells joined by " | ".
    "word": "Incidents are ranked by severity.\n\nSeverity | Response time\n\nSEV1 | 15 minutes\n\nSEV2 | 1 hour\n\n"
    "SEV3 | 1 business day",
    "markdown": "Incidents are ranked by severity.\n\n| Severity | Response time |\n| --- | --- |\n"
    "| SEV1 | 15 minutes |\n| SEV2 | 1 hour |\n| SEV3 | 1 business day |",
}


@pytest.mark.parametrize("table", SEVERITY_TABLES)
def test_a_table_row_answers_the_question_about_its_row(table: str, minilm: MiniLMEmbedder) -> None:
    # Given a table of response times ranked first, and a neighbour about incidents
    hits = [
        hit(1, SEVERITY_TABLES[table], heading=("Incident policy", "Response times"), relevance=0.6),
        hit(2, "Every incident gets a postmortem within five days. Postmortems are blameless.", relevance=0.3),
    ]
    # When asked for one row's value
    answer = ExtractiveSynthesizer(minilm).answer("What is the response time for a SEV1 incident?", hits)
    # Then the row is quoted first, verbatim, with its citation
    assert answer.grounded, answer.notice
    assert answer.citations[0].quote.strip("| ") == "SEV1 | 15 minutes"
    assert answer.answer.startswith(answer.citations[0].quote)
    assert_keeps_the_contract(answer, hits)


CORS_LIST = (
    "CORS is configured with the CORSMiddleware class. The middleware takes these arguments:\n\n"
    "- `allow_origins`: the origins that may make cross-origin requests.\n"
    "- `allow_methods`: the HTTP methods allowed.\n\n"
    "The defaults are restrictive."
)
CORS_CODE = (
    "Browsers block cross-origin requests unless the server allows them.\n\n"
    "To enable CORS in your application, add the middleware with the allowed origins:\n\n"
    "```python\napp.add_middleware(CORSMiddleware, allow_origins=origins)\n```"
)


@pytest.mark.parametrize(
    ("text", "question", "lead_in", "introduced"),
    [
        (
            CORS_LIST,
            "Which arguments does the CORS middleware take?",
            "The middleware takes these arguments:",
            "- `allow_methods`",
        ),
        (CORS_CODE, "How do I enable CORS?", "To enable CORS in your application", "app.add_middleware(CORSMiddleware"),
    ],
    ids=["list", "code"],
)
def test_a_lead_in_is_quoted_with_what_it_introduces(
    text: str, question: str, lead_in: str, introduced: str, minilm: MiniLMEmbedder
) -> None:
    # Given a chunk where a sentence ending in ":" introduces a list or a code block
    hits = [hit(1, text, heading=("CORS",), relevance=0.6)]
    # When asked what the lead-in introduces
    answer = ExtractiveSynthesizer(minilm).answer(question, hits)
    # Then the lead-in is quoted together with what it introduces, in one verbatim quote
    assert answer.grounded, answer.notice
    quote = next(c.quote for c in answer.citations if lead_in in c.quote)
    assert quote.startswith(lead_in) and introduced in quote
    assert_keeps_the_contract(answer, hits)


def test_a_lead_in_whose_block_is_not_in_the_chunk_is_never_quoted(minilm: MiniLMEmbedder) -> None:
    # Given a chunk that ends with a lead-in (its code block went to the next chunk)
    text = "CORS is enabled with the CORSMiddleware class. Here is how to enable CORS in your application:"
    hits = [hit(1, text, relevance=0.6)]
    # When asked about it
    answer = ExtractiveSynthesizer(minilm).answer("How do I enable CORS in my application?", hits)
    # Then only the statement is quoted: the lead-in promises what the answer could not show
    assert answer.grounded, answer.notice
    assert [c.quote for c in answer.citations] == ["CORS is enabled with the CORSMiddleware class."]


@pytest.mark.parametrize("embedder", [None, "minilm"])
def test_navigation_and_filler_are_never_quoted(embedder: str | None, minilm: MiniLMEmbedder) -> None:
    # Given a chunk whose filler sentences share the question's words
    text = (
        "In the next chapter you will see how to enable CORS for your application. "
        "In this section we'll see how to enable CORS for your application. "
        "CORS for your application is enabled with the CORSMiddleware class. "
        "See also the CORS page to enable CORS for your application. "
        "To enable CORS for your application, read the docs for [CORS](../tutorial/cors.md)."
    )
    hits = [hit(1, text, relevance=0.6)]
    # When asked
    answer = ExtractiveSynthesizer(minilm if embedder else None).answer(
        "How do I enable CORS for my application?", hits
    )
    # Then the statement alone is quoted
    assert [c.quote for c in answer.citations] == [
        "CORS for your application is enabled with the CORSMiddleware class."
    ]


def test_a_passage_of_a_barely_relevant_hit_is_refused_and_the_notice_says_why(minilm: MiniLMEmbedder) -> None:
    # Given the same sentence retrieved as a relevant hit, and as one of calibrated relevance 0.04
    text = "Rotate the signing key every ninety days."
    question = "How often should the signing key be rotated?"
    # When answered
    relevant = ExtractiveSynthesizer(minilm).answer(question, [hit(1, text, relevance=0.7)])
    weak = ExtractiveSynthesizer(minilm).answer(question, [hit(1, text, relevance=0.04), hit(2, text, relevance=0.02)])
    # Then the relevant one is quoted, the weak one refused with a notice naming the relevance it had
    assert relevant.grounded
    assert (weak.grounded, weak.answer, weak.citations) == (False, NO_ANSWER, [])
    assert weak.notice is not None and weak.notice.code == "NOT_FOUND"
    assert "relevance 0.04, below 0.10" in weak.notice.message


@pytest.mark.parametrize("embedder", [None, "minilm"])
def test_an_off_topic_question_is_refused(embedder: str | None, minilm: MiniLMEmbedder) -> None:
    # Given the nearest chunks to an off-topic question (retrieval always returns some)
    hits = [
        hit(1, "Rotate the signing key every ninety days. Keys live in KMS.", relevance=0.1),
        hit(2, "Alarms fire when the dead-letter queue is not empty.", relevance=0.05),
    ]
    # When asked something the documents do not cover
    answer = ExtractiveSynthesizer(minilm if embedder else None).answer(
        "What is the airspeed velocity of an unladen swallow?", hits
    )
    # Then it is refused, saying why
    assert (answer.grounded, answer.answer, answer.citations) == (False, NO_ANSWER, [])
    assert answer.notice is not None and answer.notice.code == "NOT_FOUND"


def test_the_refusal_reason_reaches_the_caller(services) -> None:  # type: ignore[no-untyped-def]
    # Given an indexed document
    services.ingestor.ingest(source("acme", "notes.md", b"# Notes\n\nThe vault opens at nine."))
    # When asked something it does not say
    answer = answer_question(
        services.retriever,
        services.synthesizer,
        Caller(tenant_id="acme", user_id="alice"),
        SearchRequest(query="Who painted the ceiling of the chapel?"),
    )
    # Then the answer's notice is the synthesizer's, saying why: what was retrieved is barely relevant
    assert not answer.grounded and answer.notice is not None and answer.notice.code == "NOT_FOUND"
    assert answer.notice.message.startswith("No passage of the retrieved documents answers the question: the most")
    assert "relevance" in answer.notice.message


def test_every_item_of_a_list_after_a_blank_line_is_a_passage() -> None:
    # Given a list of one item after a paragraph and a blank line (the demo's corpus has such lists)
    hits = [hit(1, "Deployments are staged.\n\n- Rollbacks restore the previous version within five minutes.")]
    # When asked about the item
    answer = ExtractiveSynthesizer().answer("How quickly do rollbacks restore the previous version?", hits)
    # Then the item is quoted (the first item after a blank line was lost, a lone one failed the answer)
    assert [c.quote for c in answer.citations] == ["- Rollbacks restore the previous version within five minutes."]


class _CountingEmbedder:
    """MiniLM, recording the texts each `embed_documents` call is given."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner, self.name, self.calls = inner, inner.name, []

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.embed_documents(texts)


def test_passages_of_hits_below_the_relevance_floor_are_never_embedded(minilm: MiniLMEmbedder) -> None:
    # Given a relevant hit and one below the floor, whose passages can never be quoted
    spy = _CountingEmbedder(minilm)
    relevant = hit(1, "Rotate the signing keys every 90 days.", relevance=0.6)
    faint = hit(2, "Keys for the office are at the front desk.", relevance=0.05)
    # When the question is answered
    answer = ExtractiveSynthesizer(spy).answer("How often are the signing keys rotated?", [relevant, faint])  # type: ignore[arg-type]
    # Then only the relevant hit's passage was embedded, and it answers
    assert spy.calls == [["Rotate the signing keys every 90 days."]]
    assert answer.citations and answer.citations[0].doc_id == "d1"
    # And a question whose every hit is below the floor embeds nothing at all
    spy.calls.clear()
    refused = ExtractiveSynthesizer(spy).answer("How do I connect to Kafka?", [faint])  # type: ignore[arg-type]
    assert spy.calls == [] and refused.citations == []
