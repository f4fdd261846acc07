"""The offline synthesizer: answers by quoting the retrieved passages that answer the question.

It cannot hallucinate by construction: every passage of the answer is a verbatim span of a cited chunk
(as `quotable` shows it: the chunk's own markers inert, no control characters). What it must not do
either is quote passages that do not answer (an off-corpus question still retrieves the nearest chunks).

A passage is a sentence of prose, a list item, a table row (read with its table's header row), or a
lead-in sentence ending in ":" together with the code block, list or table it introduces (a lead-in whose
block is not in the chunk says nothing and is dropped). Headings, title-like lines and navigation filler
("In the next chapter ...", "See also ...") are never passages.

Each passage gets a calibrated probability of answering the question (`AnswerModel`), a logistic model
of three kinds of evidence:

- `coverage`: the share of the question's content words the passage contains, each weighted by how
  rare it is among the candidates (`coverage`; its section's headings and its document's title and path
  count half, and only beside a word of its own);
- `similarity`: the cosine of the passage's vector and the question's, from the embedder retrieval uses
  (every candidate embedded in one `embed_documents` call), when a model was fitted with that embedder
  (`VECTOR_MODELS`: MiniLM); with another one, or none, the model reads the other two;
- `relevance`: the calibrated relevance of the hit it comes from (`SearchHit.relevance_score`).

A question whose best passage is less likely than its model's `threshold` to answer is refused, and the
refusal's notice says why (the best passage's estimate and its hit's relevance). The coefficients and the
threshold were fitted on SQuAD 2.0's tuning split (docs/generation.md); they are constants,
so Lambda needs no model file and no numpy.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass

from citewise.domain.models import Answer, Citation, Notice, SearchHit
from citewise.domain.textutil import content_terms, sentence_spans, shared_terms, stripped_span, word_prefix
from citewise.ports.embedder import Embedder
from citewise.ports.synthesizer import (
    AnswerDone,
    AnswerEvent,
    CitationDelta,
    TextDelta,
    cite,
    collected,
    quotable,
    replayed,
    unanswered,
)

HEADING_CREDIT = 0.5
"""What a question word found only in the passage's headings counts for, against one in the passage."""
FRAMING_WORDS = frozenset({"say", "said", "tell", "mention", "describe", "explain", "talk"})
"""Words that frame a question ("what does PROJ-3 say about retries?", "tell me about ...") rather than
ask for anything: no passage contains them, so counted they would weigh the most and sink every answer."""
MAX_QUESTION_TERMS = 64
"""The distinct question words coverage reads, the first ones the question uses. A question means what it
asks in far fewer; the cap bounds what one long question costs (a 10,000-character one held a worker for
seconds while its search took milliseconds)."""
MAX_EMBEDDED_PASSAGES = 96
"""The passages embedded per question, in rank order (the rest are read by coverage alone): one Cohere
call on Bedrock, and about 0.2 s of MiniLM on one core (docs/generation.md)."""
FILLER_RE = re.compile(
    r"(?:in|on) the (?:next|previous|following|last|coming) (?:chapters?|sections?|pages?|parts?|steps?|tutorials?)\b"
    r"|in this (?:section|chapter|page|part|tutorial),? (?:we|you)(?:'ll| will)\b"
    r"|see (?:also|more|the (?:next|previous))\b|(?:read|learn) more\b|for more (?:details|information|info)\b"
    r"|(?:now,? |next,? |so,? )?let(?:'s| us) (?:see|start|go|continue|check|learn|now|review|dive)\b"
    r"|(?:we|you)(?:'ll| will) see (?:how|more|it|that|later)\b|(?:check|take a look at|have a look at) it out\b",
    re.IGNORECASE,
)
"""How navigation and filler sentences start: they point elsewhere and answer nothing."""
POINTER_RE = re.compile(
    r"\b(?:read|see|check)(?: out)? the (?:docs|documentation|section|chapter|tutorial|guide)s? "
    r"(?:for|about|on|at|in)\b"
    r"|\byou (?:also |already )?(?:read|saw|learned) (?:how|about)\b",
    re.IGNORECASE,
)
"""Pointers anywhere in a sentence ("... read the docs for X", "And then you also read how to ..."): the
sentence sends the reader to another page for what it does not say."""
_FENCE_RE = re.compile(r"\s*(```|~~~)")
_ITEM_RE = re.compile(r"[ \t]*(?:[-*+]|\d+[.)])[ \t]+\S")
_ROW_RE = re.compile(r"\s*\|.*\||.+ \| .+")
_LINE_RE = re.compile(r"[^\n]+")
_RULE_RE = re.compile(r"[\s|:+-]*-{3,}[\s|:+-]*")


