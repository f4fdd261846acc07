"""Small text primitives shared by chunking, the hashing embedder and the extractive synthesizer.

Kept dependency-free and deterministic: the same input gives the same tokens on every machine, which
is what makes content hashes and the hashing embedder stable.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import operator
import re
from collections.abc import Iterable, Iterator

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
WORD_RE = re.compile(r"[^\W_]+")  # letters and digits: underscores separate words, as in FTS5
# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace, or at a
# blank line. A single newline is not a break: pdf and plain text wrap lines inside sentences.
SENTENCE_END_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n\s*\n")

MAX_QUOTE_CHARS = 600

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just me more most my no nor
    not now of off on once only or other our ours out over own same she should so some such than that
    the their theirs them then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours""".split()
)


# Counting without the regular expression: every character is classed as a word character (w), a space
# ( ) or a mark (m: neither, so a token of its own), and a token is a mark or a run of word characters.
# The classes are then rewritten so that every character that starts a token reads `T` (a mark, or a word
# character after a space or a mark): a span's tokens are one `bytes.count` of `T`, plus one when the span
# starts inside a word. Same count as `TOKEN_RE`, many times faster; chunking counts every character of
# every upload, and a document's blocks are counted in one pass at C speed (`TokenCounter.counts`).
_WORD, _MARK, _START = b"w", b"m", b"T"


def _character_class(character: str) -> str:
    return "w" if re.fullmatch(r"\w", character) else " " if re.fullmatch(r"\s", character) else "m"


_ASCII_CLASSES = bytes(ord(_character_class(chr(code))) if code < 128 else _MARK[0] for code in range(256))
_MARKS_TO_STARTS = bytes.maketrans(_MARK, _START)


class _AsciiStandIns(dict[int, str]):
    """For each character beyond ASCII met so far, an ASCII character of its class: `a`, a space or `!`."""

    def __missing__(self, code: int) -> str:
        stand_in = {"w": "a", " ": " ", "m": "!"}[_character_class(chr(code))]
        self[code] = stand_in
        return stand_in


_STAND_INS = _AsciiStandIns()


def _stand_in_run(error: UnicodeError) -> tuple[str, int]:
    """The ASCII encoder's error handler for `_classes`: a run of characters beyond ASCII, stood in for."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return error.object[error.start : error.end].translate(_STAND_INS), error.end


_STAND_IN_ERRORS = "citewise.token-class-stand-ins"
codecs.register_error(_STAND_IN_ERRORS, _stand_in_run)


def _classes(text: str) -> bytes:
    """One class byte per character of `text`.

    Characters beyond ASCII are replaced by ASCII characters of their class as the text is encoded, a run
    at a time (the encoder calls `_stand_in_run` once a run), so a text in a Latin script, mostly ASCII,
    keeps the encoder's speed.
    """
    return text.encode("ascii", _STAND_IN_ERRORS).translate(_ASCII_CLASSES)


def count_tokens(text: str) -> int:
    """Approximate model tokens: words and punctuation marks, a close lower bound of word pieces."""
    return TokenCounter(text).count(0, len(text))


class TokenCounter:
    """Counts the tokens of spans of one text, classifying the text once rather than once a span."""

    __slots__ = ("_starts",)

    def __init__(self, text: str) -> None:
        classes = _classes(text)
        self._starts = classes.replace(b" w", b" T").replace(b"mw", b"mT").translate(_MARKS_TO_STARTS)

    def count(self, start: int, end: int) -> int:
        """The tokens of `text[start:end]`: `count_tokens` of that slice, without making it."""
        return self._starts.count(_START, start, end) + self._starts.startswith(_WORD, start, end)

    def counts(self, starts: list[int], ends: list[int]) -> list[int]:
        """`count` of every span `(starts[i], ends[i])`, mapped at C speed (a document has thousands)."""
        tokens = map(self._starts.count, itertools.repeat(_START), starts, ends)
        inside_a_word = map(self._starts.startswith, itertools.repeat(_WORD), starts, ends)
        return list(map(operator.add, tokens, inside_a_word))


def token_spans(text: str) -> Iterator[tuple[int, int]]:
    """Start/end offsets of each token, for cutting text at token boundaries."""
    for match in TOKEN_RE.finditer(text):
        yield match.start(), match.end()


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Offsets of the sentences in `text[start:end]`, stripped of surrounding whitespace."""
    stop = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    cursor = start
    for match in SENTENCE_END_RE.finditer(text, start, stop):
        _append_stripped(text, cursor, match.start() + len(match.group(0).rstrip()), spans)
        cursor = match.end()
    _append_stripped(text, cursor, stop, spans)
    return spans


