"""Answer quality on SQuAD 2.0, measured from outside: `citewise eval --answers`.

Each paragraph of a SQuAD-format file becomes one Markdown document (`# article title`, then the
paragraph), ingested by the same pipeline as any document into a throwaway home with the configured
embedder. Every question is then asked through `answer_question`, the function `citewise query` calls,
with the request `citewise query` sends by default (top 5, routing on), and its answer is scored
against the gold answers:

(a) contains gold: an answerable question whose answer contains one of its gold answers;
(b) unanswerable refused: an unanswerable question answered with no citation (the answer says it found
    nothing);
(c) wrongly refused: an answerable question answered with no citation;
(d) citation precision: over the answered answerable questions, the share of citations whose cited
    chunk contains a gold answer (in its text, not in its headings: the article's title is in every
    chunk).

Texts are compared as SQuAD's official script normalises them (lower case, no punctuation, no articles,
single spaces), with the answer's `[n]` markers removed first, and a gold answer must match whole words
("1" is not in "1066"). Containment, not SQuAD's exact match or F1: a quoting answerer answers with
sentences, never with the span alone, so exact match would score every answer zero. A longer answer
contains more by chance, so the mean answer length is reported beside it.

The split into `tune` and `check` is by article, by a rule that needs no list: an article is in `tune`
when the first byte of the SHA-256 of its title is even. The bundled sample and a full file (the
official dev-v2.0.json) are split alike. Answerers are tuned on `tune` and confirmed on `check`.
Whatever the split asked, every paragraph of the file is ingested: a question of either part meets the
same corpus, so its figures do not depend on which part was asked for.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import random
import re
import statistics
import string
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from citewise.domain.errors import ValidationError
from citewise.domain.models import Answer, Chunk, SearchRequest
from citewise.ports.synthesizer import MARKER_RE
from citewise.query.answering import answer_question
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings
from citewise_local import evaluation
from citewise_local.progress import Bars

Split = Literal["tune", "check"]
SPLITS: tuple[Split, ...] = ("tune", "check")
LIMIT_SEED = 26
"""The seed of the questions `--limit` keeps (a sample spread over every article, the same on every run)."""


@dataclass(frozen=True)
class Question:
    """One SQuAD question; `answers` empty: unanswerable."""

    question_id: str
    article: str
    text: str
    answers: tuple[str, ...]

    @property
    def answerable(self) -> bool:
        return bool(self.answers)

    @property
    def split(self) -> Split:
        return split_of(self.article)


@dataclass(frozen=True)
class Squad:
    """A SQuAD-format file: its paragraphs as a corpus (id -> (title, text)) and its questions in order."""

    name: str
    articles: int
    corpus: dict[str, tuple[str, str]]
    questions: list[Question]


@dataclass(frozen=True)
class Scored:
    """One question's answer and how it scored."""

    question: Question
    answer: str
    refused: bool
    contains_gold: bool
    citations: int
    citations_with_gold: int
    latency_ms: float


# --- loading -----------------------------------------------------------------------------------


def split_of(article: str) -> Split:
    """`tune` or `check`, from the article's title alone (module doc)."""
    return "tune" if hashlib.sha256(article.encode("utf-8")).digest()[0] % 2 == 0 else "check"


def load_squad(path: Path) -> Squad:
    """Read a file in SQuAD 2.0's official format (`{"data": [{"title", "paragraphs": [{"context",
    "qas"}]}]}`), xz-compressed when its name ends in `.xz`."""
    try:
        raw = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
        data = json.loads(raw)["data"]
        corpus: dict[str, tuple[str, str]] = {}
        questions = []
        for article in data:
            title = str(article["title"])
            for number, paragraph in enumerate(article["paragraphs"]):
                corpus[f"{title}-{number:03d}"] = (title.replace("_", " "), str(paragraph["context"]))
                questions += [_question(title, qa) for qa in paragraph["qas"]]
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path} is not a SQuAD file: {exc}") from exc
    except KeyError as exc:
        raise ValidationError(f"{path} is not a SQuAD file: no {exc} where the format has one") from exc
    except TypeError as exc:  # a list where the format has an object, or the other way round
        raise ValidationError(f"{path} is not a SQuAD file: {exc}") from exc
    return Squad(path.name, len(data), corpus, questions)


def _question(title: str, qa: Mapping[str, Any]) -> Question:
    # SQuAD 2.0 marks an unanswerable question `is_impossible` and gives it no answers (its
    # `plausible_answers` are wrong on purpose).
    answers = () if qa.get("is_impossible") else tuple(dict.fromkeys(str(a["text"]) for a in qa["answers"]))
    return Question(str(qa["id"]), title, str(qa["question"]), answers)


def select(questions: Sequence[Question], split: Split | None, limit: int | None) -> list[Question]:
    """The questions of `split` (None: all), at most `limit` of them drawn evenly at random (a fixed seed)
    and kept in file order."""
    chosen = [q for q in questions if split is None or q.split == split]
    if limit is not None and limit < len(chosen):
        kept = sorted(random.Random(LIMIT_SEED).sample(range(len(chosen)), limit))  # noqa: S311 - a sample
        chosen = [chosen[i] for i in kept]
    return chosen


