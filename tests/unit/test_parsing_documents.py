"""citewise.ingest.parsing: PDF and DOCX structure, and how corrupt or oversized files fail."""

from __future__ import annotations

import io
import os
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from pypdf import PdfReader, PdfWriter

from citewise.domain.errors import ParseError, PayloadTooLargeError
from citewise.ingest.parsing import ParseLimits, parse
from tests.builders import assert_block_contract, blocks_of, make_blank_pdf, make_docx, make_pdf

# --- pdf -----------------------------------------------------------------------------------------

THREE_PAGES = make_pdf(["Page one.", "Page two.", "Page three."])


def test_pdf_blocks_are_paragraphs_tagged_with_their_page() -> None:
    # Given a three-page PDF with a metadata title and two paragraphs on the first page
    data = make_pdf(["First paragraph.\n\nSecond paragraph.", "Page two text.", "Page three text."], title="Report")

    # When it is parsed
    document = parse(data, "report.pdf")

    # Then each paragraph is a block carrying its 1-based page, and the metadata gives the title
    assert blocks_of(document) == [
        ("First paragraph.", (), 1, False),
        ("Second paragraph.", (), 1, False),
        ("Page two text.", (), 2, False),
        ("Page three text.", (), 3, False),
    ]
    assert document.text == "First paragraph.\n\nSecond paragraph.\n\nPage two text.\n\nPage three text."
    assert document.page_count == 3
    assert document.title == "Report"
    assert_block_contract(document)


def test_pdf_without_metadata_title_takes_its_first_line() -> None:
    # Given a PDF without a metadata title whose first page is blank
    data = make_pdf(["", "Quarterly numbers\nRevenue went up."])

    # When it is parsed
    document = parse(data, "q.pdf", "application/pdf")

    # Then the title is the first line of text, and the blank page yields no block (the two lines, set one
    # line pitch apart, are one paragraph: its text joins them)
    assert document.title == "Quarterly numbers"
    assert blocks_of(document) == [("Quarterly numbers Revenue went up.", (), 2, False)]
    assert document.page_count == 2


def test_pdf_with_more_pages_than_allowed_fails_fast_before_extracting_text() -> None:
    # Given a 5,000-page PDF and the default limit of 2,000 pages
    data = make_blank_pdf(5000)

    # When it is parsed
    started = time.perf_counter()
    with pytest.raises(PayloadTooLargeError) as raised:
        parse(data, "huge.pdf")
    elapsed = time.perf_counter() - started

    # Then it is refused from the page count alone, quickly, with the numbers in the details
    assert elapsed < 1.0
    assert "'huge.pdf' has 5000 pages; at most 2000" in raised.value.message
    assert raised.value.details == {"filename": "huge.pdf", "page_count": 5000, "max_pages": 2000}


def test_pdf_page_limit_is_configurable() -> None:
    # Given a three-page PDF with text
    data = make_pdf(["one", "two", "three"])

    # When it is parsed with a limit of two pages, and with a limit of exactly three
    with pytest.raises(PayloadTooLargeError):
        parse(data, "three.pdf", limits=ParseLimits(max_pages=2))
    document = parse(data, "three.pdf", limits=ParseLimits(max_pages=3))

    # Then the limit is inclusive
    assert [block.page for block in document.blocks] == [1, 2, 3]


def test_pdf_with_pages_but_no_text_layer_is_refused_as_needing_ocr() -> None:
    # Given a PDF whose pages carry no text, as a scanned document would
    data = make_pdf(["", ""])

    # When it is parsed
    # Then the error says there is no text layer and OCR is not supported
    with pytest.raises(ParseError, match=r"'scan\.pdf'.*no text layer.*OCR is not supported"):
        parse(data, "scan.pdf")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(os.urandom(2048), id="random-bytes"),
        pytest.param(b"%PDF-1.7\n" + os.urandom(2048), id="pdf-header-then-garbage"),
        pytest.param(b"just some text, not a pdf", id="text"),
        pytest.param(make_pdf(["Some text that will be cut off."])[:900], id="truncated"),
        pytest.param(THREE_PAGES[: len(THREE_PAGES) // 2], id="cut-in-half"),
    ],
)
def test_corrupt_or_truncated_pdf_is_a_parse_error_chained_to_the_cause(data: bytes) -> None:
    # Given bytes named .pdf that are not a readable PDF
    # When they are parsed
    with pytest.raises(ParseError, match=r"'broken\.pdf'.*not a readable PDF") as raised:
        parse(data, "broken.pdf")

    # Then the underlying PDFium failure is chained, not leaked
    assert raised.value.__cause__ is not None


# --- docx ----------------------------------------------------------------------------------------


def test_docx_styles_give_headings_and_tables_give_rows() -> None:
    # Given a Word document with a Title, two heading levels, body text and a table
    data = make_docx(
        [
            ("Title", "Handbook"),
            ("Heading1", "Intro"),
            (None, "Welcome aboard."),
            ("Heading2", "Details"),
            ("Normal", "Fine print."),
            ("Heading1", "Policies"),
        ],
        table=[["Policy", "Owner"], ["Leave", ""], ["", ""]],
    )

    # When it is parsed
    document = parse(data, "handbook.DOCX")

    # Then the Title heads every path, headings nest by level, rows join non-empty cells
    assert blocks_of(document) == [
        ("Handbook", ("Handbook",), None, True),
        ("Intro", ("Handbook", "Intro"), None, True),
        ("Welcome aboard.", ("Handbook", "Intro"), None, False),
        ("Details", ("Handbook", "Intro", "Details"), None, True),
        ("Fine print.", ("Handbook", "Intro", "Details"), None, False),
        ("Policies", ("Handbook", "Policies"), None, True),
        ("Policy | Owner", ("Handbook", "Policies"), None, False),
        ("Leave", ("Handbook", "Policies"), None, False),
    ]
    assert document.title == "Handbook"
    assert document.page_count is None
    assert_block_contract(document)


