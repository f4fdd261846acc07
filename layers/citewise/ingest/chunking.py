"""Structure-aware chunking: sections and pages first, then paragraphs, sentences, and words.

A chunk never crosses a heading or a page boundary, so its heading path and page are exact and a
citation can name them. Inside a section, whole blocks are packed up to the token budget; a block too
big for the budget is cut at sentences, and a sentence too big at token boundaries. Consecutive chunks
of one section share up to `overlap` tokens of whole pieces so an answer split across them is still
found. Every chunk is an exact substring `text[start:end]` of the parsed text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import NamedTuple

from citewise.domain.models import Block, Chunk, DocumentMetadata, ParsedDocument
from citewise.domain.textutil import TokenCounter, embedding_text, sentence_spans, token_spans


def chunk_id(doc_id: str, ordinal: int) -> str:
    """The id of a document's chunk number `ordinal` (0-based, in reading order): ids are positions, so a
    document's chunk ids follow from its chunk count."""
    return f"{doc_id}-{ordinal:05d}"


class _Piece(NamedTuple):
    """An indivisible run of text that fits the budget (a tuple: a document has thousands)."""

    start: int
    end: int
    tokens: int
    block: Block


class Chunker:
    """Splits a parsed document into chunks of at most `max_tokens` tokens."""

    def __init__(self, max_tokens: int = 400, overlap: int = 50) -> None:
        if not 0 <= overlap < max_tokens:
            raise ValueError("chunk overlap must be at least 0 and smaller than the chunk budget")
        self.max_tokens = max_tokens
        self.overlap = overlap

    def split(self, parsed: ParsedDocument, document: DocumentMetadata) -> list[Chunk]:
        """Chunks of `parsed` carrying `document`'s metadata, in reading order."""
        chunks: list[Chunk] = []
        for pieces in self._groups(parsed):
            start, end = pieces[0].start, pieces[-1].end
            block = pieces[-1].block  # the deepest heading path: leading headings belong to it
            chunk_text = parsed.text[start:end]
            chunks.append(
                Chunk(
                    chunk_id=chunk_id(document.doc_id, len(chunks)),
                    ordinal=len(chunks),
                    text=chunk_text,
                    start=start,
                    end=end,
                    heading_path=block.heading_path,
                    page=block.page,
                    content_hash=content_hash(embedding_text(document.title, block.heading_path, chunk_text)),
                    document=document,
                )
            )
        return chunks

    def _groups(self, parsed: ParsedDocument) -> Iterator[list[_Piece]]:
        """Greedy packing of pieces into budget-sized groups, restarting at each section or page."""
        current: list[_Piece] = []
        size = 0
        for piece in self._pieces(parsed):
            if current and _starts_section(current[-1].block, piece.block):
                yield current
                current, size = [], 0
            elif current and size + piece.tokens > self.max_tokens:
                yield current
                current = self._overlap_tail(current, piece.tokens)
                size = sum(p.tokens for p in current)
            current.append(piece)
            size += piece.tokens
        if current:
            yield current

    def _overlap_tail(self, group: list[_Piece], incoming: int) -> list[_Piece]:
        """The trailing pieces of `group` to repeat, within the overlap and leaving room for `incoming`."""
        allowance = min(self.overlap, self.max_tokens - incoming)
        tail: list[_Piece] = []
        used = 0
        for piece in reversed(group):
            if piece.block.is_heading or used + piece.tokens > allowance:
                break
            tail.insert(0, piece)
            used += piece.tokens
        # Repeating the whole previous chunk would make the next one a superset of it.
        return tail if len(tail) < len(group) else []

    def _pieces(self, parsed: ParsedDocument) -> Iterator[_Piece]:
        text = parsed.text
        counter = TokenCounter(text)
        for block in parsed.blocks:
            tokens = counter.count(block.start, block.end)
            if tokens <= self.max_tokens:
                yield _Piece(block.start, block.end, tokens, block)
                continue
            for start, end in sentence_spans(text, block.start, block.end):
                sentence_tokens = counter.count(start, end)
                if sentence_tokens <= self.max_tokens:
                    yield _Piece(start, end, sentence_tokens, block)
                else:
                    yield from self._windows(text, start, end, block)

    def _windows(self, text: str, start: int, end: int, block: Block) -> Iterator[_Piece]:
        """Cut a run with no usable sentence breaks into windows of `max_tokens` tokens."""
        window_start: int | None = None
        window_end = start
        count = 0
        for token_start, token_end in token_spans(text[start:end]):
            if window_start is None:
                window_start = start + token_start
            window_end = start + token_end
            count += 1
            if count == self.max_tokens:
                yield _Piece(window_start, window_end, count, block)
                window_start, count = None, 0
        if window_start is not None:
            yield _Piece(window_start, window_end, count, block)


def _starts_section(previous: Block, block: Block) -> bool:
    """A new page, or a heading after content, begins a new chunk; a heading keeps its first content."""
    if previous is block:
        return False
    if previous.page != block.page:
        return True
    return block.is_heading and not previous.is_heading


def content_hash(text: str) -> str:
    """SHA-256 of the embedded text: a vector is reused exactly when its input is unchanged."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
