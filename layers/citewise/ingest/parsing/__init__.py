"""Document bytes -> `ParsedDocument`: clean plain text plus the block structure the chunker keeps.

Formats are chosen by file extension first, because uploaders and S3 often send a generic or wrong
content type, and by content type only when the extension says nothing we know.

Block contract, for every format: blocks are ordered, non-overlapping spans of `text`, each stripped
and non-empty, joined by `SEPARATOR` ("\\n\\n"), so every non-whitespace character of `text` lies in
exactly one block.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Literal

from citewise.domain.errors import UnsupportedMediaTypeError
from citewise.domain.models import ParsedDocument
from citewise.ingest.parsing.builder import SEPARATOR
from citewise.ingest.parsing.encoding import decode_text
from citewise.ingest.parsing.failures import parse_error
from citewise.ingest.parsing.html import parse_html
from citewise.ingest.parsing.limits import BLOCKS_PER_CHUNK, ParseBudget, ParseLimits
from citewise.ingest.parsing.markdown import parse_markdown
from citewise.ingest.parsing.plaintext import parse_plaintext

__all__ = [
    "BLOCKS_PER_CHUNK",
    "SEPARATOR",
    "SUPPORTED_CONTENT_TYPES",
    "SUPPORTED_EXTENSIONS",
    "ParseLimits",
    "check_supported",
    "parse",
]

_Format = Literal["txt", "md", "html", "pdf", "docx"]

_EXTENSIONS: dict[str, _Format] = {
    ".txt": "txt",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}
_CONTENT_TYPES: dict[str, _Format] = {
    "text/plain": "txt",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}
_TEXT_PARSERS: dict[_Format, Callable[[str, str, ParseBudget], ParsedDocument]] = {
    "txt": parse_plaintext,
    "md": parse_markdown,
    "html": parse_html,
}

SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(sorted(_EXTENSIONS))
"""File extensions `parse` accepts (lower case, with the dot)."""

SUPPORTED_CONTENT_TYPES: tuple[str, ...] = tuple(sorted(_CONTENT_TYPES))
"""Media types `parse` accepts when the file name has no supported extension."""


def parse(
    data: bytes,
    filename: str,
    content_type: str | None = None,
    *,
    limits: ParseLimits | None = None,
    on_page: Callable[[int, int], None] | None = None,
) -> ParsedDocument:
    """Parse one document into text and blocks (see the module docstring for the block contract).

    `filename` picks the format by extension (case-insensitive) and names the file in error messages;
    `content_type` (parameters such as charset ignored) is the fallback. `limits` bound a PDF's pages and
    any document's expansion and parse time (`citewise.ingest.parsing.limits`), and `on_page(done, total)`
    follows a PDF's pages as they are read (the other formats parse in one go).

    Raises UnsupportedMediaTypeError for a format citewise cannot parse, ParseError for empty,
    corrupt, binary, text-less or too deeply nested input, and PayloadTooLargeError for a document over
    one of `limits`.
    """
    document_format = _detect_format(filename, content_type)
    if not data:
        raise parse_error(filename, "the file is empty")
    budget = ParseBudget(filename, len(data), limits)
    if document_format in _TEXT_PARSERS:
        return _TEXT_PARSERS[document_format](decode_text(data, filename), filename, budget)
    # The binary formats' parsers are imported on use: the PDF library alone costs an API function's
    # cold start about 40-60 ms, and the API only asks `check_supported`.
    if document_format == "pdf":
        from citewise.ingest.parsing.pdf import parse_pdf

        return parse_pdf(data, filename, budget, on_page=on_page)
    from citewise.ingest.parsing.docx import parse_docx

    return parse_docx(data, filename, budget)


def check_supported(filename: str, content_type: str | None) -> None:
    """Raise UnsupportedMediaTypeError now for a file `parse` would refuse later (an upload request)."""
    _detect_format(filename, content_type)


def _detect_format(filename: str, content_type: str | None) -> _Format:
    extension = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    if extension in _EXTENSIONS:
        return _EXTENSIONS[extension]
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type in _CONTENT_TYPES:
        return _CONTENT_TYPES[media_type]
    described = f"extension {extension!r}" if extension else "no extension"
    raise UnsupportedMediaTypeError(
        f"cannot parse {filename!r} ({described}, content type {content_type!r}): supported formats are "
        + ", ".join(SUPPORTED_EXTENSIONS),
        details={
            "filename": filename,
            "content_type": content_type,
            "supported_extensions": list(SUPPORTED_EXTENSIONS),
            "supported_content_types": list(SUPPORTED_CONTENT_TYPES),
        },
    )
