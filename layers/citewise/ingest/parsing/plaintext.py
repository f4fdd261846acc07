"""Plain text: one block per paragraph, paragraphs being runs of lines between blank lines."""

from __future__ import annotations

from collections.abc import Iterator

from citewise.domain.models import ParsedDocument
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.limits import ParseBudget


def split_paragraphs(text: str) -> Iterator[str]:
    """Yield the runs of non-blank lines of `text`, each joined back with "\\n"."""
    lines: list[str] = []
    for line in text.split("\n"):
        if line.strip():
            lines.append(line)
        elif lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def parse_plaintext(text: str, filename: str, budget: ParseBudget | None = None) -> ParsedDocument:
    """Parse decoded plain text; it has no headings and no title."""
    builder = DocumentBuilder(filename, budget)
    for paragraph in split_paragraphs(text):
        builder.block(paragraph)
    return builder.build()
