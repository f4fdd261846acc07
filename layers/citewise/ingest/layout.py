"""The parsed text behind a document's citations, with its pages, sections and chunks, for a viewer.

A citation names a chunk and quotes it verbatim; a chunk is a span `[start, end)` of the parsed text. So
a viewer that has the parsed text and the chunks' spans can open a citation at its exact passage: find
the quote inside its chunk's span and highlight it, on the chunk's page.

The text is not stored apart from the original: it is parsed and chunked again, from the version that
was indexed, by the ingest pipeline's own parser limits and chunker (`Ingestor.layout`). Parsing is
deterministic, so the spans are the indexed ones unless the chunking settings changed since the
document was indexed; `indexed_layout` says whether the counts still agree (a viewer then still finds a
quote in the text, without relying on the chunk's span).

A response carries a window of the text (`offset`, at most `MAX_TEXT_CHARS` characters), so even the
largest document stays within a Lambda response (6 MB): the spans are absolute offsets, and those that
overlap the window are listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import groupby
from typing import TYPE_CHECKING, TypeVar

from pydantic import Field

from citewise.domain.errors import ConflictError
from citewise.domain.models import Block, Chunk, Document, DocumentMetadata, DocumentStatus, Frozen

if TYPE_CHECKING:
    from citewise.domain.objects import SourceObject
    from citewise.ingest.pipeline import Ingestor

_K = TypeVar("_K")
MAX_TEXT_CHARS = 400_000
"""Characters of text in one response: at most 2.4 MB as JSON, even if every one is escaped (`\\uXXXX`)."""


class PageSpan(Frozen):
    """Where one page's text is: `[start, end)` of the document's parsed text."""

    page: int = Field(ge=1)
    start: int = Field(ge=0)
    end: int = Field(ge=0)


class SectionSpan(Frozen):
    """A run of text under one heading path (outermost heading first)."""

    heading_path: tuple[str, ...]
    start: int = Field(ge=0)
    end: int = Field(ge=0)


class ChunkSpan(Frozen):
    """Where a chunk (a citation's `chunk_id`) is in the parsed text; its text is `text[start:end]`."""

    chunk_id: str
    ordinal: int = Field(ge=0)
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    page: int | None = None
    section: str | None = None


class DocumentText(Frozen):
    """A window of a document's parsed text, with the pages, sections and chunks that overlap it."""

    document_id: str
    version: str = Field(description="The stored version parsed: the one that was indexed.")
    path: str
    title: str | None
    content_type: str | None
    char_count: int = Field(ge=0, description="Characters of the whole parsed text.")
    offset: int = Field(ge=0, description="Where `text` starts in the parsed text.")
    text: str
    next_offset: int | None = Field(description="`offset` of the next window; None at the end of the text.")
    pages: list[PageSpan]
    sections: list[SectionSpan]
    chunks: list[ChunkSpan]
    indexed_layout: bool = Field(
        description="False when parsing and chunking again give other counts of characters or chunks than "
        "indexing did (the chunking settings changed since): chunk spans may then differ from the indexed "
        "chunks; a citation's quote is still verbatim in the text."
    )


def document_text(ingestor: Ingestor, obj: SourceObject, document: Document, offset: int, limit: int) -> DocumentText:
    """The window `[offset, offset + limit)` of `document`'s parsed text, from `obj`, its stored original
    at the version that was indexed (the caller checks that the version matches).

    ConflictError for a document that is not INDEXED: there is nothing a citation could point into yet.
    """
    if document.status is not DocumentStatus.INDEXED:
        raise ConflictError(
            f"the document is {document.status.value}; its text is served once it is INDEXED",
            details={"id": document.doc_id, "status": document.status.value},
        )
    parsed, chunks = ingestor.layout(obj, _chunk_metadata(document))
    end = min(offset + limit, len(parsed.text))
    return DocumentText(
        document_id=document.doc_id,
        version=obj.version,
        path=document.path,
        title=document.title,
        content_type=document.content_type,
        char_count=len(parsed.text),
        offset=offset,
        text=parsed.text[offset:end],
        next_offset=end if end < len(parsed.text) else None,
        pages=[span for span in _pages(parsed.blocks) if _overlaps(span, offset, end)],
        sections=[span for span in _sections(parsed.blocks) if _overlaps(span, offset, end)],
        chunks=[_chunk_span(chunk) for chunk in chunks if _overlaps(chunk, offset, end)],
        indexed_layout=len(parsed.text) == document.char_count and len(chunks) == document.chunk_count,
    )


def _chunk_metadata(document: Document) -> DocumentMetadata:
    """The metadata chunks carry; only the title reaches what the chunker builds (the embedding header)."""
    return DocumentMetadata(
        tenant_id=document.tenant_id,
        doc_id=document.doc_id,
        owner=document.owner,
        visibility=document.visibility,
        source=document.source,
        channel=document.channel,
        source_date=document.source_date,
        path=document.path,
        title=document.title or document.path.rsplit("/", 1)[-1],
        tags=document.tags,
        created_at=document.created_at,
        updated_at=document.updated_at,
        attributes=document.attributes,
    )


def _runs(blocks: tuple[Block, ...], key: Callable[[Block], _K]) -> Iterator[tuple[_K, int, int]]:
    """Each run of consecutive blocks sharing `key`: the key, where the run starts and ends."""
    for value, run in groupby(blocks, key=key):
        group = list(run)
        yield value, group[0].start, group[-1].end


def _pages(blocks: tuple[Block, ...]) -> list[PageSpan]:
    runs = _runs(blocks, lambda block: block.page)
    return [PageSpan(page=page, start=start, end=end) for page, start, end in runs if page is not None]


def _sections(blocks: tuple[Block, ...]) -> list[SectionSpan]:
    runs = _runs(blocks, lambda block: block.heading_path)
    return [SectionSpan(heading_path=path, start=start, end=end) for path, start, end in runs if path]


def _overlaps(span: PageSpan | SectionSpan | Chunk, start: int, end: int) -> bool:
    return span.end > start and span.start < end


def _chunk_span(chunk: Chunk) -> ChunkSpan:
    return ChunkSpan(
        chunk_id=chunk.chunk_id,
        ordinal=chunk.ordinal,
        start=chunk.start,
        end=chunk.end,
        page=chunk.page,
        section=chunk.section,
    )
