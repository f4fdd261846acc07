"""Generators of real document bytes (PDF, DOCX) for tests, built in memory and fast, and the check
of the parsed-block contract that parser and chunker tests share."""

from __future__ import annotations

import io
import zipfile
from xml.sax.saxutils import escape

from fpdf import FPDF
from pypdf import PdfWriter

from citewise.domain.models import ParsedDocument
from citewise.ingest.parsing import SEPARATOR

_CONTENT_TYPES_XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml"
 ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>"""
_RELS_XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Target="word/document.xml"
 Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/>
</Relationships>"""
_QUOTE_ENTITY = {'"': "&quot;"}
_W_NAMESPACE = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def make_pdf(pages: list[str], *, title: str | None = None) -> bytes:
    """A PDF with one page per string; "\\n\\n" in a string separates paragraphs, "" is a page with
    no text. The built-in Helvetica font covers Latin-1 only."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    if title is not None:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def make_damaged_pdf() -> bytes:
    """A readable PDF whose `startxref` is wrong (PDFium rebuilds the cross-reference table and reads it)."""
    data = make_pdf(["Anvils are shipped by rail.\n\nEach crate holds four anvils."])
    at = data.rindex(b"startxref")
    return data[:at] + b"startxref\n12\n%%EOF\n"


def make_blank_pdf(page_count: int) -> bytes:
    """A PDF of `page_count` empty pages, quick to write even for thousands of pages."""
    writer = PdfWriter()
    for _ in range(page_count):
        writer.add_blank_page(width=72, height=72)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def make_docx(paragraphs: list[tuple[str | None, str]], *, table: list[list[str]] | None = None) -> bytes:
    """A minimal .docx: (style id or None, text) paragraphs, then an optional table of rows of cells.

    Style ids are Word's built-in ones, e.g. "Title", "Heading1", "Heading2".
    """
    body = [_docx_paragraph(style, text) for style, text in paragraphs]
    if table is not None:
        rows = (
            "<w:tr>" + "".join(f"<w:tc>{_docx_paragraph(None, cell)}</w:tc>" for cell in row) + "</w:tr>"
            for row in table
        )
        body.append("<w:tbl>" + "".join(rows) + "</w:tbl>")
    return make_docx_body("".join(body))


def make_docx_body(body: str) -> bytes:
    """A .docx whose `w:body` holds `body`, WordprocessingML written out (prefix `w`)."""
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        f'<w:document xmlns:w="{_W_NAMESPACE}"><w:body>{body}</w:body></w:document>'
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES_XML)
        archive.writestr("_rels/.rels", _RELS_XML)
        archive.writestr("word/document.xml", document)
    return buffer.getvalue()


def _docx_paragraph(style: str | None, text: str) -> str:
    properties = f'<w:pPr><w:pStyle w:val="{escape(style, _QUOTE_ENTITY)}"/></w:pPr>' if style else ""
    return f'<w:p>{properties}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def assert_block_contract(document: ParsedDocument) -> None:
    """Assert the block contract every parser promises the chunker (see `citewise.ingest.parsing`)."""
    text = document.text
    position = 0
    for block in document.blocks:
        span = text[block.start : block.end]
        assert block.start >= position, f"block {block} overlaps or precedes the previous one"
        assert span, f"block {block} is empty"
        assert span == span.strip(), f"block {block} has surrounding whitespace: {span!r}"
        gap = text[position : block.start]
        assert gap == ("" if position == 0 else SEPARATOR), f"unexpected gap {gap!r} before {block}"
        if block.is_heading:
            assert block.heading_path[-1] == span, f"heading {span!r} is not last in {block.heading_path}"
        position = block.end
    assert position == len(text), f"text after the last block: {text[position:]!r}"


def blocks_of(document: ParsedDocument) -> list[tuple[str, tuple[str, ...], int | None, bool]]:
    """Each block as (its text, heading_path, page, is_heading), for exact assertions."""
    return [
        (document.text[block.start : block.end], block.heading_path, block.page, block.is_heading)
        for block in document.blocks
    ]
