"""The promises every answer keeps, whatever the model wrote: asserted by the Synthesizer contract suite
and by the property tests of the grounding and of the extractive synthesizer."""

from __future__ import annotations

import re
from collections.abc import Sequence

from citewise.domain.models import Answer, SearchHit
from citewise.domain.textutil import MAX_QUOTE_CHARS, content_terms
from citewise.ports.synthesizer import MARKER_RE, NO_ANSWER, quotable

# Characters an answer never shows: bidirectional controls, and controls other than tab and newline.
DISPLAY_CONTROLS_RE = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_keeps_the_contract(answer: Answer, hits: Sequence[SearchHit]) -> None:
    """Every [n] is a source of the answer, numbered in order of first citation, with a citation quoting
    its own chunk verbatim (as `quotable` shows it); nothing else in the answer reads as a marker, and
    neither it nor a quote shows a control character; an answer with citations offers the hits reordered
    as its sources; a grounded one says nothing after its last citation; one without citations is
    NO_ANSWER."""
    assert all(re.fullmatch(r"\[\d+\]", m.group()) for m in MARKER_RE.finditer(answer.answer))
    assert not DISPLAY_CONTROLS_RE.search(answer.answer)
    markers = [int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)]
    assert all(1 <= n <= len(answer.sources) for n in markers)
    assert list(dict.fromkeys(markers)) == list(range(1, len(set(markers)) + 1))
    assert set(markers) == {c.source for c in answer.citations}
    for citation in answer.citations:
        cited = answer.sources[citation.source - 1].chunk
        assert citation.chunk_id == cited.chunk_id and citation.doc_id == cited.document.doc_id
        assert citation.quote and citation.quote in quotable(cited.text)
        assert not DISPLAY_CONTROLS_RE.search(citation.quote)
        assert len(citation.quote) <= MAX_QUOTE_CHARS
    if answer.citations:
        # An answer with citations offers every hit as a source, cited ones first.
        assert sorted(h.chunk.chunk_id for h in answer.sources) == sorted(h.chunk.chunk_id for h in hits)
    if answer.grounded:
        # Grounded: cited, and nothing is said after the last citation (every sentence ends with one).
        assert answer.citations
        assert not content_terms(re.split(r"\[\d+\]", answer.answer)[-1])
    elif not answer.citations:
        assert (answer.answer, answer.citations, answer.sources) == (NO_ANSWER, [], [])
