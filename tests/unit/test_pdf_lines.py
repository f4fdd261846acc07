"""citewise.ingest.parsing.pdf_lines: paragraphs from line geometry, and PDF dates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from citewise.ingest.parsing.pdf_lines import Line, paragraphs, pdf_date

HEIGHT = 10.0  # a line's loose box: font ascent to descent


def _page(*steps: float, first: float = 700.0) -> list[Line]:
    """Lines named l0, l1, ... each `step` points under the previous one."""
    lines = [Line("l0", first, first + HEIGHT)]
    for number, step in enumerate(steps, start=1):
        bottom = (lines[-1].bottom or 0.0) - step
        lines.append(Line(f"l{number}", bottom, bottom + HEIGHT))
    return lines


def test_lines_one_pitch_apart_are_one_paragraph() -> None:
    assert list(paragraphs(_page(12, 12, 12))) == [["l0", "l1", "l2", "l3"]]


def test_a_step_wider_than_the_pitch_starts_a_paragraph() -> None:
    # 12 points between lines, 16.5 (a third of a line more) between paragraphs
    assert list(paragraphs(_page(12, 12, 16.5, 12, 12))) == [["l0", "l1", "l2"], ["l3", "l4", "l5"]]


def test_a_step_within_a_quarter_of_the_pitch_does_not() -> None:
    # Word processors and PDF writers wobble a little around the pitch
    assert list(paragraphs(_page(12, 13, 11.5, 14.5))) == [["l0", "l1", "l2", "l3", "l4"]]


def test_one_line_paragraphs_are_told_apart_by_the_font_height() -> None:
    # Given a list of one-line items, each 17 points under the last: the usual step is the gap itself
    # Then every step over 1.5 line heights still breaks
    assert list(paragraphs(_page(17, 17, 17))) == [["l0"], ["l1"], ["l2"], ["l3"]]


def test_a_line_higher_up_the_page_starts_a_paragraph() -> None:
    # A second column starts back at the top
    lines = [*_page(12, 12), Line("top of column 2", 700.0, 710.0), Line("next", 688.0, 698.0)]
    assert list(paragraphs(lines)) == [["l0", "l1", "l2"], ["top of column 2", "next"]]


def test_lines_without_geometry_stay_together() -> None:
    lines = [Line("a", None, None), Line("b", 100.0, 110.0), Line("c", None, None)]
    assert list(paragraphs(lines)) == [["a", "b", "c"]]


def test_an_empty_page_has_no_paragraphs() -> None:
    assert list(paragraphs([])) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("D:20250102030405+01'00'", datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=1)))),
        ("D:20250102030405-05'30", datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone(-timedelta(hours=5, minutes=30)))),
        ("D:20200101000000Z", datetime(2020, 1, 1, tzinfo=UTC)),
        ("D:20200101000000Z00'00'", datetime(2020, 1, 1, tzinfo=UTC)),
        ("D:2019", datetime(2019, 1, 1, tzinfo=UTC)),
        ("20190304", datetime(2019, 3, 4, tzinfo=UTC)),
    ],
)
def test_pdf_dates_are_read_with_their_time_zone(value: str, expected: datetime) -> None:
    assert pdf_date(value) == expected


@pytest.mark.parametrize("value", ["", "not a date", "D:20251332000000Z", "D:2025010203040599", "D:20"])
def test_anything_else_is_no_date(value: str) -> None:
    assert pdf_date(value) is None