def test_docx_without_title_style_takes_the_first_heading_1() -> None:
    # Given a Word document whose first level-1 heading follows a level-2 one
    data = make_docx([("Heading2", "Preface"), ("Heading1", "Chapter One"), (None, "Text.")])

    # When it is parsed
    document = parse(data, "book.docx")

    # Then the title is the first level-1 heading
    assert document.title == "Chapter One"


def test_docx_localised_style_ids_are_resolved_through_style_names() -> None:
    # Given a German Word document, whose heading style id is "berschrift1" but whose name is "heading 1"
    base = make_docx([("berschrift1", "Einleitung"), (None, "Text.")])
    styles = (
        '<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        '<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>'
        "</w:styles>"
    )
    data = _with_part(base, "word/styles.xml", styles.encode())

    # When it is parsed
    document = parse(data, "de.docx")

    # Then the paragraph is a level-1 heading
    assert blocks_of(document)[0] == ("Einleitung", ("Einleitung",), None, True)


def _with_part(docx: bytes, name: str, content: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(docx)) as source, zipfile.ZipFile(buffer, "w") as target:
        for item in source.infolist():
            if item.filename != name:
                target.writestr(item, source.read(item))
        target.writestr(name, content)
    return buffer.getvalue()


def _zip(parts: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in parts.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(os.urandom(1024), "not a valid .docx", id="not-a-zip"),
        pytest.param(make_docx([(None, "cut")])[:200], "not a valid .docx", id="truncated-zip"),
        pytest.param(_zip({"other.xml": b"<a/>"}), "has no word/document.xml", id="missing-document"),
        pytest.param(_zip({"word/document.xml": b"<w:document"}), "XML is malformed", id="malformed-xml"),
        pytest.param(
            _zip({"word/document.xml": b'<!DOCTYPE d [<!ENTITY e "boom">]><d>&e;</d>'}),
            "declares a DTD",
            id="dtd",
        ),
    ],
)
def test_corrupt_docx_is_a_parse_error(data: bytes, problem: str) -> None:
    # Given bytes named .docx that are not a usable Word document
    # When they are parsed
    # Then the error names the file and the problem, and no zipfile/XML exception leaks
    with pytest.raises(ParseError, match=rf"'bad\.docx'.*{problem}"):
        parse(data, "bad.docx")


def test_pdf_line_ending_in_a_hyphen_keeps_the_hyphen_of_an_option_and_joins_the_line() -> None:
    # Given a PDF whose line ends in a hyphen (PDFium joins such lines and reports the hyphen as U+FFFE)
    data = make_pdf(["aws sqs start-message-move-task --max-\nnumber-of-messages 10"])

    # When it is parsed
    document = parse(data, "hyphen.pdf")

    # Then the text is the option the page shows, whole: the hyphen kept, the line break gone
    assert blocks_of(document) == [("aws sqs start-message-move-task --max-number-of-messages 10", (), 1, False)]


def test_pdf_parsed_from_many_threads_at_once_gives_the_same_documents() -> None:
    # Given PDFium, which is not thread-safe, and documents parsed on worker threads as local ingest does
    documents = [make_pdf([f"Document {n}.\n\nIts second paragraph.", f"Page two of {n}."]) for n in range(8)]
    expected = [parse(data, f"{n}.pdf").text for n, data in enumerate(documents)]

    # When they are parsed by 8 threads at once, several times over
    with ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(lambda item: parse(item[1], f"{item[0]}.pdf").text, list(enumerate(documents)) * 4))

    # Then every result is what a lone parse gives
    assert texts == expected * 4


def _encrypted(data: bytes, user_password: str, algorithm: str = "RC4-128") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    # pypdf writes AES with the `cryptography` package, a dev dependency (through moto).
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm=algorithm)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def test_pdf_encrypted_only_against_editing_is_read() -> None:
    # Given a PDF encrypted with an owner password but an empty user password
    data = _encrypted(make_pdf(["Readable by anyone."]), user_password="")

    # When it is parsed
    document = parse(data, "restricted.pdf")

    # Then its text is read as usual
    assert document.text == "Readable by anyone."


def test_password_protected_pdf_is_a_parse_error() -> None:
    # Given a PDF that needs a password to open
    data = _encrypted(make_pdf(["Top secret."]), user_password="secret")

    # When it is parsed
    # Then the error says so
    with pytest.raises(ParseError, match=r"'locked\.pdf'.*password protected"):
        parse(data, "locked.pdf")


def test_pdf_encrypted_with_aes_and_an_empty_user_password_is_read() -> None:
    # Given a PDF encrypted with AES-256 (which pypdf could only read with a crypto library installed)
    data = _encrypted(make_pdf(["AES text."]), user_password="", algorithm="AES-256")

    # When it is parsed
    document = parse(data, "aes.pdf")

    # Then its text is read as usual
    assert document.text == "AES text."