def _append_stripped(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    span = stripped_span(text, start, end)
    if span:
        spans.append(span)


def stripped_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """`(start, end)` without the whitespace at either end of `text[start:end]`; None if that is all it holds."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light English stemmer: enough to match `documents`/`document` without a dependency.

    Cached: a corpus repeats a few thousand words, and ingest stems every word of every chunk (the hashing
    embedder and the keyword index each once), which made this loop most of a hashing ingest's time.
    """
    word = word.casefold()
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + replacement
    return word


def content_terms(text: str) -> list[str]:
    """Stemmed, lower-cased words without stopwords or single characters, in order."""
    # casefold, not lower: it folds as SQLite's unicode61 tokenizer does (final sigma, for one).
    return [stem(w) for w in WORD_RE.findall(text.casefold()) if w not in STOPWORDS and len(w) > 1]


# What an answer must not pass on from a document: characters that are not text but change how the text
# around them is shown. The bidirectional embeddings, overrides and isolates and the direction marks
# (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) reorder what a reader sees ("evil\u202efdp.exe"
# shows as "evilexe.pdf"): removed. C0 controls but tab and newline, DEL and the C1 controls move a
# terminal's cursor or start escape sequences (U+009B is a CSI): each becomes a space, so the words on
# either side stay apart.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The bidirectional controls: what the answers remove and the CLI escapes."""
_BIDI_CONTROL_RE = re.compile(f"[{BIDI_CONTROLS}]")
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def neutralise_display_controls(text: str) -> str:
    """`text` without bidirectional controls and with every other control but tab and newline a space.

    For text an answer shows a reader (quotes of documents, a model's wording): a document must not be
    able to reorder or hide what the reader sees, nor drive their terminal.
    """
    return _CONTROL_RE.sub(" ", _BIDI_CONTROL_RE.sub("", text))


STEM_PREFIX = 5
"""Words sharing a prefix this long, one the start of the other, are one word (`rotat`/`rotation`): the
light `stem` leaves such pairs apart."""


def shared_terms(wanted: Iterable[str], terms: Iterable[str]) -> set[str]:
    """The words of `wanted` found among `terms`, a shared `STEM_PREFIX`-long prefix counting as a match.

    Linear in the two: `terms` are bucketed by their first `STEM_PREFIX` characters, so a wanted word is
    compared only with the few terms that could be its prefix or extension, not with every term (a long
    question against every sentence of every hit made that quadratic).
    """
    exact = set(terms)
    by_prefix: dict[str, list[str]] = {}
    for term in exact:
        if len(term) >= STEM_PREFIX:
            by_prefix.setdefault(term[:STEM_PREFIX], []).append(term)
    return {
        want
        for want in wanted
        if want in exact
        or (
            len(want) >= STEM_PREFIX
            and any(t.startswith(want) or want.startswith(t) for t in by_prefix.get(want[:STEM_PREFIX], ()))
        )
    }


def word_prefix(sentence: str, max_chars: int = MAX_QUOTE_CHARS) -> str:
    """The sentence, or its longest prefix of whole words within `max_chars` (a quote stays verbatim)."""
    if len(sentence) <= max_chars:
        return sentence
    cut = sentence.rfind(" ", 0, max_chars)
    return sentence[: cut if cut > 0 else max_chars].rstrip()


def embedding_text(title: str, heading_path: tuple[str, ...], text: str) -> str:
    """The text that is embedded: a context header, then the chunk itself (BM25 reads `keyword_text`).

    The header (document title and heading path) lets a chunk that never repeats its section's subject
    still match questions about it.
    """
    return embedding_header(title, heading_path) + text


def embedding_header(title: str, heading_path: tuple[str, ...]) -> str:
    """What `embedding_text` puts before a chunk's text: the same for every chunk of one section."""
    header = heading_text(title, heading_path)
    return f"{header}\n\n" if header else ""


def heading_text(title: str, heading_path: tuple[str, ...]) -> str:
    """The document title and the chunk's heading path (the title not repeated): `Title > Section`."""
    path = [h for h in heading_path if h != title]
    return " > ".join([title, *path]) if title else " > ".join(path)


HEADING_WEIGHT = 2
"""How many times a word of the title or heading path counts in the keyword text (see `keyword_text`)."""


def keyword_text(title: str, heading_path: tuple[str, ...], text: str) -> str:
    """The text both keyword indexes rank a chunk by: its heading line `HEADING_WEIGHT` times, then the chunk.

    A word of the title or a section heading says more about a chunk than one in its running text. The
    weight is given by repeating the heading (index-time boosting: BM25 then reads a weighted term
    frequency and length, as BM25F does) rather than by a second field boosted at query time: OpenSearch
    counts every analysed term of every field queried against `max_clause_count` (1,024), and a second
    field would double what a long question spends (`citewise.query.retrieval.MAX_KEYWORD_CHARS`).
    """
    header = heading_text(title, heading_path)
    return "\n".join([*([header] * HEADING_WEIGHT if header else []), text])
