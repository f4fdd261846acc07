"""citewise.ingest.parsing: the markup of real documentation never reaches titles, section paths or text.

The Markdown cases are the extensions the FastAPI documentation (MkDocs Material, pymdown-extensions)
is written in; the HTML ones what documentation generators put in headings; the PDF ones the hard line
breaks of a page.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from benchmarks.inputs import metadata
from benchmarks.markup_leftovers import prose
from citewise.ingest.chunking import Chunker
from citewise.ingest.parsing import parse
from citewise.ingest.parsing.pdf_lines import join_lines
from tests.builders import assert_block_contract, blocks_of, make_pdf

# --- markdown ------------------------------------------------------------------------------------

MKDOCS_MD = """\
---
title: Not the title
updated: 2026-03-03
---
# Security - First Steps { #security-first-steps }

Use <abbr title="JSON Web Tokens">JWT</abbr> tokens &amp; keep `<abbr>` and `{ #id }` in code, \\<b> escaped.

## Data <dfn title="also known as: serialization">conversion</dfn> { #data-conversion }

{* ../../docs_src/security/tutorial001_an_py310.py hl[3] *}

--8<-- "includes/abbreviations.md"

/// tip | Technical Details

Body of the tip.

```console
$ echo "<b>kept</b> /// {* kept *}"
```

///

/// note

Untitled note body.

///

//// tab | Python 3.10+

Tabbed text.

////

!!! warning "Careful"
    Indented body.

    ```python
    # a comment, not a heading
    x = 1
    ```

After the admonition.

<div class="termy">

```console
$ fastapi dev
```

</div>

