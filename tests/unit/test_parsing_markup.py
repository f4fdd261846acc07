"""citewise.ingest.parsing: Markdown and HTML structure."""

from __future__ import annotations

from citewise.ingest.parsing import parse
from tests.builders import assert_block_contract, blocks_of

# --- markdown ------------------------------------------------------------------------------------

GUIDE_MD = """\
---
layout: page
---
# Guide

Intro *text* with [a link](https://example.com).
Second line of the intro.

## Install

```bash
# a comment, not a heading
pip install citewise

echo done
```

- item one
- item two
  continued
1. numbered

Setext Title
============

Sub part
--------

| a | b |
|---|:-:|
| 1 | 2 |

***

### Deep ###
Text under deep.
#hashtag is not a heading
"""


def test_markdown_headings_give_the_heading_path_and_the_rest_stays_verbatim() -> None:
    # Given markdown with front matter, ATX and setext headings, a fenced block, a list and a table
    data = GUIDE_MD.encode()

    # When it is parsed
    document = parse(data, "guide.md")

    # Then heading markers are stripped, headings nest, the front matter is not text (its dates and title
    # are metadata), and every other construct is one verbatim block
    guide, install = ("Guide",), ("Guide", "Install")
    setext, sub = ("Setext Title",), ("Setext Title", "Sub part")
    assert blocks_of(document) == [
        ("Guide", guide, None, True),
        ("Intro *text* with [a link](https://example.com).\nSecond line of the intro.", guide, None, False),
        ("Install", install, None, True),
        ("```bash\n# a comment, not a heading\npip install citewise\n\necho done\n```", install, None, False),
        ("- item one", install, None, False),
        ("- item two\n  continued", install, None, False),
        ("1. numbered", install, None, False),
        ("Setext Title", setext, None, True),
        ("Sub part", sub, None, True),
        ("| a | b |", sub, None, False),
        ("| 1 | 2 |", sub, None, False),
        ("Deep", (*sub, "Deep"), None, True),
        ("Text under deep.\n#hashtag is not a heading", (*sub, "Deep"), None, False),
    ]
    assert document.title == "Guide"
    assert document.page_count is None
    assert_block_contract(document)


def test_markdown_sibling_heading_replaces_its_predecessor_and_a_shallower_one_closes_deeper_ones() -> None:
    # Given headings that go down two levels and back up
    data = b"# A\n## B\n### C\ntext c\n## D\ntext d\n# E\ntext e"

    # When it is parsed
    document = parse(data, "tree.markdown")

    # Then each block carries exactly its enclosing headings
    assert [(text, path) for text, path, _, _ in blocks_of(document)] == [
        ("A", ("A",)),
        ("B", ("A", "B")),
        ("C", ("A", "B", "C")),
        ("text c", ("A", "B", "C")),
        ("D", ("A", "D")),
        ("text d", ("A", "D")),
        ("E", ("E",)),
        ("text e", ("E",)),
    ]


def test_markdown_unclosed_fence_runs_to_the_end_and_hides_headings() -> None:
    # Given a fence that is never closed, with heading-like lines inside it
    data = b"# Real\n\n~~~\n# fake\n\n## fake too\n"

    # When it is parsed
    document = parse(data, "code.md")

    # Then the fence and everything after it is one code block under the real heading only
    assert blocks_of(document) == [
        ("Real", ("Real",), None, True),
        ("~~~\n# fake\n\n## fake too", ("Real",), None, False),
    ]


def test_markdown_without_a_level_one_heading_has_no_title() -> None:
    # Given markdown whose top heading is level 2
    # When it is parsed
    document = parse(b"## Section\n\nbody", "part.md")

    # Then there is no title rather than a misleading one
    assert document.title is None
    assert document.blocks[0].heading_path == ("Section",)


# --- html ----------------------------------------------------------------------------------------

ARTICLE_HTML = b"""<!DOCTYPE html>
<html><head><title>The  &amp; Title</title><style>p { color: red }</style>
<script>var x = "<p>not text</p>";</script></head>
<body><nav><ul><li>Home</li><li>About</li></ul></nav>
<h1>Main &mdash; Heading</h1>
<p>Para   one
 with <b>bold</b> and &lt;tags&gt;.</p>
<div>Loose div text<p>inner p</p>tail</div>
<ul><li>first</li><li>second <a href="x">link</a></ul>
<h2>Table</h2>
<table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td><p>1</p></td></tr><tr><td></td></tr></table>
<pre>  code line 1
    indented</pre>
<blockquote>Quoted text</blockquote>
<h3>Deep</h3><p>deep para<br>next line</p>
<h2>Other</h2>text after
<noscript>Enable JS</noscript>
</body></html>"""


def test_html_block_elements_become_blocks_under_their_headings() -> None:
    # Given an HTML page with chrome, headings, paragraphs, lists, a table, pre and a blockquote
    # When it is parsed
    document = parse(ARTICLE_HTML, "article.html")

    # Then chrome and code are skipped, entities decoded, whitespace collapsed except in <pre>,
    # table rows are blocks of " | "-joined non-empty cells, and headings nest by level
    main, table = ("Main — Heading",), ("Main — Heading", "Table")
    deep, other = (*table, "Deep"), ("Main — Heading", "Other")
    assert blocks_of(document) == [
        ("Main — Heading", main, None, True),
        ("Para one with bold and <tags>.", main, None, False),
        ("Loose div text", main, None, False),
        ("inner p", main, None, False),
        ("tail", main, None, False),
        ("first", main, None, False),
        ("second link", main, None, False),
        ("Table", table, None, True),
        ("Name | Value", table, None, False),
        ("alpha | 1", table, None, False),
        ("code line 1\n    indented", table, None, False),
        ("Quoted text", table, None, False),
        ("Deep", deep, None, True),
        ("deep para next line", deep, None, False),
        ("Other", other, None, True),
        ("text after", other, None, False),
    ]
    assert document.title == "The & Title"
    assert document.page_count is None
    assert_block_contract(document)


def test_html_without_title_element_takes_the_first_h1_and_survives_an_unclosed_head() -> None:
    # Given HTML whose <head> is never closed and that has no <title>
    data = b"<html><head><meta charset='utf-8'><h2>Intro</h2><h1>First &amp; Only</h1><p>x</p>"

    # When it is parsed
    document = parse(data, "page.htm", "text/html")

    # Then the body is still read, and the title falls back to the first h1
    assert document.title == "First & Only"
    assert [text for text, *_ in blocks_of(document)] == ["Intro", "First & Only", "x"]


def test_html_in_a_non_utf8_encoding_is_decoded() -> None:
    # Given an HTML page saved as Windows-1252
    data = "<p>“Smart quotes” and café</p>".encode("cp1252")

    # When it is parsed
    document = parse(data, "legacy.html")

    # Then the text is decoded correctly
    assert document.text == "“Smart quotes” and café"
