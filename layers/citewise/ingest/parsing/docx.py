"""DOCX: paragraphs of word/document.xml, with headings from paragraph styles and rows from tables.

Read with the stdlib (zipfile, expat, ElementTree) so the Lambda layer needs no python-docx/lxml. The
document part is read as a stream of expat events, never as a tree: a tree costs hundreds of bytes an
element (a 0.29 MB .docx inflating to millions of elements took 4.7 GB), and walking one recursively
fails on deep nesting. Only a few open elements are kept, so memory follows the text, not the markup,
and nesting of any depth is a loop. Every part is checked against the parse budget's expansion limit on
its declared size before it is inflated, and again on the bytes actually read (a zip can lie).
"""

from __future__ import annotations

import re
import zipfile
import zlib
from datetime import datetime
from io import BytesIO
from typing import IO
from xml.etree import ElementTree
from xml.parsers import expat

from citewise.domain.errors import PayloadTooLargeError
from citewise.domain.models import ParsedDocument
from citewise.domain.provenance import try_instant
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.failures import parse_error
from citewise.ingest.parsing.limits import ParseBudget

_W_URI = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_W = f"{{{_W_URI}}}"
_DOCUMENT_PART = "word/document.xml"
_STYLES_PART = "word/styles.xml"
_CORE_PART = "docProps/core.xml"
_DCTERMS = "{http://purl.org/dc/terms/}"
# A zip entry can inflate a thousandfold; read at most this much of any XML part, whatever the budget.
_MAX_PART_BYTES = 100 * 1024 * 1024
# The document part is inflated and fed to expat this many bytes at a time.
_FEED_BYTES = 1024 * 1024
# "Title" sits above "Heading 1" so a titled document keeps its title at the head of every path.
_TITLE_LEVEL = 0
_HEADING_STYLE = re.compile(r"heading ?([1-9])")
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
# expat names elements "<namespace URI>}<local name>" with this separator: `_W` without its "{".
_P, _TBL, _TR, _TC, _T = (f"{_W_URI}}}{name}" for name in ("p", "tbl", "tr", "tc", "t"))
_SDT, _SDT_CONTENT, _PPR, _PSTYLE = (f"{_W_URI}}}{name}" for name in ("sdt", "sdtContent", "pPr", "pStyle"))
_BODY = f"{_W_URI}}}body"
_VAL = f"{_W_URI}}}val"
_RUN_TEXT = {
    f"{_W_URI}}}{name}": text for name, text in (("tab", "\t"), ("br", "\n"), ("cr", "\n"), ("noBreakHyphen", "-"))
}


def parse_docx(data: bytes, filename: str, budget: ParseBudget) -> ParsedDocument:
    """Parse a Word document; the title is the "Title" paragraph, else the first level-1 heading."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            names = set(archive.namelist())
            if _DOCUMENT_PART not in names:
                raise parse_error(filename, f"the .docx has no {_DOCUMENT_PART}")
            parts = [name for name in (_DOCUMENT_PART, _STYLES_PART, _CORE_PART) if name in names]
            _check_declared_sizes(archive, parts, budget)
            styles = _read_part(archive, _STYLES_PART, budget) if _STYLES_PART in names else None
            core = _read_part(archive, _CORE_PART, budget) if _CORE_PART in names else None
            style_names = _style_names(_parse_xml(styles, filename)) if styles is not None else {}
            builder = DocumentBuilder(filename, budget)
            with archive.open(_DOCUMENT_PART) as part:
                _BodyReader(builder, style_names, filename).read(part, _part_limit(budget), budget)
    except _ZIP_FAILURES as exc:
        raise parse_error(filename, f"it is not a valid .docx (zip) file ({exc})") from exc
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


def _part_limit(budget: ParseBudget) -> int:
    return min(_MAX_PART_BYTES, budget.max_chars)


def _check_declared_sizes(archive: zipfile.ZipFile, names: list[str], budget: ParseBudget) -> None:
    """Refuse, before inflating anything, parts whose declared sizes are over the budget's expansion limit."""
    sizes = {name: archive.getinfo(name).file_size for name in names}
    if max(sizes.values()) > _MAX_PART_BYTES:
        name = max(sizes, key=sizes.__getitem__)
        raise _too_large(budget, f"{name} declares {sizes[name]} bytes uncompressed; at most {_MAX_PART_BYTES}")
    budget.spend(sum(sizes.values()))


def _read_part(archive: zipfile.ZipFile, name: str, budget: ParseBudget) -> bytes:
    limit = _part_limit(budget)
    with archive.open(name) as part:
        content = part.read(limit + 1)
    if len(content) > limit:
        raise _too_large(budget, f"{name} is larger than {limit} bytes uncompressed")
    return content


def _too_large(budget: ParseBudget, problem: str) -> PayloadTooLargeError:
    return PayloadTooLargeError(
        f"{budget.filename!r}: {problem}",
        details={"filename": budget.filename, "limit": "max_expansion", "max_bytes": _part_limit(budget)},
    )


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


