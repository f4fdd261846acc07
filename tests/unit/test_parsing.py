"""citewise.ingest.parsing: format dispatch, errors, text decoding and plain text."""

from __future__ import annotations

import codecs
import os

import pytest

from citewise.domain.errors import ParseError, UnsupportedMediaTypeError
from citewise.ingest.parsing import SUPPORTED_EXTENSIONS, parse
from tests.builders import assert_block_contract, blocks_of

# --- format dispatch -----------------------------------------------------------------------------


def test_extension_picks_the_format_case_insensitively() -> None:
    # Given markdown in a file with an upper-case extension
    data = b"# Title\n\nBody"

    # When it is parsed
    document = parse(data, "notes/README.MD")

    # Then it is read as markdown: the heading marker is gone and the heading is structure
    assert document.text == "Title\n\nBody"
    assert document.title == "Title"


def test_extension_wins_over_content_type() -> None:
    # Given HTML markup in a .txt file that is labelled as text/html
    data = b"<h1>Not a heading</h1>"

    # When it is parsed
    document = parse(data, "page.txt", "text/html")

    # Then the extension decides: it is plain text and the tags are kept verbatim
    assert document.text == "<h1>Not a heading</h1>"
    assert document.title is None


def test_content_type_is_the_fallback_when_the_extension_says_nothing() -> None:
    # Given a file without an extension, labelled markdown with a charset parameter
    data = b"Heading\n=======\n\ntext"

    # When it is parsed
    document = parse(data, "object-key", "Text/Markdown; charset=utf-8")

    # Then it is read as markdown
    assert blocks_of(document) == [("Heading", ("Heading",), None, True), ("text", ("Heading",), None, False)]


@pytest.mark.parametrize(
    ("filename", "content_type"),
    [("report.exe", None), ("report", "application/octet-stream"), ("archive.tar.gz", None), ("x", None)],
)
def test_unknown_format_is_unsupported_and_lists_the_supported_ones(filename: str, content_type: str | None) -> None:
    # Given a file whose extension and content type are both unknown
    # When it is parsed
    with pytest.raises(UnsupportedMediaTypeError) as raised:
        parse(b"some bytes", filename, content_type)

    # Then the error names the file and every supported format
    assert repr(filename) in raised.value.message
    for extension in (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx"):
        assert extension in raised.value.message
    assert raised.value.details["supported_extensions"] == list(SUPPORTED_EXTENSIONS)
    assert raised.value.code == "UNSUPPORTED_MEDIA_TYPE"


@pytest.mark.parametrize("filename", ["empty.txt", "empty.md", "empty.html", "empty.pdf", "empty.docx"])
def test_empty_file_is_a_parse_error(filename: str) -> None:
    # Given an empty file of any supported format
    # When it is parsed
    with pytest.raises(ParseError, match="empty") as raised:
        parse(b"", filename)

    # Then the error names the file
    assert repr(filename) in raised.value.message
    assert raised.value.details == {"filename": filename}


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("blank.txt", b" \n\t\r\n  \n"),
        ("blank.md", b"\n\n   \n#\n---\n"),
        ("blank.html", b"<html><head><title>T</title></head><body> <p> &nbsp; </p><script>x()</script>"),
    ],
)
def test_whitespace_only_document_has_no_text(filename: str, data: bytes) -> None:
    # Given a document with nothing but whitespace and markup
    # When it is parsed
    # Then it is a parse error saying there is no text
    with pytest.raises(ParseError, match=f"'{filename}'.*no text"):
        parse(data, filename)


# --- text decoding -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("He said “Café” – naïve résumé.", "cp1252"),
        ("Le garçon a mangé une crème brûlée.", "latin-1"),
        ("café naïve façade", "latin-1"),
        ("Ünïcödé text", "utf-16"),
        ("€ in UTF-32", "utf-32"),
        ("BOM then “text”", "utf-8-sig"),
        ("plain “utf-8” ✓", "utf-8"),
    ],
)
def test_text_is_decoded_whatever_the_encoding(text: str, encoding: str) -> None:
    # Given text in a legacy encoding, or in Unicode with or without a BOM
    data = text.encode(encoding)

    # When it is parsed
    document = parse(data, "note.txt")

    # Then the characters come out right and no BOM is left
    assert document.text == text


def test_big_endian_utf16_with_bom_and_crlf_is_decoded() -> None:
    # Given UTF-16 big-endian text with a BOM and Windows line ends
    data = codecs.BOM_UTF16_BE + "first “line”\r\nsecond".encode("utf-16-be")

    # When it is parsed
    document = parse(data, "be.txt")

    # Then it is decoded and the line end normalised
    assert document.text == "first “line”\nsecond"


def test_newlines_are_normalised_and_control_characters_dropped() -> None:
    # Given text with CRLF and CR line ends, a NUL, a bell, a form feed and a tab
    data = b"one\x00 two\x07\r\nthree\rfour\x0c\tfive"

    # When it is parsed
    document = parse(data, "old.txt")

    # Then newlines are "\n", tabs stay and the other controls are gone
    assert document.text == "one two\nthree\nfour\tfive"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(os.urandom(4096), id="random-bytes"),
        pytest.param(b"\x00" * 1000 + b"a little text", id="mostly-nul"),
        pytest.param(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, id="png-like"),
    ],
)
def test_binary_bytes_named_txt_are_a_parse_error(data: bytes) -> None:
    # Given binary bytes in a file named .txt
    # When it is parsed
    # Then it is rejected as not text instead of being indexed as garbage
    with pytest.raises(ParseError, match="'blob.txt'.*(binary|not text)"):
        parse(data, "blob.txt")


# --- plain text ----------------------------------------------------------------------------------


def test_plain_text_paragraphs_are_split_on_blank_lines() -> None:
    # Given paragraphs separated by blank and whitespace-only lines, some lines indented
    data = b"  First paragraph\n  still the first.\n\n \t \n\nSecond paragraph.  \n\n\n"

    # When it is parsed
    document = parse(data, "notes.txt")

    # Then each paragraph is one stripped block, and the blocks are joined by a blank line
    assert document.text == "First paragraph\n  still the first.\n\nSecond paragraph."
    assert blocks_of(document) == [
        ("First paragraph\n  still the first.", (), None, False),
        ("Second paragraph.", (), None, False),
    ]
    assert [(block.start, block.end) for block in document.blocks] == [(0, 34), (36, 53)]
    assert document.title is None
    assert document.page_count is None
    assert_block_contract(document)
