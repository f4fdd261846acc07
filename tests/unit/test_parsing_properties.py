"""citewise.ingest.parsing: the block contract holds for any text, not only for the examples we thought of."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.domain.errors import ParseError
from citewise.ingest.parsing import parse
from tests.builders import assert_block_contract

_WORDS = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
_MARKDOWN_LINES = st.one_of(
    _WORDS,
    st.builds(lambda level, title: "#" * level + " " + title, st.integers(1, 7), _WORDS),
    st.sampled_from(["", " ", "\t", "```", "~~~~", "---", "===", "***", "| a | b |", "|---|", "> quote"]),
    # the MkDocs extensions and inline HTML the markup rules remove
    st.sampled_from(
        [
            "/// tip | T",
            "///",
            "//// tab | x",
            '!!! note "T"',
            "???+ tip",
            "    body",
            "{* f.py *}",
            "--8<--",
            '--8<-- "a.md"',
            "<div>",
            "</div>",
            "<!--",
            "-->",
            "<script>",
            "# t { #id }",
            "<abbr title='x'>A</abbr>",
            "&amp; `<b>`",
            "{: .c }",
        ]
    ),
    st.builds(lambda marker, text: f"{marker} {text}", st.sampled_from(["-", "*", "+", "1.", "2)"]), _WORDS),
    st.builds(lambda indent, text: " " * indent + text, st.integers(0, 6), _WORDS),
)
_NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])
_MARKDOWN = st.builds(lambda lines, newline: newline.join(lines), st.lists(_MARKDOWN_LINES, max_size=30), _NEWLINES)
_HTML_PIECES = st.one_of(
    _WORDS,
    st.sampled_from(
        [
            "<h1>",
            "</h1>",
            "<h3>",
            "</h3>",
            "<p>",
            "</p>",
            "<li>",
            "<ul>",
            "</ul>",
            "<pre>",
            "</pre>",
            "<br>",
            "<table>",
            "<tr>",
            "<td>",
            "</td>",
            "</tr>",
            "</table>",
            "<script>",
            "</script>",
            "<nav>",
            "</nav>",
            "<head>",
            "</head>",
            "<title>",
            "</title>",
            "<div>",
            "</div>",
            "&amp;",
            "&nbsp;",
            "\n",
            "  ",
        ]
    ),
)
_HTML = st.builds("".join, st.lists(_HTML_PIECES, max_size=40))


def _check_contract_unless_refused(text: str, filename: str) -> None:
    try:
        document = parse(text.encode(), filename)
    except ParseError:
        # Text that is blank, or mostly control characters, is refused; that is not a contract breach.
        return
    assert_block_contract(document)


@settings(max_examples=150, deadline=None)
@given(_MARKDOWN)
def test_markdown_blocks_are_ordered_disjoint_stripped_and_cover_all_text(markdown: str) -> None:
    # Given any markdown-like text
    # When it is parsed as markdown and as plain text
    # Then both obey the block contract
    _check_contract_unless_refused(markdown, "generated.md")
    _check_contract_unless_refused(markdown, "generated.txt")


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_arbitrary_text_obeys_the_block_contract(text: str) -> None:
    # Given arbitrary Unicode text, control characters and odd whitespace included
    # When it is parsed as plain text, markdown and HTML
    # Then every result obeys the block contract
    for filename in ("any.txt", "any.md", "any.html"):
        _check_contract_unless_refused(text, filename)


@settings(max_examples=150, deadline=None)
@given(_HTML)
def test_html_blocks_obey_the_block_contract(html: str) -> None:
    # Given HTML-like text with unbalanced and misnested tags
    # When it is parsed as HTML
    # Then the result obeys the block contract
    _check_contract_unless_refused(html, "generated.html")


def _visible(text: str) -> list[str]:
    return [char for char in text if not char.isspace() and ord(char) >= 0x20]


@settings(max_examples=150, deadline=None)
@given(_MARKDOWN)
def test_plain_text_keeps_every_visible_character_in_order(text: str) -> None:
    # Given any text
    # When it is parsed as plain text
    try:
        document = parse(text.encode(), "generated.txt")
    except ParseError as error:
        # Then it is refused only when it has nothing visible or is mostly control characters
        assert not _visible(text) or "binary" in error.message
        return

    # Then, or else, nothing but whitespace and control characters is lost (a leading BOM is dropped)
    assert _visible(document.text) == _visible(text.removeprefix("\ufeff"))
