"""The promises every answer keeps, whatever the model wrote: asserted by the Synthesizer contract suite
and by the property tests of the grounding and of the extractive synthesizer."""

from __future__ import annotations

import re
from collections.abc import Sequence

from citewise.domain.models import Answer, SearchHit
from citewise.domain.textutil import MAX_QUOTE_CHARS
from citewise.ports.synthesizer import NO_ANSWER


def assert_keeps_the_contract(answer: Answer, hits: Sequence[SearchHit]) -> None:
    """Every [n] is a source of the answer, numbered in order of first citation, with a citation quoting
    its own chunk verbatim; a grounded answer's sources are the hits reordered, any other is NO_ANSWER."""
    markers = [int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)]
    assert all(1 <= n <= len(answer.sources) for n in markers)
    assert list(dict.fromkeys(markers)) == list(range(1, len(set(markers)) + 1))
    assert set(markers) == {c.source for c in answer.citations}
    for citation in answer.citations:
        cited = answer.sources[citation.source - 1].chunk
        assert citation.chunk_id == cited.chunk_id and citation.doc_id == cited.document.doc_id
        assert citation.quote and citation.quote in cited.text
        assert len(citation.quote) <= MAX_QUOTE_CHARS
    if answer.grounded:
        assert sorted(h.chunk.chunk_id for h in answer.sources) == sorted(h.chunk.chunk_id for h in hits)
        assert answer.citations
    else:
        assert (answer.answer, answer.citations, answer.sources) == (NO_ANSWER, [], [])
