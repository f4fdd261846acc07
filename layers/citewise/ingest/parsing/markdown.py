"""Markdown: headings give structure; text is kept as written, less the markup a reader never sees.

Emphasis, links, list markers and code stay as written: they read fine to people and embedding models,
and removing them safely needs a full CommonMark parser. What the rendered page does not show is removed
(`citewise.ingest.parsing.markup`): front matter, inline HTML tags (their text kept), HTML comments and
entities, MkDocs attribute lists (`{ #id }`), include directives (`{* file *}`, `--8<--`, mkdocstrings'
`::: module.name`), lines of template tags (`{% raw %}`), the fences of `:::` containers and of
pymdown-extensions blocks (`/// tip | Title` ... `///`), the markers of indented admonitions (`!!! note
"Title"`, whose title and body are kept) and of content tabs (`=== "Python"`, whose body is kept). Code
(fenced blocks and code spans) is kept whole.

markdown-it-py with mdit-py-plugins was measured for this and not taken (docs/architecture.md, "Why no
Markdown library"): of these extensions its plugins read only the `!!!` admonitions, so the rest would be
rules of our own; and its inline tokens carry no source positions, so keeping text as written (and the
chunks of documents without such markup unchanged) would mean re-serialising every paragraph.
"""

from __future__ import annotations

import re
from datetime import datetime

from citewise.domain.models import ParsedDocument
from citewise.domain.provenance import parse_instant
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.failures import parse_error
from citewise.ingest.parsing.limits import ParseBudget
from citewise.ingest.parsing.markup import without_markup

# Every pattern here is applied to whole lines of tenant text, so none may backtrack over a line: a
# lazy `(.*?)` before `[ \t]*$`, or one character class on both sides of a literal, is quadratic in the
# line's length (a 10,000-space heading took 1.5 s, a 3 MB one days). What a pattern cannot say without
# that (the closing sequence of an ATX heading, a thematic break, a table delimiter row) is str methods.
_ATX_OPEN = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_TABLE_ROW = re.compile(r"^ {0,3}\|")
_FRONT_MATTER_FENCE = "---"
_FRONT_MATTER_END = ("---", "...")
_FRONT_MATTER_ENTRY = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_-]*):(?P<value>.*)")
_FRONT_MATTER_DATE_KEYS = ("updated", "last_modified", "lastmod", "modified", "date")
"""Front matter keys of the content's date, most specific first (`lastmod` is Hugo's)."""
_LINES_PER_CLOCK = 1024
_ADMONITION_MARKERS = ("!!!", "???", "???+")
_TAB_MARKER = "==="
"""MkDocs Material's content tab (`=== "Python"`): its body is indented as an admonition's, and its label,
like a `//// tab`'s, names an alternative rather than saying anything."""
_ADMONITION_INDENT = 4
_INCLUDE_OPEN, _INCLUDE_CLOSE = "{*", "*}"
"""FastAPI's include of a source file (`{* ../../docs_src/app.py hl[3] *}`): the file is not here to read."""
_SNIPPET = "--8<--"
"""pymdown-extensions' snippet include, one line (`--8<-- "file.md"`) or a block of file names."""
_TEMPLATE_OPEN, _TEMPLATE_CLOSE = "{%", "%}"
"""A line of template tags (`{% raw %}`, `{% for ... %}`: Jinja, mkdocs-macros), which the site's build runs."""
_DIRECTIVE = ":::"
"""mkdocstrings' API reference (`::: fastapi.APIRouter`, options indented under it), generated from code the
upload does not hold; or a container's fence (`:::tip` ... `:::`), whose body is not indented."""
_SKIPPED_HTML = (("<!--", "-->"), ("<script", "</script>"), ("<style", "</style>"))
"""HTML blocks whose content is not text, as an opening at a line's start and what ends them."""


def parse_markdown(text: str, filename: str, budget: ParseBudget | None = None) -> ParsedDocument:
    """Parse decoded Markdown (CommonMark/GFM subset and the MkDocs extensions above); the title is the
    first level-1 heading, else the front matter's `title`."""
    builder = DocumentBuilder(filename, budget)
    reader = _MarkdownReader(builder, budget)
    reader.read(text.split("\n"))
    front_matter = _front_matter(reader.front_matter)
    title = builder.first_heading(1) or without_markup(front_matter.get("title", "")) or None
    return builder.build(title=title, source_date=_front_matter_date(front_matter, filename))


