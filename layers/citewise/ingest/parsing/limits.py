"""What one document's parse may cost: pages, characters extracted, and time.

A small upload can unfold into far more work than its size says: a 0.29 MB .docx whose XML inflates a
thousandfold, a Markdown file of a million one-character headings. The upload limit
(`CITEWISE_MAX_DOCUMENT_BYTES`) cannot see that, so a parse carries a `ParseBudget` and every parser
spends it as it goes; the first limit reached fails the document with PAYLOAD_TOO_LARGE and the limit
that stopped it, before the work (and the memory) grows further.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from citewise.domain.errors import PayloadTooLargeError


@dataclass(frozen=True)
class ParseLimits:
    """The per-document parse limits (settings `CITEWISE_MAX_PAGES`, `_MAX_EXPANSION`, `_MAX_PARSE_SECONDS`)."""

    max_pages: int = 2000
    max_expansion: int = 100
    """Characters of text (and bytes of a zip's uncompressed parts) per byte uploaded. Text formats never
    exceed 1; a .docx's XML is commonly 5-30 times its zip, and its text a fraction of that."""
    max_seconds: float = 120.0


class ParseBudget:
    """One document's parse against its `ParseLimits`: `spend` is called as text accumulates."""

    # The clock is read once every this many calls to `spend`: reading it costs more than a block.
    _CLOCK_EVERY = 256

    def __init__(
        self,
        filename: str,
        upload_bytes: int,
        limits: ParseLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits or ParseLimits()
        self.filename = filename
        self.max_chars = self.limits.max_expansion * max(upload_bytes, 1)
        """Characters of text, and bytes of uncompressed parts, this document may produce."""
        self._clock = clock
        self._deadline = clock() + self.limits.max_seconds
        self._calls = 0

    def spend(self, chars: int) -> None:
        """Check that `chars` characters in all (or bytes of uncompressed parts) and the time so far fit."""
        if chars > self.max_chars:
            raise PayloadTooLargeError(
                f"{self.filename!r} expands to more than {self.max_chars} characters, "
                f"{self.limits.max_expansion} times its size (CITEWISE_MAX_EXPANSION)",
                details={"filename": self.filename, "limit": "max_expansion", "max_chars": self.max_chars},
            )
        self._calls += 1
        if self._calls % self._CLOCK_EVERY == 0:
            self.check_time()

    def check_time(self) -> None:
        """Raise once the parse has taken longer than `max_seconds`."""
        if self._clock() > self._deadline:
            raise PayloadTooLargeError(
                f"{self.filename!r} took longer than {self.limits.max_seconds:g} s to parse "
                "(CITEWISE_MAX_PARSE_SECONDS)",
                details={"filename": self.filename, "limit": "max_parse_seconds", "seconds": self.limits.max_seconds},
            )
