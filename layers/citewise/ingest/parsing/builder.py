"""The one place that turns a format's structure into `ParsedDocument.text` and its block spans.

Every parser walks its format and calls `heading` / `block` in reading order; the builder cleans the
text, tracks the heading path, joins blocks with `SEPARATOR` and records exact spans, so the block
contract the chunker relies on holds for every format by construction. It also spends the parse's
`ParseBudget` as the text grows, so every format stops at the same limits.

Headings are labels as well as text: the heading path rides on every chunk of a section and the title on
every chunk of the document (and into every search hit), so both keep at most `MAX_LABEL_CHARS`
characters; the heading's own block keeps its whole text.
"""

from __future__ import annotations

from datetime import datetime

from citewise.domain.models import Block, ParsedDocument
from citewise.ingest.parsing.encoding import clean_text
from citewise.ingest.parsing.failures import parse_error
from citewise.ingest.parsing.limits import ParseBudget

SEPARATOR = "\n\n"
MAX_LABEL_CHARS = 200
"""Characters of a heading in a heading path, and of a title: a heading, not a paragraph set as one."""


def label(text: str) -> str:
    """`text` as a heading path entry or title: whitespace collapsed, at most `MAX_LABEL_CHARS` characters."""
    return " ".join(text[: 4 * MAX_LABEL_CHARS].split())[:MAX_LABEL_CHARS].rstrip()


class DocumentBuilder:
    """Accumulates blocks of one document in reading order."""

    def __init__(self, filename: str, budget: ParseBudget | None = None) -> None:
        self._filename = filename
        self._budget = budget
        self._parts: list[str] = []
        self._length = 0
        self._blocks: list[Block] = []
        self._open_headings: list[tuple[int, str]] = []
        self._path: tuple[str, ...] = ()  # the open headings' titles: one tuple shared by a section's blocks
        self._first_heading: dict[int, str] = {}

    def heading(self, title: str, level: int, *, page: int | None = None) -> None:
        """Add a heading; it closes every open heading of the same or a deeper level."""
        title = " ".join(clean_text(title).split())
        if not title:
            return
        while self._open_headings and self._open_headings[-1][0] >= level:
            self._open_headings.pop()
        self._open_headings.append((level, label(title)))
        self._path = tuple(title for _, title in self._open_headings)
        self._first_heading.setdefault(level, label(title))
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
            title=label(title) if title is not None else None,
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
        if self._budget is not None:
            self._budget.spend(self._length, blocks=len(self._blocks) + 1)
        self._blocks.append(
            Block(
                start=start,
                end=self._length,
                heading_path=self._path,
                page=page,
                is_heading=is_heading,
            )
        )