def _front_matter(lines: list[str]) -> dict[str, str]:
    """The top-level `key: value` lines of YAML front matter, keys lower-cased, quotes optional."""
    values: dict[str, str] = {}
    for line in lines:
        match = _FRONT_MATTER_ENTRY.match(line)
        if match:
            values.setdefault(match["key"].lower(), match["value"].strip().strip("'\""))
    return values


def _front_matter_date(values: dict[str, str], filename: str) -> datetime | None:
    """The first of `_FRONT_MATTER_DATE_KEYS` (`updated` ... `date`) in the front matter.

    The author wrote it, so a value that is not an ISO-8601 date fails the document with the reason."""
    for key in _FRONT_MATTER_DATE_KEYS:
        if values.get(key):
            try:
                return parse_instant(values[key])
            except ValueError:
                raise parse_error(
                    filename, f"front matter '{key}' is not a date: {values[key]!r} (use ISO 8601, e.g. 2026-03-03)"
                ) from None
    return None


class _MarkdownReader:
    def __init__(self, builder: DocumentBuilder, budget: ParseBudget | None) -> None:
        self._builder = builder
        self._budget = budget
        self._pending: list[str] = []
        self._pending_is_paragraph = False
        self._fence: str | None = None
        self._fenced: list[str] = []
        self._admonitions = 0  # open `!!!` admonitions: each indents its body four more columns
        self._skip_until: str | None = None  # the end of an HTML comment, script or style block, or snippets
        self._skip_indented = False  # a `:::` directive's options, indented under it
        self.front_matter: list[str] = []

    def read(self, lines: list[str]) -> None:
        for number, line in enumerate(self._skip_front_matter(lines)):
            # The builder checks the time as blocks are added; lines that add none (includes, comments,
            # block fences) are checked here, so a file of nothing else still stops at the time limit.
            if self._budget is not None and number % _LINES_PER_CLOCK == 0:
                self._budget.check_time()
            self._line(self._in_admonitions(line))
        self._close_blocks()

    def _skip_front_matter(self, lines: list[str]) -> list[str]:
        # YAML front matter would otherwise read as a thematic break plus a setext heading.
        if not lines or lines[0].rstrip() != _FRONT_MATTER_FENCE:
            return lines
        for end, line in enumerate(lines[1:], start=1):
            if line.rstrip() in _FRONT_MATTER_END:
                self.front_matter = lines[1:end]
                return lines[end + 1 :]
        return lines

    def _in_admonitions(self, line: str) -> str:
        """`line` as the innermost open admonition's body sees it; a line indented less closes those
        admonitions it is not indented for (as Python-Markdown's admonition ends)."""
        if not self._admonitions or not line.strip():
            return line
        body = line.lstrip(" \t")
        leading = line[: len(line) - len(body)].expandtabs(4)
        depth = min(self._admonitions, len(leading) // _ADMONITION_INDENT)
        if depth < self._admonitions:
            self._close_blocks()
            self._admonitions = depth
        return leading[depth * _ADMONITION_INDENT :] + body

    def _line(self, line: str) -> None:
        if self._fence is not None:
            self._fenced.append(line)
            if _closes_fence(line, self._fence):
                self._builder.block("\n".join(self._fenced))
                self._fence = None
            return
        if self._skip_until is not None:
            if self._skip_until in line.lower():
                self._skip_until = None
            return
        stripped = line.strip()
        if self._skip_indented:
            if not stripped or line[:1] in (" ", "\t"):
                return
            self._skip_indented = False
        if not stripped:
            self._flush()
            return
        if fence := _FENCE_OPEN.match(line):
            self._flush()
            self._fence = fence.group(1)
            self._fenced = [line]
            return
        if atx := _atx_heading(line):
            self._flush()
            self._builder.heading(without_markup(atx[1]), atx[0])
            return
        if self._pending_is_paragraph and (setext := _SETEXT_UNDERLINE.match(line)):
            level = 1 if setext.group(1).startswith("=") else 2
            self._builder.heading(without_markup(" ".join(self._pending)), level)
            self._pending = []
            self._pending_is_paragraph = False
            return
        if _is_thematic_break(line) or self._extension(line, stripped):
            self._flush()
            return
        if _TABLE_ROW.match(line):
            self._flush()
            if not _is_table_delimiter(line):
                self._builder.block(without_markup(line))
            return
        if _LIST_ITEM.match(line):
            self._flush()
            self._pending = [line]
            return
        if not self._pending:
            self._pending_is_paragraph = True
        # A non-blank line continues the open paragraph or list item (CommonMark "lazy continuation").
        self._pending.append(line)

    def _extension(self, line: str, stripped: str) -> bool:
        """Read `line` if it is the markup of an extension, or opens an HTML block whose content is not
        text; whether it was (an admonition's or block's title is then added as a paragraph).

        Includes, template tags and block fences are recognised at any indentation (they are met inside
        list items); directives, admonitions, tabs and HTML blocks, whose bodies are read by indentation,
        at up to three spaces."""
        if stripped.startswith(_INCLUDE_OPEN) and stripped.endswith(_INCLUDE_CLOSE):
            return True
        if stripped.startswith(_SNIPPET):
            if stripped == _SNIPPET:
                self._skip_until = _SNIPPET  # the block form: file names up to the next `--8<--`
            return True
        if stripped.startswith(_TEMPLATE_OPEN) and stripped.endswith(_TEMPLATE_CLOSE):
            return True
        if (title := _block_fence_title(stripped)) is not None:
            self._flush()
            self._builder.block(without_markup(title))
            return True
        if len(line) - len(line.lstrip(" ")) > 3:
            return False
        if stripped.startswith(_DIRECTIVE):
            self._skip_indented = True
            return True
        lowered = stripped[:8].lower()
        for opening, closing in _SKIPPED_HTML:
            # `<style>` or `<style media=x>`, not `<styled-note>`; a comment's text may follow at once.
            ends_name = opening == "<!--" or lowered[len(opening) : len(opening) + 1] in ("", " ", ">")
            if lowered.startswith(opening) and ends_name and closing not in stripped[len(opening) :].lower():
                self._skip_until = closing
                return True
        if (title := _admonition_title(stripped)) is not None:
            self._flush()
            self._builder.block(without_markup(title))
            self._admonitions += 1
            return True
        return False

    def _flush(self) -> None:
        if self._pending:
            self._builder.block(without_markup("\n".join(self._pending)))
        self._pending = []
        self._pending_is_paragraph = False

    def _close_blocks(self) -> None:
        """End the open paragraph and fence: the end of the document or of an admonition."""
        if self._fence is not None:
            # An unclosed fence runs to the end of its container, as in CommonMark.
            self._builder.block("\n".join(self._fenced))
            self._fence = None
        self._flush()


def _admonition_title(line: str) -> str | None:
    """The title of an admonition's opening line (`!!! note "Title"`, `??? tip`, `???+ tip`), "" for
    one without a title and for a content tab (`=== "Python"`); None for any other line."""
    marker, _, rest = line.partition(" ")
    if marker == _TAB_MARKER and rest.startswith('"'):
        return ""
    if marker not in _ADMONITION_MARKERS or not rest.strip():
        return None
    first, last = rest.find('"'), rest.rfind('"')
    return rest[first + 1 : last].strip() if first < last else ""


def _block_fence_title(line: str) -> str | None:
    """The title of a pymdown-extensions block fence (`/// tip | Title`), "" for one without a title or
    for a tab's label (`//// tab | Python 3.10+`) and for a closing fence; None for any other line."""
    body = line.lstrip("/")
    if len(line) - len(body) < 3:
        return None
    name, _, title = body.partition("|")
    name = name.strip()
    if name and not name.replace("-", "").replace("_", "").isalnum():
        return None
    return "" if name.lower() == "tab" else title.strip()


def _atx_heading(line: str) -> tuple[int, str] | None:
    """An ATX heading's level and text: `#`s, then the text without a closing run of `#`s after a space."""
    opening = _ATX_OPEN.match(line)
    if opening is None:
        return None
    text = line[opening.end() :].strip(" \t")
    unclosed = text.rstrip("#")
    if unclosed != text and unclosed[-1:] in (" ", "\t"):
        text = unclosed.rstrip(" \t")
    return len(opening.group(1)), text


def _is_thematic_break(line: str) -> bool:
    """Up to three spaces, then three or more of one of `-*_`, spaces and tabs between and after."""
    body = line.lstrip(" ")
    if len(line) - len(body) > 3 or body[:1] not in ("-", "*", "_"):
        return False
    return body.count(body[0]) >= 3 and not body.strip(f" \t{body[0]}")


def _is_table_delimiter(line: str) -> bool:
    """A GFM table's delimiter row: only `|`, `:`, `-`, spaces and tabs, and a `-` among them."""
    return "-" in line and not line.strip(" \t|:-")


def _closes_fence(line: str, fence: str) -> bool:
    # A closing fence repeats the opening character at least as many times, and nothing else.
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3 and stripped.startswith(fence) and stripped == fence[0] * len(stripped)
    )
