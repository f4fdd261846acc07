"""Structure-aware chunking: sections and pages first, then paragraphs, sentences, and words.

A chunk never crosses a heading or a page boundary, so its heading path and page are exact and a
citation can name them. Inside a section, whole blocks are packed up to the budget; a block too big for
the budget is cut at sentences, a sentence too big at token boundaries, and a token too big (a run with
no whitespace or punctuation) at the character bound. The budget is `max_tokens` tokens and `max_chars`
characters: tokens bound what a model reads, characters bound what a search returns (a 20 MB word is one
token). Consecutive chunks of one section share up to `overlap` tokens of whole pieces so an answer split
across them is still found. Every chunk is an exact substring `text[start:end]` of the parsed text.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Iterator
from typing import NamedTuple

from citewise.domain.errors import PayloadTooLargeError
from citewise.domain.models import Block, Chunk, DocumentMetadata, ParsedDocument
from citewise.domain.textutil import TOKEN_RE, TokenCounter, embedding_header, sentence_spans

DEFAULT_MAX_CHARS = 4000
"""Characters a chunk may hold: ten times the default token budget's usual size (about 2,000 characters
of prose), so only runs without word breaks (base64, minified code, one 20 MB "word") reach it, and the
search responses that quote chunks stay bounded (docs/security.md, "Output bounds")."""


def chunk_id(doc_id: str, ordinal: int) -> str:
    """The id of a document's chunk number `ordinal` (0-based, in reading order): ids are positions, so a
    document's chunk ids follow from its chunk count."""
    return f"{doc_id}-{ordinal:05d}"


_Row = tuple[int, int, int, Block]
"""A piece as start, end, tokens and its block."""


class _Pieces(NamedTuple):
    """A document's pieces (indivisible runs of text that fit the budget) as parallel lists.

    Lists rather than an object a piece: a document has thousands, and packing them is then bisections of
    the running token count, at C speed, rather than a Python step a piece.
    """

    starts: list[int]
    ends: list[int]
    blocks: list[Block]
    """The block each piece comes from (a block over the budget gives several pieces)."""
    cumulative: list[int]
    """`cumulative[i]`: the tokens of pieces `0..i-1`, so pieces `a..b-1` hold `cumulative[b] - cumulative[a]`."""
    sections: list[int]
    """The first piece of each section, then the number of pieces: a chunk never spans two sections."""


