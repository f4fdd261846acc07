"""DOCX: paragraphs of word/document.xml, with headings from paragraph styles and rows from tables.

Read with the stdlib (zipfile, ElementTree) so the Lambda layer needs no python-docx/lxml.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Iterator
from datetime import datetime
from xml.etree import ElementTree

from citewise.domain.errors import PayloadTooLargeError
from citewise.domain.models import ParsedDocument
from citewise.domain.provenance import try_instant
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.failures import parse_error

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_DOCUMENT_PART = "word/document.xml"
_STYLES_PART = "word/styles.xml"
_CORE_PART = "docProps/core.xml"
_DCTERMS = "{http://purl.org/dc/terms/}"
# A zip entry can inflate a thousandfold; read at most this much of any XML part.
_MAX_PART_BYTES = 100 * 1024 * 1024
# "Title" sits above "Heading 1" so a titled document keeps its title at the head of every path.
_TITLE_LEVEL = 0
_HEADING_STYLE = re.compile(r"heading ?([1-9])")
_RUN_TEXT = {f"{_W}tab": "\t", f"{_W}br": "\n", f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-"}
_CELL_SEPARATOR = " | "
_ZIP_FAILURES: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    NotImplementedError,  # an unsupported compression method
    RuntimeError,  # an encrypted entry
)


def parse_docx(data: bytes, filename: str) -> ParsedDocument:
    """Parse a Word document; the title is the "Title" paragraph, else the first level-1 heading."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if _DOCUMENT_PART not in names:
                raise parse_error(filename, f"the .docx has no {_DOCUMENT_PART}")
            document = _read_part(archive, _DOCUMENT_PART, filename)
            styles = _read_part(archive, _STYLES_PART, filename) if _STYLES_PART in names else None
            core = _read_part(archive, _CORE_PART, filename) if _CORE_PART in names else None
    except _ZIP_FAILURES as exc:
        raise parse_error(filename, f"it is not a valid .docx (zip) file ({exc})") from exc
    style_names = _style_names(_parse_xml(styles, filename)) if styles is not None else {}
    body = _parse_xml(document, filename).find(f"{_W}body")
    builder = DocumentBuilder(filename)
    for element in _body_elements(body) if body is not None else ():
        if element.tag == f"{_W}tbl":
            for row in element.findall(f"{_W}tr"):
                cells = (" ".join(_paragraph_texts(cell)).strip() for cell in row.findall(f"{_W}tc"))
                builder.block(_CELL_SEPARATOR.join(cell for cell in cells if cell))
            continue
        text = _paragraph_text(element)
        level = _heading_level(element, style_names)
        if level is None:
            builder.block(text)
        else:
            builder.heading(text, level)
    return builder.build(
        title=builder.first_heading(_TITLE_LEVEL) or builder.first_heading(1),
        source_date=_core_date(_parse_xml(core, filename)) if core is not None else None,
    )


def _core_date(core: ElementTree.Element) -> datetime | None:
    """`dcterms:modified`, else `dcterms:created`, of the core properties; one that does not parse is
    passed over (the object's own time then stands in)."""
    for name in ("modified", "created"):
        element = core.find(f"{_DCTERMS}{name}")
        moment = try_instant(element.text if element is not None else None)
        if moment is not None:
            return moment
    return None


def _read_part(archive: zipfile.ZipFile, name: str, filename: str) -> bytes:
    with archive.open(name) as part:
        content = part.read(_MAX_PART_BYTES + 1)
    if len(content) > _MAX_PART_BYTES:
        raise PayloadTooLargeError(
            f"{filename!r}: {name} is larger than {_MAX_PART_BYTES} bytes uncompressed",
            details={"filename": filename, "max_bytes": _MAX_PART_BYTES},
        )
    return content


def _parse_xml(content: bytes, filename: str) -> ElementTree.Element:
    # ElementTree never fetches external entities; refusing any DTD also rules out entity expansion
    # bombs, which is all defusedxml would add here.
    parser = ElementTree.XMLParser(target=_DtdRefusingTreeBuilder(filename))  # noqa: S314
    try:
        parser.feed(content)
        return parser.close()
    except ElementTree.ParseError as exc:
        raise parse_error(filename, f"the .docx XML is malformed ({exc})") from exc


class _DtdRefusingTreeBuilder(ElementTree.TreeBuilder):
    def __init__(self, filename: str) -> None:
        super().__init__()
        self._filename = filename

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        raise parse_error(self._filename, "the .docx XML declares a DTD, which Word never writes")


def _style_names(styles: ElementTree.Element) -> dict[str, str]:
    # Style ids are localised ("berschrift1" in German Word); the style names are not.
    names: dict[str, str] = {}
    for style in styles.iter(f"{_W}style"):
        style_id = style.get(f"{_W}styleId")
        name = style.find(f"{_W}name")
        if style_id and name is not None and name.get(f"{_W}val"):
            names[style_id] = name.get(f"{_W}val", "")
    return names


def _body_elements(parent: ElementTree.Element) -> Iterator[ElementTree.Element]:
    for child in parent:
        if child.tag in (f"{_W}p", f"{_W}tbl"):
            yield child
        elif child.tag == f"{_W}sdt":
            # Content controls wrap ordinary paragraphs and tables.
            content = child.find(f"{_W}sdtContent")
            if content is not None:
                yield from _body_elements(content)


def _heading_level(paragraph: ElementTree.Element, style_names: dict[str, str]) -> int | None:
    style = paragraph.find(f"{_W}pPr/{_W}pStyle")
    style_id = style.get(f"{_W}val", "") if style is not None else ""
    for candidate in (style_names.get(style_id, ""), style_id):
        name = candidate.strip().lower()
        if name == "title":
            return _TITLE_LEVEL
        if match := _HEADING_STYLE.fullmatch(name):
            return int(match.group(1))
    return None


def _paragraph_texts(container: ElementTree.Element) -> Iterator[str]:
    for paragraph in container.iter(f"{_W}p"):
        yield _paragraph_text(paragraph)


def _paragraph_text(paragraph: ElementTree.Element) -> str:
    parts: list[str] = []
    for element in paragraph.iter():
        if element.tag == f"{_W}t":
            parts.append(element.text or "")
        elif element.tag in _RUN_TEXT:
            parts.append(_RUN_TEXT[element.tag])
    return "".join(parts)