def _heading_level(style_id: str, style_names: dict[str, str]) -> int | None:
    for candidate in (style_names.get(style_id, ""), style_id):
        name = candidate.strip().lower()
        if name == "title":
            return _TITLE_LEVEL
        if match := _HEADING_STYLE.fullmatch(name):
            return int(match.group(1))
    return None


class _BodyReader:
    """The body's paragraphs and table rows, in reading order, from expat events.

    An item is a paragraph or a table directly in the body, or in content controls (`w:sdt`) there; what
    else the body holds (section properties) is skipped. A paragraph's text is every `w:t` (and tab,
    break, hyphen) inside it, a nested paragraph's included; a table gives one block per row of its own
    (`w:tr` directly in it), each cell (`w:tc` directly in the row) the text of the paragraphs in it,
    a nested table's included.
    """

    def __init__(self, builder: DocumentBuilder, style_names: dict[str, str], filename: str) -> None:
        self._builder = builder
        self._style_names = style_names
        self._filename = filename
        self._open: list[str] = []  # the open elements' names, the document element first
        # Where in `_open` the innermost element is through which items are still found: `w:body`, then
        # each `w:sdt` / `w:sdtContent` in it; None outside the body. A counter, not a walk up `_open`, so
        # deep nesting costs no more per element than shallow.
        self._level: int | None = None
        self._item: str | None = None  # _P or _TBL while inside a body item
        self._item_depth = 0
        self._style = ""
        self._text: list[str] = []  # the open paragraph's text
        self._paragraph_depth: int | None = None  # of the outermost open paragraph (of the item, or the cell)
        self._row: list[str] | None = None  # the cells of the open row
        self._cell: list[str] | None = None  # the paragraphs of the open cell
        self._in_text = False

    def read(self, part: IO[bytes], limit: int, budget: ParseBudget) -> None:
        parser = expat.ParserCreate(namespace_separator="}")
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._data
        parser.StartDoctypeDeclHandler = self._doctype
        parser.buffer_text = True
        read = 0
        try:
            while chunk := part.read(_FEED_BYTES):
                read += len(chunk)
                if read > limit:
                    raise _too_large(budget, f"{_DOCUMENT_PART} is larger than {limit} bytes uncompressed")
                parser.Parse(chunk, False)
                budget.check_time()
            parser.Parse(b"", True)
        except expat.ExpatError as exc:
            raise parse_error(self._filename, f"the .docx XML is malformed ({exc})") from exc

    def _doctype(self, *_: object) -> None:
        raise parse_error(self._filename, "the .docx XML declares a DTD, which Word never writes")

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        depth = len(self._open)
        self._open.append(name)
        if self._item is None:
            if name == _BODY and depth == 1:
                self._level = depth
            elif self._level is not None and depth == self._level + 1:
                parent = self._open[-2]
                if name in (_P, _TBL) and parent != _SDT:
                    self._item, self._item_depth, self._style = name, depth, ""
                    self._paragraph_depth = depth if name == _P else None
                elif (name == _SDT and parent != _SDT) or (name == _SDT_CONTENT and parent == _SDT):
                    self._level = depth
            return
        if name == _P:
            if self._paragraph_depth is None and self._cell is not None:
                self._paragraph_depth = depth
        elif name == _T:
            self._in_text = self._paragraph_depth is not None
        elif name in _RUN_TEXT:
            if self._paragraph_depth is not None:
                self._text.append(_RUN_TEXT[name])
        elif self._item == _P:
            if name == _PSTYLE and depth == self._item_depth + 2 and self._open[-2] == _PPR:
                self._style = attributes.get(_VAL, "")
        elif name == _TR and depth == self._item_depth + 1:
            self._row = []
        elif name == _TC and self._row is not None and depth == self._item_depth + 2:
            self._cell = []

    def _end(self, name: str) -> None:
        self._open.pop()
        depth = len(self._open)
        if name == _T:
            self._in_text = False
        if self._item is None:
            if depth == self._level:
                self._level = depth - 1 if depth > 1 else None
            return
        if depth == self._paragraph_depth:
            self._paragraph_depth = None
            if self._cell is not None:
                self._cell.append("".join(self._text))
                self._text = []
        if depth == self._item_depth:
            self._end_item()
        elif self._row is not None and name == _TC and depth == self._item_depth + 2 and self._cell is not None:
            self._row.append(" ".join(self._cell).strip())
            self._cell = None
        elif name == _TR and depth == self._item_depth + 1 and self._row is not None:
            self._builder.block(_CELL_SEPARATOR.join(cell for cell in self._row if cell))
            self._row = None

    def _end_item(self) -> None:
        if self._item == _P:
            text = "".join(self._text)
            level = _heading_level(self._style, self._style_names)
            if level is None:
                self._builder.block(text)
            else:
                self._builder.heading(text, level)
        self._item, self._text, self._row, self._cell = None, [], None, None

    def _data(self, data: str) -> None:
        if self._in_text:
            self._text.append(data)
