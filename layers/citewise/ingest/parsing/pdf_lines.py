"""Paragraphs from the geometry of a PDF page's lines, their lines joined, and the PDF date format.

A PDF's text layer has no paragraphs, only glyphs at positions. Within a paragraph, consecutive lines
sit one line pitch apart; a paragraph break, a heading or a list item adds vertical space. So a line
starts a new paragraph when it sits lower under the previous line than the page's usual pitch, or when
it jumps up (a new column, a footnote read out of order). A paragraph's lines are then joined into the
text a quote reads (`join_lines`): the page's line breaks are typesetting, not the author's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from statistics import median
from typing import NamedTuple

# A step more than this many times the page's usual pitch breaks the paragraph. Body text is set at
# 1.1-1.3 times its font size and a paragraph gap adds at least a third of a line, so 1.25 keeps a
# paragraph whole while catching the smallest gaps word processors use.
_PITCH_FACTOR = 1.25
# A step of more than 1.5 font heights is a gap whatever the page's usual pitch; this catches pages
# whose lines are mostly one-line paragraphs (lists, headings), where the usual step is the gap itself.
_HEIGHT_FACTOR = 1.5
# PDF dates: D:YYYYMMDDHHmmSSOHH'mm' with every part after the year optional.
_PDF_DATE = re.compile(
    r"(?:D:)?(?P<year>\d{4})(?P<month>\d{2})?(?P<day>\d{2})?(?P<hour>\d{2})?(?P<minute>\d{2})?(?P<second>\d{2})?"
    r"(?:(?P<zulu>Z)(?:00'?(?:00'?)?)?|(?P<sign>[+-])(?P<tz_hour>\d{2})'?(?:(?P<tz_minute>\d{2})'?)?)?\s*$"
)


# A line that starts a list item keeps its line break: a bullet, or "1." / "2)" / "a)" and a space.
_BULLETS = frozenset("•◦▪‣·–-*")
_ITEM_NUMBER = re.compile(r"(?:[0-9]{1,3}[.)]|[a-z]\))[ \t]")
_SHORT_LINE = 0.6


class Line(NamedTuple):
    """One line of a page's text and the vertical extent of its first character (PDF points, y up);
    `None` when PDFium could not place it."""

    text: str
    bottom: float | None
    top: float | None


def paragraphs(lines: list[Line]) -> Iterator[list[str]]:
    """Group a page's lines, in reading order, into paragraphs by the vertical steps between them."""
    pitch = _usual_pitch(lines)
    paragraph: list[str] = []
    previous: Line | None = None
    for line in lines:
        if paragraph and previous is not None and _breaks(previous, line, pitch):
            yield paragraph
            paragraph = []
        paragraph.append(line.text)
        previous = line
    if paragraph:
        yield paragraph


def join_lines(lines: list[str]) -> str:
    """A paragraph's lines as one text: joined by a space, a word hyphenated at a line end made whole
    ("idempo-" "tent" -> "idempotent"), any other hyphen kept ("--max-" "number" -> "--max-number"); a
    list item, and the line after one the author ended early, keep their line break.

    A hyphen is dropped only between letters of a plain word and a lowercase continuation, which is what
    hyphenation breaks; a compound split at its own hyphen ("well-" "known") then reads "wellknown", the
    price of making every hyphenated word searchable whole. A line ended early is one shorter than
    `_SHORT_LINE` of the paragraph's longest: wrapped prose fills its lines but the last, so such a line
    is a run-in heading ("What runs where" above its text) or a deliberate break. PDFium's own join of
    hyphenated lines leaves "\\n" inside one line (`citewise.ingest.parsing.pdf`): read as a line end too.
    """
    split = [part for text in lines for part in text.split("\n")]
    short = _SHORT_LINE * max(map(len, split), default=0)
    parts: list[str] = []
    for previous, line in zip([None, *split], split, strict=False):
        if previous is None:
            parts.append(line)
        elif _starts_item(line) or len(previous) < short:
            parts += ("\n", line)
        elif previous.endswith("-"):
            word = previous[previous.rfind(" ") + 1 : -1]
            if word.isalpha() and line[:1].islower():
                parts[-1] = parts[-1][:-1]
            parts.append(line)
        else:
            parts += (" ", line)
    return "".join(parts)


def _starts_item(line: str) -> bool:
    return (line[:1] in _BULLETS and line[1:2] in (" ", "\t")) or _ITEM_NUMBER.match(line) is not None


def _step(upper: Line, lower: Line) -> float | None:
    """How far `lower` sits under `upper`, negative when it is higher on the page."""
    if upper.bottom is None or lower.bottom is None:
        return None
    return upper.bottom - lower.bottom


def _height(line: Line) -> float:
    return (line.top - line.bottom) if line.top is not None and line.bottom is not None else 0.0


def _usual_pitch(lines: list[Line]) -> float | None:
    """The median downward step between consecutive lines of the page, steps of more than two font
    heights (gaps before headings, page furniture) left out."""
    steps = []
    for upper, lower in pairwise(lines):
        step = _step(upper, lower)
        if step is not None and 0 < step <= 2 * max(_height(upper), _height(lower)):
            steps.append(step)
    return median(steps) if steps else None


def _breaks(upper: Line, lower: Line, pitch: float | None) -> bool:
    step = _step(upper, lower)
    if step is None:
        # No geometry: keep the lines together, as a plain text extraction would.
        return False
    height = max(_height(upper), _height(lower))
    if step < -height / 2:
        return True
    if pitch is not None and step > _PITCH_FACTOR * pitch:
        return True
    return height > 0 and step > _HEIGHT_FACTOR * height


def pdf_date(value: str) -> datetime | None:
    """A PDF date string (`D:20250102030405+01'00'`) as an aware datetime; None for anything else.

    Without a time zone the date is read as UTC, which is what PDF readers commonly assume.
    """
    match = _PDF_DATE.match(value.strip())
    if match is None:
        return None
    parts = match.groupdict()
    offset = timedelta(0)
    if parts["sign"]:
        offset = timedelta(hours=int(parts["tz_hour"]), minutes=int(parts["tz_minute"] or 0))
        if parts["sign"] == "-":
            offset = -offset
    try:
        return datetime(
            int(parts["year"]),
            int(parts["month"] or 1),
            int(parts["day"] or 1),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            int(parts["second"] or 0),
            tzinfo=timezone(offset) if offset else UTC,
        )
    except ValueError:
        return None
