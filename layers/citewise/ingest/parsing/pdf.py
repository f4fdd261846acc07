"""PDF: the text layer page by page, one block per paragraph, every block tagged with its page."""

from __future__ import annotations

import io
import re
import struct
import zlib
from collections.abc import Callable
from datetime import datetime

from pypdf import PageObject, PasswordType, PdfReader
from pypdf.errors import DependencyError, PyPdfError
from pypdf.generic import DictionaryObject

from citewise.domain.errors import PayloadTooLargeError
from citewise.domain.models import ParsedDocument
from citewise.domain.provenance import as_utc
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.failures import parse_error
from citewise.ingest.parsing.plaintext import split_paragraphs

# pypdf raises PyPdfError subclasses for what it recognises as broken, but corrupt files still leak
# plain Python errors from deep inside its object parser and filters.
_PYPDF_FAILURES: tuple[type[Exception], ...] = (
    PyPdfError,
    DependencyError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    AssertionError,
    ZeroDivisionError,
    OverflowError,
    RecursionError,
    NotImplementedError,
    struct.error,
    zlib.error,
)
_SPACE_RUNS = re.compile(r"[ \t]{2,}")
# A fallback title is a heading at best; a whole first paragraph is not a title.
_MAX_TITLE_CHARS = 200


def parse_pdf(
    data: bytes, filename: str, *, max_pages: int, on_page: Callable[[int, int], None] | None = None
) -> ParsedDocument:
    """Parse a PDF's text layer; the title is the metadata title, else the first line of text.

    `on_page(done, total)` is called after each page's text is extracted, the slow part of a long PDF.
    The page limit is checked against the page count before any text is extracted, so an oversized
    document costs almost nothing to reject. Scanned PDFs (pages without text) are rejected because
    OCR is not supported.
    """
    try:
        reader = PdfReader(io.BytesIO(data))
        _decrypt(reader, filename)
        _check_page_limit(_declared_page_count(reader), filename, max_pages)
        pages = list(reader.pages)
        # The declared count can lie; the page tree cannot.
        _check_page_limit(len(pages), filename, max_pages)
        texts = []
        for page in pages:
            texts.append(_page_text(page))
            if on_page is not None:
                on_page(len(texts), len(pages))
        metadata_title = reader.metadata.title if reader.metadata else None
        source_date = _metadata_date(reader)
    except _PYPDF_FAILURES as exc:
        raise parse_error(filename, f"it is not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if not pages:
        raise parse_error(filename, "the PDF has no pages")
    if not any(text.strip() for text in texts):
        raise parse_error(filename, "the PDF has no text layer (it may be scanned); OCR is not supported")
    builder = DocumentBuilder(filename)
    for page_number, text in enumerate(texts, start=1):
        for paragraph in split_paragraphs(text):
            builder.block(paragraph, page=page_number)
    return builder.build(title=_title(metadata_title, texts), page_count=len(pages), source_date=source_date)


def _metadata_date(reader: PdfReader) -> datetime | None:
    """ModDate, else CreationDate, of the document information; a malformed one (PDF tools write many) is
    passed over, the object's own time then stands in."""
    information = reader.metadata
    if information is None:
        return None
    for attribute in ("modification_date", "creation_date"):
        try:
            moment = getattr(information, attribute)
        except ValueError:
            continue
        if moment is not None:
            return as_utc(moment)
    return None


def _decrypt(reader: PdfReader, filename: str) -> None:
    if not reader.is_encrypted:
        return
    # Many "encrypted" PDFs only restrict printing or copying and open with the empty user password.
    try:
        decrypted = reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except DependencyError as exc:
        raise parse_error(filename, "the PDF uses AES encryption, which needs a crypto library") from exc
    if not decrypted:
        raise parse_error(filename, "the PDF is password protected")


def _declared_page_count(reader: PdfReader) -> int:
    pages = reader.root_object.get("/Pages")
    pages = pages.get_object() if pages is not None else None
    count = pages.get("/Count") if isinstance(pages, DictionaryObject) else None
    return int(count) if isinstance(count, int) else 0


def _check_page_limit(page_count: int, filename: str, max_pages: int) -> None:
    if page_count > max_pages:
        raise PayloadTooLargeError(
            f"{filename!r} has {page_count} pages; at most {max_pages} are accepted",
            details={"filename": filename, "page_count": page_count, "max_pages": max_pages},
        )


def _page_text(page: PageObject) -> str:
    # Layout mode keeps vertical gaps as blank lines, which is what separates paragraphs; it pads
    # columns with spaces, which say nothing once the text is plain.
    try:
        text = page.extract_text(extraction_mode="layout")
    except _PYPDF_FAILURES:
        # Layout mode is younger and fails on fonts plain mode copes with (pypdf #2533, #3074);
        # a page of text without paragraph breaks beats refusing the whole document.
        text = page.extract_text()
    return "\n".join(_SPACE_RUNS.sub(" ", line).strip() for line in text.split("\n"))


def _title(metadata_title: str | None, texts: list[str]) -> str | None:
    title = " ".join((metadata_title or "").split())
    if title:
        return title
    first_line = next((line for text in texts for line in text.split("\n") if line.strip()), None)
    return " ".join(first_line.split())[:_MAX_TITLE_CHARS] if first_line else None
