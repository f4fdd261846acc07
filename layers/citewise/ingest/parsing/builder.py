"""The one place that turns a format's structure into `ParsedDocument.text` and its block spans.

Every parser walks its format and calls `heading` / `block` in reading order; the builder cleans the
text, tracks the heading path, joins blocks with `SEPARATOR` and records exact spans, so the block
contract the chunker relies on holds for every format by construction.
"""

from __future__ import annotations

from datetime import datetime

from citewise.domain.models import Block, ParsedDocument
from citewise.ingest.parsing.encoding import clean_text
from citewise.ingest.parsing.failures import parse_error

SEPARATOR = "\n\n"


class DocumentBuilder:
    """Accumulates blocks of one document in reading order."""

    def __init__(self, filename: str) -> None:
        self._filename = filename
        self._parts: list[str] = []
        self._length = 0
        self._blocks: list[Block] = []
        self._open_headings: list[tuple[int, str]] = []
        self._first_heading: dict[int, str] = {}

    def heading(self, title: str, level: int, *, page: int | None = None) -> None:
        """Add a heading; it closes every open heading of the same or a deeper level."""
        title = " ".join(clean_text(title).split())
        if not title:
            return
        while self._open_headings and self._open_headings[-1][0] >= level:
            self._open_headings.pop()
        self._open_headings.append((level, title))
        self._first_heading.setdefault(level, title)
        self._append(title, page=page, is_heading=True)

    def block(self, text: str, *, page: int | None = None) -> None:
        """Add a paragraph, list item, table row or code block; blank text adds nothing."""
        text = clean_text(text).strip()
        if text:
            self._append(text, page=page, is_heading=False)

    def first_heading(self, level: int) -> str | None:
        """The title of the first heading added at `level`, if any."""
        return self._first_heading.get(level)

    def build(
        self, *, title: str | None = None, page_count: int | None = None, source_date: datetime | None = None
    ) -> ParsedDocument:
        """The finished document; a document without a single block is an error, not an empty result."""
        if not self._blocks:
            raise parse_error(self._filename, "it contains no text")
        return ParsedDocument(
            text="".join(self._parts),
            blocks=tuple(self._blocks),
            title=title,
            page_count=page_count,
            source_date=source_date,
        )

    def _append(self, text: str, *, page: int | None, is_heading: bool) -> None:
        if self._parts:
            self._parts.append(SEPARATOR)
            self._length += len(SEPARATOR)
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        self._blocks.append(
            Block(
                start=start,
                end=self._length,
                heading_path=tuple(title for _, title in self._open_headings),
                page=page,
                is_heading=is_heading,
            )
        )
