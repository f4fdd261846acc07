"""The offline synthesizer: answers by quoting the retrieved sentences that best match the question.

It cannot hallucinate by construction: every sentence of the answer is a verbatim span of a cited
chunk. Sentences are scored by the question's content words they contain, weighted by how rare each word
is among the candidate sentences (so "tenant" counts more than "document" in a corpus about documents),
with a mild preference for higher-ranked sources.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from citewise.domain.models import Answer, Citation, SearchHit
from citewise.domain.textutil import content_terms, sentence_spans, word_prefix
from citewise.ports.synthesizer import cite, unanswered


@dataclass(frozen=True, slots=True)
class _Candidate:
    source: int  # 1-based index into the hits
    start: int
    end: int
    terms: frozenset[str]


class ExtractiveSynthesizer:
    """Quotes up to `max_sentences` sentences, at most `per_source` from one source."""

    def __init__(self, max_sentences: int = 3, per_source: int = 2) -> None:
        self.max_sentences = max_sentences
        self.per_source = per_source

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """Quotes the best-matching sentences; `instructions` are ignored: there is no model to instruct,
        and quoting verbatim with a citation per sentence already is the strictest reading of any."""
        wanted = set(content_terms(question))
        candidates = [
            _Candidate(source, start, end, frozenset(content_terms(hit.chunk.text[start:end])))
            for source, hit in enumerate(hits, start=1)
            for start, end in sentence_spans(hit.chunk.text)
            if _is_statement(hit.chunk.text[start:end], hit.chunk.heading_path)
        ]
        chosen = self._choose(wanted, candidates)
        if not chosen:
            return unanswered()
        # Number sources in the order the answer first cites them, so the answer reads [1], [2], ...
        order = list(dict.fromkeys(c.source for c in chosen))
        order += [n for n in range(1, len(hits) + 1) if n not in order]
        number = {original: new for new, original in enumerate(order, start=1)}
        citations: list[Citation] = []
        parts: list[str] = []
        for candidate in chosen:
            hit = hits[candidate.source - 1]
            quote = word_prefix(hit.chunk.text[candidate.start : candidate.end])
            citations.append(cite(hit, number[candidate.source], quote))
            ellipsis = "..." if len(quote) < candidate.end - candidate.start else ""
            parts.append(f"{quote}{ellipsis} [{number[candidate.source]}]")
        sources = [hits[original - 1] for original in order]
        return Answer(answer=" ".join(parts), citations=citations, sources=sources, grounded=True)

    def _choose(self, wanted: set[str], candidates: list[_Candidate]) -> list[_Candidate]:
        if not wanted or not candidates:
            return []
        frequency = Counter(term for c in candidates for term in c.terms & wanted)
        idf = {t: math.log(1 + len(candidates) / frequency[t]) for t in frequency}
        total = sum(idf.values())
        scored = []
        for order, candidate in enumerate(candidates):
            overlap = candidate.terms & wanted
            if not overlap:
                continue
            coverage = sum(idf[t] for t in overlap) / total
            rank_prior = 1.0 / (1.0 + 0.15 * (candidate.source - 1))
            scored.append((coverage * rank_prior, order, candidate))
        scored.sort(key=lambda item: (-item[0], item[1]))
        best = scored[0][0] if scored else 0.0
        chosen: list[_Candidate] = []
        seen_text: set[frozenset[str]] = set()
        per_source: Counter[int] = Counter()
        for score, _, candidate in scored:
            # Weak matches next to a strong one are noise: keep sentences within half the best score.
            if score < best / 2 or len(chosen) == self.max_sentences:
                break
            if per_source[candidate.source] == self.per_source or candidate.terms in seen_text:
                continue
            chosen.append(candidate)
            seen_text.add(candidate.terms)
            per_source[candidate.source] += 1
        return chosen


def _is_statement(sentence: str, headings: tuple[str, ...]) -> bool:
    """Headings and short title-like lines name a topic; they do not answer anything."""
    if sentence in headings:
        return False
    return sentence.rstrip("\"')]`*").endswith((".", "!", "?", ":")) or len(sentence.split()) >= 8
