"""The offline synthesizer: answers by quoting the retrieved sentences that answer the question.

It cannot hallucinate by construction: every sentence of the answer is a verbatim span of a cited
chunk (as `quotable` shows it: the chunk's own markers inert, no control characters). What it must
not do either is quote sentences that do not answer (an off-corpus question still retrieves the nearest
chunks). So each sentence gets an absolute relevance, the share of the question it covers: the
question's content words it contains (its section's headings and its document's title and path count
half, and only beside at least one of its own), each weighted by how rare it is among the candidate
sentences, over the weight of all the question's words, where a word that no candidate contains weighs
the most. A question whose best sentence covers less than `MIN_RELEVANCE` is answered "not found". The
threshold is calibrated on the sample corpus and on SciFact-train (docs/generation.md,
`benchmarks/answer_relevance.py`).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from citewise.domain.models import Answer, Citation, SearchHit
from citewise.domain.textutil import content_terms, sentence_spans, shared_terms, word_prefix
from citewise.ports.synthesizer import cite, quotable, unanswered

MIN_RELEVANCE = 0.4
"""The share of the question a sentence must cover to be quoted (calibration: docs/generation.md)."""
HEADING_CREDIT = 0.5
"""What a question word found only in the sentence's headings counts for, against one in the sentence."""
FRAMING_WORDS = frozenset({"say", "said", "tell", "mention", "describe", "explain", "talk"})
"""Words that frame a question ("what does PROJ-3 say about retries?", "tell me about ...") rather than
ask for anything: no sentence contains them, so counted they would weigh the most and sink every answer."""
MAX_QUESTION_TERMS = 64
"""The distinct question words relevance reads, the first ones the question uses. A question means what it
asks in far fewer; the cap bounds what one long question costs (a 10,000-character one held a worker for
seconds while its search took milliseconds)."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """A candidate sentence: its source (1-based index into the hits), its text as quoted, and its words."""

    source: int
    text: str
    terms: frozenset[str]
    heading_terms: frozenset[str]


def candidates(hits: Sequence[SearchHit]) -> list[Sentence]:
    """Every statement (not a heading or a title-like line) of every hit, in rank order, as `quotable`
    text: a quote carries no marker or control character of its document."""
    found = []
    for source, hit in enumerate(hits, start=1):
        text, headings = quotable(hit.chunk.text), hit.chunk.heading_path
        # The document's title and path name its topic as its headings do ("what does PROJ-3 say ...").
        names = (*headings, hit.chunk.document.title or "", hit.chunk.document.path)
        heading_terms = frozenset(term for name in names for term in content_terms(name))
        for start, end in sentence_spans(text):
            sentence = text[start:end]
            if _is_statement(sentence, headings):
                found.append(Sentence(source, sentence, frozenset(content_terms(sentence)), heading_terms))
    return found


def relevance(question: str, sentences: Sequence[Sentence]) -> list[float]:
    """The share of the question each sentence covers, 0-1 (module docstring)."""
    asked = dict.fromkeys(term for term in content_terms(question) if term not in FRAMING_WORDS)
    wanted = set(itertools.islice(asked, MAX_QUESTION_TERMS))
    if not wanted:
        return [0.0 for _ in sentences]
    found = [(shared_terms(wanted, s.terms), shared_terms(wanted, s.heading_terms)) for s in sentences]
    frequency = Counter(term for own, headed in found for term in own | headed)
    weight = {term: math.log(1 + len(sentences) / (1 + frequency[term])) for term in wanted}
    total = sum(weight.values())
    # A sentence must say something the question asks about: its headings alone name a topic, not an answer.
    return [
        (sum(weight[t] for t in own) + HEADING_CREDIT * sum(weight[t] for t in headed - own)) / total if own else 0.0
        for own, headed in found
    ]


class ExtractiveSynthesizer:
    """Quotes up to `max_sentences` sentences covering at least `min_relevance` of the question, at most
    `per_source` from one source."""

    def __init__(self, max_sentences: int = 3, per_source: int = 2, min_relevance: float = MIN_RELEVANCE) -> None:
        self.max_sentences = max_sentences
        self.per_source = per_source
        self.min_relevance = min_relevance

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """Quotes the best-matching sentences; `instructions` are ignored: there is no model to instruct,
        and quoting verbatim with a citation per sentence already is the strictest reading of any."""
        sentences = candidates(hits)
        chosen = self._choose(sentences, relevance(question, sentences))
        if not chosen:
            return unanswered()
        # Number sources in the order the answer first cites them, so the answer reads [1], [2], ...
        order = list(dict.fromkeys(c.source for c in chosen))
        order += [n for n in range(1, len(hits) + 1) if n not in order]
        number = {original: new for new, original in enumerate(order, start=1)}
        citations: list[Citation] = []
        parts: list[str] = []
        for sentence in chosen:
            hit = hits[sentence.source - 1]
            quote = word_prefix(sentence.text)
            citations.append(cite(hit, number[sentence.source], quote))
            ellipsis = "..." if len(quote) < len(sentence.text) else ""
            parts.append(f"{quote}{ellipsis} [{number[sentence.source]}]")
        sources = [hits[original - 1] for original in order]
        return Answer(answer=" ".join(parts), citations=citations, sources=sources, grounded=True)

    def _choose(self, sentences: list[Sentence], scores: list[float]) -> list[Sentence]:
        scored = [
            # A mild preference for higher-ranked sources among sentences that answer alike.
            (score / (1.0 + 0.15 * (sentence.source - 1)), order, sentence)
            for order, (sentence, score) in enumerate(zip(sentences, scores, strict=True))
            if score >= self.min_relevance
        ]
        scored.sort(key=lambda item: (-item[0], item[1]))
        best = scored[0][0] if scored else 0.0
        chosen: list[Sentence] = []
        seen_text: set[frozenset[str]] = set()
        per_source: Counter[int] = Counter()
        for score, _, sentence in scored:
            # Weak matches next to a strong one are noise: keep sentences within half the best score.
            if score < best / 2 or len(chosen) == self.max_sentences:
                break
            if per_source[sentence.source] == self.per_source or sentence.terms in seen_text:
                continue
            chosen.append(sentence)
            seen_text.add(sentence.terms)
            per_source[sentence.source] += 1
        return chosen


def _is_statement(sentence: str, headings: tuple[str, ...]) -> bool:
    """Headings and short title-like lines name a topic; they do not answer anything."""
    if sentence in headings:
        return False
    return sentence.rstrip("\"')]`*").endswith((".", "!", "?", ":")) or len(sentence.split()) >= 8
