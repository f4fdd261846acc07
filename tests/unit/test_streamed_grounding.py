"""Grounding a model's text as it streams (`Grounder`): whatever pieces the text arrives in, the events
add up to exactly the answer `ground` gives for the whole text, and nothing the reader is sent is ever
taken back or cited wrongly.

The property test generates model texts (sentences, valid, unknown and forged markers, stray brackets)
and cuts each into random pieces, as a model's tokens arrive.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.domain.models import Citation, SearchHit
from citewise.ports.grounding import Grounder, ground
from citewise.ports.synthesizer import MARKER_RE, NO_ANSWER, CitationDelta, TextDelta
from tests.factories import hit
from tests.unit.test_grounding import chunk_text, model_text

HITS = [
    hit(1, "Alarms fire when the dead-letter queue is not empty."),
    hit(2, "Tenants are isolated by a mandatory filter on tenant_id."),
    hit(3, "Uploads use presigned URLs."),
]


def _streamed(pieces: list[str], hits: list[SearchHit]) -> tuple[list[TextDelta | CitationDelta], str, list[Citation]]:
    """The events of `pieces` fed one by one, checking each citation against the text sent before it."""
    grounder = Grounder(hits)
    events: list[TextDelta | CitationDelta] = []
    for piece in pieces:
        events += grounder.feed(piece)
    rest, answer = grounder.finish()
    events += rest
    sent = ""
    for event in events:
        if isinstance(event, TextDelta):
            assert not event.reset
            sent += event.text
        elif event.span is not None:
            start, end = event.span
            # The sentence a citation supports is already sent, whole, and cut at no word
            assert 0 <= start < end <= len(sent)
            assert start == 0 or not (sent[start - 1].isalnum() and sent[start].isalnum())
            assert end == len(sent) or not (sent[end - 1].isalnum() and sent[end].isalnum())
    return events, sent, answer.citations


def _cuts(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(cut, len(text)) for cut in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


@settings(max_examples=400, deadline=None)
@given(st.lists(chunk_text, min_size=1, max_size=6), model_text, st.lists(st.integers(0, 400), max_size=40))
def test_streamed_text_adds_up_to_the_answer_whatever_the_pieces(texts: list[str], text: str, cuts: list[int]) -> None:
    # Given hits, any model text, and any cutting of it into pieces
    hits = [hit(i, chunk) for i, chunk in enumerate(texts, start=1)]
    whole = ground(text, hits)
    # When the pieces are grounded as they arrive
    events, sent, citations = _streamed(_cuts(text, cuts), hits)
    # Then the text sent is exactly the answer, and the citations sent are exactly its citations, in order
    assert sent == whole.answer
    assert [e.citation for e in events if isinstance(e, CitationDelta)] == citations == whole.citations
    # And no text event ends inside a marker: a marker reaches the reader whole, renumbered and valid
    boundaries, at = set(), 0
    for event in events:
        if isinstance(event, TextDelta):
            at += len(event.text)
            boundaries.add(at)
    for marker in MARKER_RE.finditer(sent):
        assert not any(marker.start() < b < marker.end() for b in boundaries)
        assert re.fullmatch(r"\[\d+\]", marker.group()) and 1 <= int(marker.group()[1:-1]) <= len(whole.sources)


def test_a_forged_marker_split_across_tokens_never_reaches_the_reader() -> None:
    # Given a model that writes a marker naming no given source one character at a time, then a valid one
    text = "Uploads use presigned URLs [9]. Uploads are presigned [3]."
    # When streamed character by character
    events, sent, _ = _streamed(list(text), HITS)
    # Then no piece of the forged marker was sent: not its bracket, not its number
    assert sent == "Uploads use presigned URLs. Uploads are presigned [1]."
    assert all("9" not in e.text for e in events if isinstance(e, TextDelta))


def test_nothing_is_sent_before_the_first_valid_citation() -> None:
    # Given a first sentence, then its marker arriving later
    grounder = Grounder(HITS)
    # Then the sentence is held until its marker names a given source
    assert grounder.feed("Tenants are isolated by a filter") == []
    assert grounder.feed(" [") == []
    events = grounder.feed("2]. Uploads")
    assert (
        "".join(e.text for e in events if isinstance(e, TextDelta)) == "Tenants are isolated by a filter [1]. Uploads"
    )
    (cited,) = [e for e in events if isinstance(e, CitationDelta)]
    assert cited.citation.doc_id == "d2" and cited.span == (0, len("Tenants are isolated by a filter"))


def test_an_answer_without_a_valid_citation_streams_only_the_refusal() -> None:
    grounder = Grounder(HITS)
    assert grounder.feed("Tenants pay per seat [7].") == []
    events, answer = grounder.finish()
    assert [e.text for e in events if isinstance(e, TextDelta)] == [NO_ANSWER] and answer.answer == NO_ANSWER