# --- scoring -----------------------------------------------------------------------------------

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize(text: str) -> str:
    """SQuAD's `normalize_answer`: lower case, punctuation removed, articles removed, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def contains(text: str, golds: Iterable[str]) -> bool:
    """Whether `text` contains one of `golds` as whole words, both normalised (`normalize`); `[n]`
    markers are not part of an answer's text."""
    padded = f" {normalize(MARKER_RE.sub(' ', text))} "
    return any(gold and f" {gold} " in padded for gold in map(normalize, golds))


def score(question: Question, answer: Answer, latency_ms: float) -> Scored:
    """The answer to `question` scored: refused when it cites nothing; the rest only for an answerable one."""
    refused = not answer.citations
    golds = question.answers
    cited = [_content(answer.sources[c.source - 1].chunk) for c in answer.citations]
    return Scored(
        question=question,
        answer=answer.answer,
        refused=refused,
        contains_gold=bool(golds) and not refused and contains(answer.answer, golds),
        citations=len(cited),
        citations_with_gold=sum(contains(text, golds) for text in cited) if golds else 0,
        latency_ms=latency_ms,
    )


def _content(chunk: Chunk) -> str:
    """A chunk's text without its heading lines: every chunk of an article holds the article's title,
    which is sometimes a gold answer ("Scottish Parliament"), and citing a title is no evidence."""
    return "\n".join(line for line in chunk.text.splitlines() if line.strip() not in chunk.heading_path)


def summary(results: Sequence[Scored]) -> dict[str, Any]:
    """The four measures (rates, None without a denominator), the counts they come from, and the mean
    answer length in words of the answered questions."""
    answerable = [r for r in results if r.question.answerable]
    unanswerable = [r for r in results if not r.question.answerable]
    answered = [r for r in answerable if not r.refused]
    counts = {
        "contains_gold": sum(r.contains_gold for r in answerable),
        "unanswerable_refused": sum(r.refused for r in unanswerable),
        "wrongly_refused": len(answerable) - len(answered),
        "answered_answerable": len(answered),
        "citations": sum(r.citations for r in answered),
        "citations_with_gold": sum(r.citations_with_gold for r in answered),
    }
    words = [len(MARKER_RE.sub(" ", r.answer).split()) for r in results if not r.refused]
    return {
        "questions": len(results),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "contains_gold": _rate(counts["contains_gold"], len(answerable)),
        "unanswerable_refused": _rate(counts["unanswerable_refused"], len(unanswerable)),
        "wrongly_refused": _rate(counts["wrongly_refused"], len(answerable)),
        "citation_precision": _rate(counts["citations_with_gold"], counts["citations"]),
        "answer_words": round(statistics.fmean(words), 1) if words else None,
        "counts": counts,
    }


def row(result: Scored) -> dict[str, Any]:
    """One question's line of `--per-query`: the question, its gold answers, the answer and its scores."""
    question = result.question
    return {
        "id": question.question_id,
        "split": question.split,
        "article": question.article,
        "question": question.text,
        "gold": list(question.answers),
        "answer": result.answer,
        "refused": result.refused,
        "contains_gold": result.contains_gold,
        "citations": result.citations,
        "citations_with_gold": result.citations_with_gold,
        "latency_ms": round(result.latency_ms, 1),
    }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


# --- running -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What one run measured: the ingest's wall time, the embedder that ran, each question's result."""

    ingest_s: float
    embedder: str
    results: list[Scored]


def run(settings: Settings, squad: Squad, questions: Sequence[Question], top_k: int, bars: Bars) -> Run:
    """Ingest `squad`'s paragraphs into a throwaway home and ask `questions` as `citewise query --top-k`
    does."""
    with tempfile.TemporaryDirectory(prefix="citewise-answers-") as home:
        services = build_services(settings.model_copy(update={"home": Path(home)}))
        try:
            ingest_s, _ = evaluation.ingest(services, evaluation.Dataset(squad.name, squad.corpus, {}, {}), bars)
            results = []
            for question in bars.items(questions, len(questions), "questions", "q"):
                started = time.perf_counter()
                request = SearchRequest(query=question.text, top_k=top_k)
                answer = answer_question(services.retriever, services.synthesizer, evaluation.CALLER, request)
                results.append(score(question, answer, (time.perf_counter() - started) * 1000))
            return Run(ingest_s, services.embedder.name, results)
        finally:
            services.close()


def report(
    squad: Squad, source: str, split: Split | None, measured: Run, settings: Settings, top_k: int
) -> dict[str, Any]:
    """The `--json` object: what ran on which data, the measures per part asked (`tune` and `check`
    beside `all` when no split was asked), and the time."""
    asked: list[str] = [split] if split is not None else [*SPLITS, "all"]
    parts = {name: [r for r in measured.results if name in ("all", r.question.split)] for name in asked}
    latencies = [r.latency_ms for r in measured.results]
    return {
        "mode": "answers",
        "data": {"file": source, "articles": squad.articles, "paragraphs": len(squad.corpus)},
        "embedder": measured.embedder,
        "synthesizer": settings.synthesizer,
        "search_mode": settings.search_mode,
        "top_k": top_k,
        "splits": {name: summary(results) for name, results in parts.items()},
        "ingest_s": round(measured.ingest_s, 1),
        "question_p50_ms": round(statistics.median(latencies), 1),
        "question_p95_ms": round(evaluation.p95(latencies), 1),
    }
