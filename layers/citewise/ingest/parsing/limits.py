"""What one document's parse may cost: pages, characters extracted, blocks, and time.

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
    """The per-document parse limits (settings `CITEWISE_MAX_PAGES`, `_MAX_EXPANSION`, `_MAX_PARSE_SECONDS`,
    and `_MAX_CHUNKS` for blocks)."""

    max_pages: int = 2000
    max_expansion: int = 100
    """Characters of text (and bytes of a zip's uncompressed parts) per byte uploaded. Text formats never
    exceed 1; a .docx's XML is commonly 5-30 times its zip, and its text a fraction of that."""
    max_seconds: float = 120.0
    max_blocks: int = 200_000
    """Paragraphs, headings and rows: each costs about 1 KB until the document is chunked, whatever its
    size, so a file of a million one-letter lines is stopped here rather than by the chunk cap after it
    (`citewise.runtime.services` sets it at `BLOCKS_PER_CHUNK` times CITEWISE_MAX_CHUNKS)."""


BLOCKS_PER_CHUNK = 20
"""Blocks a document may have per chunk it may make: a 400-token chunk of 20 table rows or list items is
ordinary, one of 20 one-word lines is not."""


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
        self._upload_bytes = upload_bytes
        self.max_chars = self.limits.max_expansion * max(upload_bytes, 1)
        """Characters of text, and bytes of uncompressed parts, this document may produce."""
        self._clock = clock
        self._deadline = clock() + self.limits.max_seconds
        self._calls = 0

    def spend(self, chars: int, *, blocks: int = 0) -> None:
        """Check that `chars` characters in all (or bytes of uncompressed parts), `blocks` blocks in all and
        the time so far fit."""
        if blocks > self.limits.max_blocks:
            raise PayloadTooLargeError(
                f"{self.filename!r} has more than {self.limits.max_blocks} paragraphs, headings and rows "
                "(CITEWISE_MAX_CHUNKS)",
                details={"filename": self.filename, "limit": "max_blocks", "max_blocks": self.limits.max_blocks},
            )
        if chars > self.max_chars:
            raise PayloadTooLargeError(
                f"{self.filename!r} expands to more than {self.max_chars} characters, "
                f"{self.limits.max_expansion} times its {self._upload_bytes} bytes (CITEWISE_MAX_EXPANSION)",
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