<img src="/img/tutorial/x.png">
<!-- a comment -->
"""


def test_mkdocs_markup_never_reaches_titles_section_paths_or_text() -> None:
    # Given a page written as the FastAPI documentation is: front matter, attribute lists on headings,
    # inline HTML, include directives, pymdownx blocks (titled, untitled, a tab), an indented admonition
    # and HTML blocks around a fence
    data = MKDOCS_MD.encode()

    # When it is parsed
    document = parse(data, "first-steps.md")

    # Then headings and text read as the rendered page does; code keeps every character it had
    top = ("Security - First Steps",)
    data_conversion = (*top, "Data conversion")
    assert blocks_of(document) == [
        ("Security - First Steps", top, None, True),
        ("Use JWT tokens & keep `<abbr>` and `{ #id }` in code, \\<b> escaped.", top, None, False),
        ("Data conversion", data_conversion, None, True),
        ("Technical Details", data_conversion, None, False),
        ("Body of the tip.", data_conversion, None, False),
        ('```console\n$ echo "<b>kept</b> /// {* kept *}"\n```', data_conversion, None, False),
        ("Untitled note body.", data_conversion, None, False),
        ("Tabbed text.", data_conversion, None, False),
        ("Careful", data_conversion, None, False),
        ("Indented body.", data_conversion, None, False),
        ("```python\n# a comment, not a heading\nx = 1\n```", data_conversion, None, False),
        ("After the admonition.", data_conversion, None, False),
        ("```console\n$ fastapi dev\n```", data_conversion, None, False),
    ]
    assert document.title == "Security - First Steps"
    assert document.source_date == datetime(2026, 3, 3, tzinfo=UTC)
    assert_block_contract(document)


def test_chunks_of_an_mkdocs_page_carry_no_markup_in_text_or_section_paths() -> None:
    # Given the MkDocs page above, parsed and chunked as ingest does (a small budget: several chunks)
    parsed = parse(MKDOCS_MD.encode(), "first-steps.md")
    chunks = Chunker(max_tokens=32, overlap=4).split(parsed, metadata("first-steps.md", parsed.title))

    # When their text outside code (fences and code spans blanked, as the leftovers benchmark reads it) and
    # their section paths are read
    outside_code = prose(parsed)
    texts = [outside_code[chunk.start : chunk.end] for chunk in chunks]
    paths = {heading for chunk in chunks for heading in chunk.heading_path}

    # Then no markup of the page is in either
    for markup in ("{ #", "{*", "--8<--", "///", "!!!", "<abbr", "<div", "<img", "<!--", "&amp;", "title:"):
        assert not any(markup in text for text in texts), markup
        assert not any(markup in heading for heading in paths), markup
    assert paths == {"Security - First Steps", "Data conversion"}


@pytest.mark.parametrize(
    ("heading", "title"),
    [
        ("# Background Tasks { #background-tasks }", "Background Tasks"),
        ("# Install {#install}", "Install"),
        ("# Install {: #install .wide data-x=1 }", "Install"),
        ("# Sets {a, b} stay", "Sets {a, b} stay"),
        ("# Empty {}", "Empty {}"),
        ("# Assign {x=1}", "Assign {x=1}"),
        ("# Styled {: style=wide }", "Styled"),
        ("# A <b>bold</b> move", "A bold move"),
        ("# `<b>` is code", "`<b>` is code"),
    ],
)
def test_a_heading_title_has_no_attribute_list_or_html_tags(heading: str, title: str) -> None:
    # Given a heading with an attribute list, inline HTML, or braces that are not an attribute list
    # When it is parsed
    document = parse(f"{heading}\n\ntext".encode(), "heading.md")
    # Then the title and the section path are its text only
    assert document.title == title
    assert document.blocks[-1].heading_path == (title,)


@pytest.mark.parametrize(
    ("markdown", "text"),
    [
        (
            "| `contact` | <details><summary><code>contact</code> fields</summary><table><tr><th>Name</th>"
            "<th>Type</th></tr><tr><td><code>url</code></td><td>str</td></tr></table></details> |",
            "| `contact` | contact fields Name Type url str |",
        ),
        ("One line<br>the next<br/> and <b>bold</b>.", "One line the next and bold."),
        ("<p>First.</p>\n<p>Second.</p>", "First.\nSecond."),
    ],
)
def test_html_that_breaks_text_leaves_a_space_and_inline_html_leaves_none(markdown: str, text: str) -> None:
    # Given HTML inside Markdown: a table in a table cell (as FastAPI's metadata page has), line breaks
    # When it is parsed / Then cells, paragraphs and breaks stay apart by one space, inline tags by none
    assert parse(markdown.encode(), "cells.md").text == text


def test_a_front_matter_title_is_the_title_when_there_is_no_level_one_heading() -> None:
    # Given front matter with a title and a page whose headings start at level 2
    data = b"---\ntitle: 'Release notes'\n---\n## 0.1.0\n\nFirst release."
    # When it is parsed
    document = parse(data, "notes.md")
    # Then the front matter names the document and is not part of its text
    assert document.title == "Release notes"
    assert document.text == "0.1.0\n\nFirst release."


# --- html ----------------------------------------------------------------------------------------


def test_html_permalinks_in_headings_are_not_part_of_titles_or_paths() -> None:
    # Given a page as MkDocs, Sphinx and GitHub render headings: a permalink anchor inside each
    data = (
        b'<h1>Background Tasks<a class="headerlink" href="#bt" title="Permanent link">&para;</a></h1>'
        b'<h2 id="x"><a href="#x" aria-hidden="true" class="anchor"><svg><path d="M0"/></svg></a>Install</h2>'
        b'<p>Use <abbr title="JSON Web Tokens">JWT</abbr> and <code>&lt;div&gt;</code>.</p>'
        b'<p>Links <a href="https://example.com" class="external">stay</a> as text.</p>'
    )
    # When it is parsed
    document = parse(data, "tasks.html")
    # Then headings read without the permalink, inline markup is dropped and its text kept
    path = ("Background Tasks", "Install")
    assert blocks_of(document) == [
        ("Background Tasks", path[:1], None, True),
        ("Install", path, None, True),
        ("Use JWT and <div>.", path, None, False),
        ("Links stay as text.", path, None, False),
    ]
    assert document.title == "Background Tasks"


# --- pdf -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "joined"),
    [
        (["The queue is drained", "every night at two."], "The queue is drained every night at two."),
        (["Ingestion is idempo-", "tent by design."], "Ingestion is idempotent by design."),
        (["Ingestion is idempo-\ntent by design."], "Ingestion is idempotent by design."),
        (
            ["aws sqs start-message-move-task --max-", "number-of-messages 10"],
            "aws sqs start-message-move-task --max-number-of-messages 10",
        ),
        (["Set it to 2-", "3 retries."], "Set it to 2-3 retries."),
        (
            ["Steps:", "• drain the queue", "• restart", "1. then check", "2) and report"],
            "Steps:\n• drain the queue\n• restart\n1. then check\n2) and report",
        ),
        (["- a dash item", "- another"], "- a dash item\n- another"),
        (
            [
                "What runs where",
                "Three Lambda functions do the work. The ingest function reads notifications",
                "from SQS.",
            ],
            "What runs where\nThree Lambda functions do the work. The ingest function reads notifications from SQS.",
        ),
    ],
)
def test_pdf_lines_of_a_paragraph_are_joined_and_hyphenation_undone(lines: list[str], joined: str) -> None:
    # Given the lines of one paragraph as a page sets them / When joined / Then they read as one text,
    # a word hyphenated at a line end whole again, list items and a line the author ended early (a run-in
    # heading, far shorter than the paragraph's lines) still on lines of their own
    assert join_lines(lines) == joined


def test_pdf_paragraph_wrapped_over_several_lines_is_one_line_of_text() -> None:
    # Given a paragraph long enough to wrap over several lines of the page
    sentence = "Every ticket is acknowledged within fifteen minutes by the engineer on call. "
    data = make_pdf([(sentence * 5).strip()])

    # When it is parsed
    document = parse(data, "wrapped.pdf")

    # Then the paragraph is one block whose text has no line breaks, as a quote of it should read
    assert blocks_of(document) == [((sentence * 5).strip(), (), 1, False)]


def test_material_content_tabs_keep_their_bodies_and_drop_their_labels() -> None:
    # Given MkDocs Material content tabs, each body indented under its label
    data = b'# Install\n\n=== "pip"\n\n    ```\n    pip install x\n    ```\n\n=== "uv"\n    With uv.\n\nDone.\n'
    # When it is parsed
    document = parse(data, "tabs.md")
    # Then each body is read as if not indented, and the labels are not text
    assert [text for text, *_ in blocks_of(document)] == ["Install", "```\npip install x\n```", "With uv.", "Done."]


def test_a_tag_name_that_only_starts_like_style_does_not_hide_the_text_after_it() -> None:
    # Given a custom element whose name starts with "style" (only <style> hides its content)
    document = parse(b"<styled-note>\n\nVisible text.\n", "custom.md")
    # When parsed / Then the text after it is kept
    assert document.text == "Visible text."


@pytest.mark.parametrize(
    ("markdown", "texts"),
    [
        (  # mkdocstrings: the API reference generated from code the upload does not hold, with its options
            "Import it:\n\n::: fastapi.APIRouter\n    options:\n        members:\n            - get\n\nAfter.",
            ["Import it:", "After."],
        ),
        ("{% raw %}\n\n```jinja\n{{ x }}\n```\n\n{% endraw %}\n\nText.", ["```jinja\n{{ x }}\n```", "Text."]),
        (":::tip\n\nA container's body.\n\n:::", ["A container's body."]),
    ],
    ids=["mkdocstrings", "template-tags", "container"],
)
def test_directive_lines_that_render_to_something_else_are_not_text(markdown: str, texts: list[str]) -> None:
    # Given a directive MkDocs plugins or a template engine replace when the site is built
    # When the page is parsed / Then the directive is not text, what it wraps is
    assert [text for text, *_ in blocks_of(parse(markdown.encode(), "page.md"))] == texts
