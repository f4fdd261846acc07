"""One way to say "this document is broken", so every format reports it with the same shape."""

from __future__ import annotations

from citewise.domain.errors import ParseError


def parse_error(filename: str, problem: str) -> ParseError:
    """A ParseError naming the file and what is wrong with it; `details` carries the file name only."""
    return ParseError(f"cannot parse {filename!r}: {problem}", details={"filename": filename})