@dataclass(frozen=True)
class AnswerModel:
    """A logistic model of the probability that a passage answers: over `coverage`, `relevance` and, for an
    embedder it was fitted with, `similarity` (a feature without a coefficient does not count); a question
    whose best passage is below `threshold` is refused."""

    intercept: float
    coefficients: Mapping[str, float]
    threshold: float

    def probability(self, features: Mapping[str, float]) -> float:
        """sigmoid(intercept + coefficients . features)."""
        z = self.intercept + sum(weight * features[name] for name, weight in self.coefficients.items())
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


VECTOR_MODELS: dict[str, AnswerModel] = {
    "minilm-l6-v2": AnswerModel(-5.905, {"coverage": 1.927, "similarity": 3.710, "relevance": 2.019}, 0.105),
}
"""The models that read sentence vectors, by the name of the embedder they were fitted with. Another
embedder's cosines sit elsewhere (the hashing embedder's lower), so with it the answerer embeds nothing and
reads `WORDS_MODEL`, until a model is fitted for it the same way (calibration: docs/generation.md)."""
WORDS_MODEL = AnswerModel(-4.587, {"coverage": 3.011, "relevance": 2.676}, 0.11)
"""The model without sentence vectors: coverage and the hit's relevance."""
MIN_HIT_RELEVANCE = 0.1
"""The calibrated relevance below which a hit's passages are never quoted (calibration: docs/generation.md)."""


@dataclass(frozen=True, slots=True)
class Passage:
    """A candidate quote: its source (1-based index into the hits), its span and text in the chunk as
    `quotable` shows it, what the embedder reads with it (a table row's header row), and its words."""

    source: int
    start: int
    end: int
    text: str
    context: str
    terms: frozenset[str]
    heading_terms: frozenset[str]

    @property
    def embedded_text(self) -> str:
        """The passage with its context, as the embedder reads it."""
        return f"{self.context}\n{self.text}" if self.context else self.text


@dataclass(frozen=True, slots=True)
class _Block:
    """A run of lines of one kind: `prose`, `code`, `list` or `table`."""

    kind: str
    start: int
    end: int


def candidates(hits: Sequence[SearchHit]) -> list[Passage]:
    """Every passage of every hit, in rank order (module docstring)."""
    found: list[Passage] = []
    for source, hit in enumerate(hits, start=1):
        text, headings = quotable(hit.chunk.text), hit.chunk.heading_path
        # The document's title and path name its topic as its headings do ("what does PROJ-3 say ...").
        names = (*headings, hit.chunk.document.title or "", hit.chunk.document.path)
        heading_terms = frozenset(term for name in names for term in content_terms(name))
        for start, end, context in _passage_spans(text, headings):
            passage = text[start:end]
            terms, context_terms = frozenset(content_terms(passage)), frozenset(content_terms(context))
            found.append(Passage(source, start, end, passage, context, terms, heading_terms | context_terms))
    return found