class Chunker:
    """Splits a parsed document into chunks of at most `max_tokens` tokens and `max_chars` characters."""

    def __init__(self, max_tokens: int = 400, overlap: int = 50, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if not 0 <= overlap < max_tokens:
            raise ValueError("chunk overlap must be at least 0 and smaller than the chunk budget")
        if max_chars < 1:
            raise ValueError("the chunk's character bound must be at least 1")
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.max_chars = max_chars

    def split(
        self, parsed: ParsedDocument, document: DocumentMetadata, *, max_chunks: int | None = None
    ) -> list[Chunk]:
        """Chunks of `parsed` carrying `document`'s metadata, in reading order.

        PayloadTooLargeError if there would be more than `max_chunks`: counted before any chunk is built,
        so a document of a million one-word sections is refused in the time its pieces take to pack.
        """
        pieces = self._pieces(parsed)
        groups = list(self._groups(pieces))
        if max_chunks is not None and len(groups) > max_chunks:
            raise PayloadTooLargeError(
                f"the document makes {len(groups)} chunks; at most {max_chunks} are accepted (CITEWISE_MAX_CHUNKS)",
                details={"chunks": len(groups), "limit": "max_chunks", "max_chunks": max_chunks},
            )
        headers: dict[tuple[str, ...], str] = {}  # a section's chunks share their embedding header
        chunks: list[Chunk] = []
        for first, stop in groups:
            start, end = pieces.starts[first], pieces.ends[stop - 1]
            block = pieces.blocks[stop - 1]  # the deepest heading path: leading headings belong to it
            path, chunk_text = block.heading_path, parsed.text[start:end]
            header = headers.get(path)
            if header is None:
                header = headers[path] = embedding_header(document.title, path)
            ordinal = len(chunks)
            chunks.append(
                Chunk(
                    chunk_id=chunk_id(document.doc_id, ordinal),
                    ordinal=ordinal,
                    text=chunk_text,
                    start=start,
                    end=end,
                    heading_path=path,
                    page=block.page,
                    content_hash=content_hash(header + chunk_text),
                    document=document,
                )
            )
        return chunks

    def _groups(self, pieces: _Pieces) -> Iterator[tuple[int, int]]:
        """Greedy packing of pieces into budget-sized groups `first..stop-1`, restarting at each section.

        A group takes every following piece of its section that still fits the budget (the first always
        does: no piece is over it); the next group starts with the previous one's overlap tail, if any.
        """
        cumulative, starts, ends = pieces.cumulative, pieces.starts, pieces.ends
        for first, section_end in itertools.pairwise(pieces.sections):
            while True:
                # `stop`: the first piece that would take the group over the budget, or the section's end.
                limit = cumulative[first] + self.max_tokens
                stop = bisect.bisect_right(cumulative, limit, first + 1, section_end + 1) - 1
                stop = min(stop, bisect.bisect_right(ends, starts[first] + self.max_chars, first, section_end))
                yield first, stop
                if stop == section_end:
                    break
                first = self._overlap_start(pieces, first, stop)

    def _overlap_start(self, pieces: _Pieces, first: int, incoming: int) -> int:
        """Where the group after pieces `first..incoming-1` starts: at its tail to repeat, else at `incoming`.

        The tail is the longest run of trailing pieces with no heading, within the overlap and leaving room
        (tokens and characters) for the incoming piece, so the next group always takes it.
        """
        cumulative = pieces.cumulative
        allowance = min(self.overlap, self.max_tokens - (cumulative[incoming + 1] - cumulative[incoming]))
        tail = max(
            bisect.bisect_left(cumulative, cumulative[incoming] - allowance, first, incoming),
            bisect.bisect_left(pieces.starts, pieces.ends[incoming] - self.max_chars, first, incoming),
        )
        for index in range(incoming - 1, tail - 1, -1):
            if pieces.blocks[index].is_heading:
                tail = index + 1
                break
        # Repeating the whole previous chunk would make the next one a superset of it.
        return incoming if tail == first else tail

    def _pieces(self, parsed: ParsedDocument) -> _Pieces:
        """The blocks as pieces, each block over the budget cut at sentences (and a sentence at tokens)."""
        text, blocks = parsed.text, list(parsed.blocks)
        counter = TokenCounter(text)
        starts, ends = [block.start for block in blocks], [block.end for block in blocks]
        tokens = counter.counts(starts, ends)
        over = [
            index
            for index, (count, start, end) in enumerate(zip(tokens, starts, ends, strict=True))
            if count > self.max_tokens or end - start > self.max_chars
        ]
        if over:
            rows = self._cut_rows(text, counter, over, list(zip(starts, ends, tokens, blocks, strict=True)))
            starts, ends = [row[0] for row in rows], [row[1] for row in rows]
            tokens, blocks = [row[2] for row in rows], [row[3] for row in rows]
        return _Pieces(starts, ends, blocks, list(itertools.accumulate(tokens, initial=0)), _section_starts(blocks))

    def _cut_rows(self, text: str, counter: TokenCounter, over: list[int], rows: list[_Row]) -> list[_Row]:
        """`rows` (start, end, tokens, block) with each row whose index is in `over` replaced by its cuts."""
        cut: list[_Row] = []
        done = 0
        for index in over:
            block = rows[index][3]
            cut += rows[done:index]
            cut += ((start, end, count, block) for start, end, count in self._cuts(text, counter, block))
            done = index + 1
        return cut + rows[done:]

    def _cuts(self, text: str, counter: TokenCounter, block: Block) -> Iterator[tuple[int, int, int]]:
        """A block over the budget as sentences, and a sentence over the budget as token windows."""
        for start, end in sentence_spans(text, block.start, block.end):
            sentence_tokens = counter.count(start, end)
            if sentence_tokens <= self.max_tokens and end - start <= self.max_chars:
                yield start, end, sentence_tokens
            else:
                yield from self._windows(text, start, end)

    def _windows(self, text: str, start: int, end: int) -> Iterator[tuple[int, int, int]]:
        """Cut a run with no usable sentence breaks into windows of at most `max_tokens` tokens and
        `max_chars` characters; a token longer than `max_chars` is cut every `max_chars` characters, each
        part counting as one token (as `TokenCounter` counts it)."""
        window_start = window_end = start
        count = 0
        for match in TOKEN_RE.finditer(text, start, end):
            token_start, token_end = match.span()
            if count and (count == self.max_tokens or token_end - window_start > self.max_chars):
                yield window_start, window_end, count
                count = 0
            while token_end - token_start > self.max_chars:
                yield token_start, token_start + self.max_chars, 1
                token_start += self.max_chars
            if not count:
                window_start = token_start
            window_end = token_end
            count += 1
        if count:
            yield window_start, window_end, count


def _section_starts(blocks: list[Block]) -> list[int]:
    """The first piece of each section, then the number of pieces (`blocks` holds each piece's block).

    A new page, or a heading after content, begins a new chunk; a heading keeps its first content.
    """
    starts = [
        index
        for index, (previous, block) in enumerate(itertools.pairwise(blocks), 1)
        if previous is not block and (previous.page != block.page or (block.is_heading and not previous.is_heading))
    ]
    return [0, *starts, len(blocks)] if blocks else [0]


def content_hash(text: str) -> str:
    """SHA-256 of the embedded text: a vector is reused exactly when its input is unchanged."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
