"""Markdown: headings give structure; everything else is kept verbatim.

Only heading markers are stripped. Emphasis, links and list markers stay as written: removing them
safely needs a full CommonMark parser, and the text reads fine to both people and embedding models.
"""

from __future__ import annotations

import re
from datetime import datetime

from citewise.domain.models import ParsedDocument
from citewise.domain.provenance import parse_instant
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.failures import parse_error
from citewise.ingest.parsing.limits import ParseBudget

# Every pattern here is applied to whole lines of tenant text, so none may backtrack over a line: a
# lazy `(.*?)` before `[ \t]*$`, or one character class on both sides of a literal, is quadratic in the
# line's length (a 10,000-space heading took 1.5 s, a 3 MB one days). What a pattern cannot say without
# that (the closing sequence of an ATX heading, a thematic break, a table delimiter row) is str methods.
_ATX_OPEN = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_TABLE_ROW = re.compile(r"^ {0,3}\|")
_FRONT_MATTER_FENCE = "---"
_FRONT_MATTER_END = ("---", "...")
_FRONT_MATTER_ENTRY = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_-]*):(?P<value>.*)")
_FRONT_MATTER_DATE_KEYS = ("updated", "last_modified", "lastmod", "modified", "date")
"""Front matter keys of the content's date, most specific first (`lastmod` is Hugo's)."""


def parse_markdown(text: str, filename: str, budget: ParseBudget | None = None) -> ParsedDocument:
    """Parse decoded Markdown (CommonMark/GFM subset); the title is the first level-1 heading."""
    builder = DocumentBuilder(filename, budget)
    reader = _MarkdownReader(builder)
    reader.read(text.split("\n"))
    return builder.build(title=builder.first_heading(1), source_date=_front_matter_date(reader.front_matter, filename))


def _front_matter_date(lines: list[str], filename: str) -> datetime | None:
    """The first of `_FRONT_MATTER_DATE_KEYS` (`updated` ... `date`) in YAML front matter (top-level
    `key: value` lines, quotes optional).

    The author wrote it, so a value that is not an ISO-8601 date fails the document with the reason."""
    values: dict[str, str] = {}
    for line in lines:
        match = _FRONT_MATTER_ENTRY.match(line)
        if match:
            values.setdefault(match["key"].lower(), match["value"].strip().strip("'\""))
    for key in _FRONT_MATTER_DATE_KEYS:
        if values.get(key):
            try:
                return parse_instant(values[key])
            except ValueError:
                raise parse_error(
                    filename, f"front matter '{key}' is not a date: {values[key]!r} (use ISO 8601, e.g. 2026-03-03)"
                ) from None
    return None


class _MarkdownReader:
    def __init__(self, builder: DocumentBuilder) -> None:
        self._builder = builder
        self._pending: list[str] = []
        self._pending_is_paragraph = False
        self._fence: str | None = None
        self._fenced: list[str] = []
        self.front_matter: list[str] = []

    def read(self, lines: list[str]) -> None:
        for line in self._skip_front_matter(lines):
            self._line(line)
        if self._fence is not None:
            # An unclosed fence runs to the end of the document, as in CommonMark.
            self._builder.block("\n".join(self._fenced))
        self._flush()

    def _skip_front_matter(self, lines: list[str]) -> list[str]:
        # YAML front matter would otherwise read as a thematic break plus a setext heading.
        if not lines or lines[0].rstrip() != _FRONT_MATTER_FENCE:
            return lines
        for end, line in enumerate(lines[1:], start=1):
            if line.rstrip() in _FRONT_MATTER_END:
                self.front_matter = lines[1:end]
                self._builder.block("\n".join(self.front_matter))
                return lines[end + 1 :]
        return lines

    def _line(self, line: str) -> None:
        if self._fence is not None:
            self._fenced.append(line)
            if _closes_fence(line, self._fence):
                self._builder.block("\n".join(self._fenced))
                self._fence = None
            return
        if not line.strip():
            self._flush()
            return
        if fence := _FENCE_OPEN.match(line):
            self._flush()
            self._fence = fence.group(1)
            self._fenced = [line]
            return
        if atx := _atx_heading(line):
            self._flush()
            self._builder.heading(atx[1], atx[0])
            return
        if self._pending_is_paragraph and (setext := _SETEXT_UNDERLINE.match(line)):
            level = 1 if setext.group(1).startswith("=") else 2
            self._builder.heading(" ".join(self._pending), level)
            self._pending = []
            self._pending_is_paragraph = False
            return
        if _is_thematic_break(line):
            self._flush()
            return
        if _TABLE_ROW.match(line):
            self._flush()
            if not _is_table_delimiter(line):
                self._builder.block(line)
            return
        if _LIST_ITEM.match(line):
            self._flush()
            self._pending = [line]
            return
        if not self._pending:
            self._pending_is_paragraph = True
        # A non-blank line continues the open paragraph or list item (CommonMark "lazy continuation").
        self._pending.append(line)

    def _flush(self) -> None:
        if self._pending:
            self._builder.block("\n".join(self._pending))
        self._pending = []
        self._pending_is_paragraph = False


def _atx_heading(line: str) -> tuple[int, str] | None:
    """An ATX heading's level and text: `#`s, then the text without a closing run of `#`s after a space."""
    opening = _ATX_OPEN.match(line)
    if opening is None:
        return None
    text = line[opening.end() :].strip(" \t")
    unclosed = text.rstrip("#")
    if unclosed != text and unclosed[-1:] in (" ", "\t"):
        text = unclosed.rstrip(" \t")
    return len(opening.group(1)), text


def _is_thematic_break(line: str) -> bool:
    """Up to three spaces, then three or more of one of `-*_`, spaces and tabs between and after."""
    body = line.lstrip(" ")
    if len(line) - len(body) > 3 or body[:1] not in ("-", "*", "_"):
        return False
    return body.count(body[0]) >= 3 and not body.strip(f" \t{body[0]}")


def _is_table_delimiter(line: str) -> bool:
    """A GFM table's delimiter row: only `|`, `:`, `-`, spaces and tabs, and a `-` among them."""
    return "-" in line and not line.strip(" \t|:-")


def _closes_fence(line: str, fence: str) -> bool:
    # A closing fence repeats the opening character at least as many times, and nothing else.
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3 and stripped.startswith(fence) and stripped == fence[0] * len(stripped)
    )