def _passage_spans(text: str, headings: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """(start, end, context) of each passage of one chunk's text."""
    blocks = _blocks(text)
    spans: list[tuple[int, int, str]] = []
    for number, block in enumerate(blocks):
        if block.kind == "list":
            spans += [(start, end, "") for start, end in _items(text, block) if not _is_filler(text[start:end])]
        elif block.kind == "table":
            rows = _rows(text, block)
            header = text[rows[0][0] : rows[0][1]] if rows else ""
            spans += [(start, end, header) for start, end in rows[1:]]
        elif block.kind == "prose":
            sentences = sentence_spans(text, block.start, block.end)
            for index, (start, end) in enumerate(sentences):
                sentence = text[start:end]
                if not _is_statement(sentence, headings) or _is_filler(sentence):
                    continue
                if not sentence.rstrip("*_`").endswith(":"):
                    spans.append((start, end, ""))
                    continue
                # A lead-in is quoted with what it introduces, or not at all: alone it promises and says nothing.
                following = blocks[number + 1] if number + 1 < len(blocks) else None
                if index == len(sentences) - 1 and following is not None and following.kind != "prose":
                    spans.append((start, following.end, ""))
    return spans


def _blocks(text: str) -> list[_Block]:
    """The chunk's lines grouped into prose paragraphs, fenced or indented code, lists and tables."""
    # Empty lines are left out: blocks are told apart by their kind, and sentences by `sentence_spans`.
    lines = [(m.start(), m.end(), m.group()) for m in _LINE_RE.finditer(text)]
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        start, end, line = lines[i]
        if not line.strip():
            i += 1
            continue
        kind, j = _block_at(lines, i)
        blocks.append(_Block(kind, start, lines[j - 1][1]))
        i = j
    return blocks


def _block_at(lines: list[tuple[int, int, str]], i: int) -> tuple[str, int]:
    """The kind of the block starting at line `i`, and the index of the line after it."""
    line = lines[i][2]
    fence = _FENCE_RE.match(line)
    if fence:
        j = i + 1
        while j < len(lines) and not lines[j][2].lstrip().startswith(fence.group(1)):
            j += 1
        return "code", min(j + 1, len(lines))
    if line.startswith(("    ", "\t")):
        return "code", _extent(lines, i, lambda s: s.startswith(("    ", "\t")) or not s.strip())
    if _ROW_RE.fullmatch(line):
        # A Word table's rows are paragraphs of their own (blank lines between); a Markdown one's are lines.
        return "table", _extent(lines, i, lambda s: bool(_ROW_RE.fullmatch(s)) or not s.strip())
    if _ITEM_RE.match(line):
        return "list", _extent(
            lines, i, lambda s: bool(_ITEM_RE.match(s)) or s.startswith((" ", "\t")) or not s.strip()
        )
    return "prose", _extent(lines, i, lambda s: bool(s.strip()) and not _starts_block(s))


def _starts_block(line: str) -> bool:
    return bool(_FENCE_RE.match(line) or _ROW_RE.fullmatch(line) or _ITEM_RE.match(line))


def _extent(lines: list[tuple[int, int, str]], i: int, belongs: Callable[[str], bool]) -> int:
    """The index after the last line from `i` on that `belongs`, trailing blank lines left out."""
    j = i + 1
    while j < len(lines) and belongs(lines[j][2]):
        j += 1
    while j > i + 1 and not lines[j - 1][2].strip():
        j -= 1
    return j


def _items(text: str, block: _Block) -> list[tuple[int, int]]:
    """The spans of a list's items, each with its continuation lines."""
    starts = [m.start() for m in _ITEM_RE.finditer(text, block.start, block.end) if _line_start(text, m.start())]
    ends = [*starts[1:], block.end] if starts else []
    return [span for start, end in zip(starts, ends, strict=True) if (span := stripped_span(text, start, end))]


def _line_start(text: str, offset: int) -> bool:
    return offset == 0 or text[offset - 1] == "\n"


def _rows(text: str, block: _Block) -> list[tuple[int, int]]:
    """The spans of a table's rows, its header first; a Markdown table's rule line is no row."""
    rows = [stripped_span(text, m.start(), m.end()) for m in _LINE_RE.finditer(text, block.start, block.end)]
    return [row for row in rows if row and not _RULE_RE.fullmatch(text[row[0] : row[1]])]


def coverage(question: str, passages: Sequence[Passage]) -> list[float]:
    """The share of the question each passage covers, 0-1 (module docstring)."""
    asked = dict.fromkeys(term for term in content_terms(question) if term not in FRAMING_WORDS)
    wanted = set(itertools.islice(asked, MAX_QUESTION_TERMS))
    if not wanted:
        return [0.0 for _ in passages]
    found = [(shared_terms(wanted, p.terms), shared_terms(wanted, p.heading_terms)) for p in passages]
    frequency = Counter(term for own, headed in found for term in own | headed)
    weight = {term: math.log(1 + len(passages) / (1 + frequency[term])) for term in wanted}
    total = sum(weight.values())
    # A passage must say something the question asks about: its headings alone name a topic, not an answer.
    return [
        (sum(weight[t] for t in own) + HEADING_CREDIT * sum(weight[t] for t in headed - own)) / total if own else 0.0
        for own, headed in found
    ]


def similarity(
    question: str, passages: Sequence[Passage], embedder: Embedder, wanted: Sequence[bool] | None = None
) -> list[float]:
    """The cosine of each passage's vector and the question's. Of the first `MAX_EMBEDDED_PASSAGES`, those
    `wanted` says (all by default) are embedded, in one call; every other passage counts 0, and with none
    wanted nothing is embedded at all."""
    embedded = [i for i in range(min(len(passages), MAX_EMBEDDED_PASSAGES)) if wanted is None or wanted[i]]
    cosines = [0.0] * len(passages)
    if not embedded:
        return cosines
    asked = embedder.embed_query(question)
    vectors = embedder.embed_documents([passages[i].embedded_text for i in embedded])
    for i, vector in zip(embedded, vectors, strict=True):
        cosines[i] = sum(a * b for a, b in zip(asked, vector, strict=True))
    return cosines


class ExtractiveSynthesizer:
    """Quotes up to `max_passages` passages likely enough to answer (the model's `threshold`), at most
    `per_source` from one source; with an `embedder` a model was fitted with (`VECTOR_MODELS`), passages are
    read by meaning as well as by words."""

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        max_passages: int = 3,
        per_source: int = 2,
    ) -> None:
        fitted = VECTOR_MODELS.get(embedder.name) if embedder is not None else None
        self.embedder = embedder if fitted is not None else None
        self.model = fitted or WORDS_MODEL
        self.max_passages = max_passages
        self.per_source = per_source

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """Quotes the passages likeliest to answer; `instructions` are ignored: there is no model to instruct,
        and quoting verbatim with a citation per passage already is the strictest reading of any."""
        return collected(self.stream(question, hits, instructions=instructions))

    def stream(
        self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None
    ) -> Generator[AnswerEvent, None, None]:
        """`answer`, one quoted passage at a time: its text with its marker, then its citation."""
        passages = candidates(hits)
        scores = self.probabilities(question, hits, passages)
        chosen = self._choose(passages, scores)
        if not chosen:
            yield from replayed(self._refusal(hits, passages, scores))
            return
        # Number sources in the order the answer first cites them, so the answer reads [1], [2], ...
        order = list(dict.fromkeys(c.source for c in chosen))
        order += [n for n in range(1, len(hits) + 1) if n not in order]
        number = {original: new for new, original in enumerate(order, start=1)}
        citations: list[Citation] = []
        parts: list[str] = []
        for passage in chosen:
            hit = hits[passage.source - 1]
            quote = word_prefix(passage.text)
            citation = cite(hit, number[passage.source], quote)
            citations.append(citation)
            ellipsis = "..." if len(quote) < len(passage.text) else ""
            part = f"{' ' if parts else ''}{quote}{ellipsis} [{number[passage.source]}]"
            start = sum(map(len, parts)) + (1 if parts else 0)
            parts.append(part)
            yield TextDelta(part)
            yield CitationDelta(citation, (start, start + len(quote)))
        sources = [hits[original - 1] for original in order]
        yield AnswerDone(Answer(answer="".join(parts), citations=citations, sources=sources, grounded=True))

    def probabilities(self, question: str, hits: Sequence[SearchHit], passages: Sequence[Passage]) -> list[float]:
        """Each passage's estimated probability of answering the question (module docstring)."""
        # A barely relevant hit's passages are never quoted, however many of the question's words they hold,
        # so they are not embedded either: an off-topic question costs no embedding call.
        quotable_hits = [hits[p.source - 1].relevance_score >= MIN_HIT_RELEVANCE for p in passages]
        features = self.features(question, hits, passages, embedded=quotable_hits)
        return [self.model.probability(f) if ok else 0.0 for f, ok in zip(features, quotable_hits, strict=True)]

    def features(
        self,
        question: str,
        hits: Sequence[SearchHit],
        passages: Sequence[Passage],
        embedded: Sequence[bool] | None = None,
    ) -> list[dict[str, float]]:
        """What `AnswerModel` reads of each passage; `embedded` says which get a vector (all by default, as
        the calibration fitted them; the others read similarity 0)."""
        covered = coverage(question, passages)
        similar = similarity(question, passages, self.embedder, embedded) if self.embedder else [0.0] * len(passages)
        return [
            {"coverage": c, "similarity": s, "relevance": hits[p.source - 1].relevance_score}
            for p, c, s in zip(passages, covered, similar, strict=True)
        ]

    def _choose(self, passages: list[Passage], scores: list[float]) -> list[Passage]:
        ranked = sorted(
            (item for item in enumerate(zip(passages, scores, strict=True)) if item[1][1] >= self.model.threshold),
            key=lambda item: (-item[1][1], item[0]),
        )
        best = ranked[0][1][1] if ranked else 0.0
        chosen: list[Passage] = []
        seen_text: set[frozenset[str]] = set()
        per_source: Counter[int] = Counter()
        for _, (passage, score) in ranked:
            # Weak matches next to a strong one are noise: keep passages within half the best estimate.
            if score < best / 2 or len(chosen) == self.max_passages:
                break
            if per_source[passage.source] == self.per_source or passage.terms in seen_text:
                continue
            if any(p.source == passage.source and p.start < passage.end and passage.start < p.end for p in chosen):
                continue  # a list item inside a lead-in already quoted, or the other way round
            chosen.append(passage)
            seen_text.add(passage.terms)
            per_source[passage.source] += 1
        return chosen

    def _refusal(self, hits: Sequence[SearchHit], passages: list[Passage], scores: list[float]) -> Answer:
        """`unanswered()`, with a notice saying how far what was retrieved was from answering."""
        if not hits:
            return unanswered()
        relevance = max(hit.relevance_score for hit in hits)
        if relevance < MIN_HIT_RELEVANCE:
            why = f"the most relevant passage retrieved has relevance {relevance:.2f}, below {MIN_HIT_RELEVANCE:.2f}"
        elif not passages:
            why = "the retrieved passages hold no sentence, list item or table row that could answer it"
        else:
            best = max(range(len(passages)), key=scores.__getitem__)
            why = (
                f"its best passage is {scores[best]:.1%} likely to answer "
                f"(an answer needs {self.model.threshold:.1%}); "
                f"the most relevant passage retrieved has relevance {relevance:.2f}"
            )
        message = f"No passage of the retrieved documents answers the question: {why}."
        return unanswered().model_copy(update={"notice": Notice(code="NOT_FOUND", message=message)})


def _is_filler(sentence: str) -> bool:
    """Navigation and filler ("In the next chapter ...", "See also ...") point elsewhere, answer nothing."""
    return bool(FILLER_RE.match(sentence.lstrip("-*+>#0123456789.) ")) or POINTER_RE.search(sentence))


def _is_statement(sentence: str, headings: tuple[str, ...]) -> bool:
    """Headings and short title-like lines name a topic; they do not answer anything."""
    if sentence in headings:
        return False
    return sentence.rstrip("\"')]`*").endswith((".", "!", "?", ":")) or len(sentence.split()) >= 8
