"""Inline markup a rendered Markdown page does not show: HTML tags and comments, entities, attribute lists.

`without_markup` is applied to every paragraph, list item, table row, heading and admonition title of a
Markdown document, never to code: code spans are found first (CommonMark's rule, a run of backticks
closed by the next run of the same length) and kept byte for byte, as are fenced blocks, which the
reader never passes here. Text without `<`, `&` or `{` is returned as it is, so a document without such
markup keeps its chunks, and their embeddings, exactly.

Everything here is linear in the text: tenant text reaches it, and every pattern is either possessive or
bounded, and every search (`str.find`) starts after the previous one ended.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

# Tags of HTML elements (and custom elements, which have a hyphen): anything else between `<` and `>`
# is text an author meant to show, such as `List<T>` or `<placeholder>`.
_HTML_ELEMENTS = frozenset(
    """a abbr acronym address area article aside audio b bdi bdo big blockquote body br button canvas
    caption center cite code col colgroup data datalist dd del details dfn dialog div dl dt em embed
    fieldset figcaption figure font footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img
    input ins kbd label legend li link main map mark menu meta meter nav noscript object ol optgroup option
    output p param picture pre progress q rp rt ruby s samp script search section select slot small source
    span strike strong style sub summary sup svg table tbody td template textarea tfoot th thead time title
    tr track tt u ul var video wbr""".split()
)
# Tags that end or start a run of text (cells, paragraphs, list items, line breaks): the text on either
# side stays apart, by one space. Inline tags (`<abbr>`, `<code>`, `<b>`) leave nothing between their text.
_BREAKING_ELEMENTS = frozenset(
    """address article aside blockquote br caption dd details dialog div dl dt fieldset figcaption figure
    footer form h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section summary table tbody td tfoot th
    thead tr ul""".split()
)
_BREAK = "\x00"
"""Where a breaking tag was: decoded text never holds it (`clean_text` drops C0 controls)."""
_BREAKS = re.compile(_BREAK + "+")
_TAG = re.compile(r"(?<!\\)</?([A-Za-z][A-Za-z0-9-]*+)(?:[ \t\n/][^<>]*+)?>")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_BACKTICKS = re.compile(r"`+")


def without_markup(text: str) -> str:
    """`text` without HTML tags, comments and attribute lists, entities decoded; code spans untouched."""
    if "<" not in text and "&" not in text and "{" not in text:
        return text
    return "".join(part if is_code else _prose(part) for part, is_code in _code_spans(text))


def _is_attribute_list(inner: str) -> bool:
    """Whether the text between braces is an attribute list: `#id`, `.class` and `key=value` items, with
    an id or a class among them or kramdown's leading `:`. `{a, b}`, `{}` or `{x=1}` are text."""
    marked = inner.lstrip().startswith(":")
    items = inner.strip().removeprefix(":").split()
    return (
        bool(items)
        and all(_is_attribute(item) for item in items)
        and (marked or any(item[0] in "#." for item in items))
    )


def _is_attribute(item: str) -> bool:
    if item[0] in "#.":
        name = item[1:]
        return bool(name) and (name[0].isalpha() or name[0] in "_-")
    key, equals, _value = item.partition("=")
    return bool(equals) and key.replace("-", "").replace("_", "").isalnum()


def _prose(text: str) -> str:
    return _ENTITY.sub(_entity, _without_tags(_without_attribute_lists(_without_comments(text))))


def _without_tags(text: str) -> str:
    """`text` without HTML tags: each run of breaking tags leaves one space, unless whitespace is next to
    it (`str</td></tr></table> |` reads `str |`, `</p>` before a line break leaves nothing)."""
    marked = _TAG.sub(_tag, text)
    return _BREAKS.sub(_break, marked) if _BREAK in marked else marked


def _tag(match: re.Match[str]) -> str:
    name = match.group(1).lower()
    if name in _BREAKING_ELEMENTS:
        return _BREAK
    return "" if name in _HTML_ELEMENTS or "-" in name else match.group(0)


def _break(match: re.Match[str]) -> str:
    text, (start, end) = match.string, match.span()
    return "" if text[start - 1 : start].isspace() or text[end : end + 1].isspace() else " "


def _entity(match: re.Match[str]) -> str:
    return html.unescape(match.group(0))


def _without_comments(text: str) -> str:
    """`text` without `<!-- ... -->`; an unclosed comment is left as written."""
    parts = []
    position = 0
    while (start := text.find("<!--", position)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break
        parts.append(text[position:start])
        position = end + 3
    return "".join(parts) + text[position:] if parts else text


def _without_attribute_lists(text: str) -> str:
    """`text` without `{ #id }`-style attribute lists, wherever attr_list allows them (after a heading,
    a paragraph, a link or an image), with the spaces before them."""
    parts = []
    position = 0
    while (opening := text.find("{", position)) >= 0:
        closing = text.find("}", opening + 1)
        if closing < 0:
            break
        nested = text.rfind("{", opening + 1, closing)
        if nested >= 0:
            # Only the innermost brace before `}` can open an attribute list; continue from there.
            parts.append(text[position:nested])
            position = nested
        elif _is_attribute_list(text[opening + 1 : closing]):
            parts.append(text[position:opening].rstrip(" \t"))
            position = closing + 1
        else:
            parts.append(text[position : closing + 1])
            position = closing + 1
    return "".join(parts) + text[position:] if parts else text


def _code_spans(text: str) -> Iterator[tuple[str, bool]]:
    """`text` cut into runs of prose and code spans, in order, each with whether it is code."""
    runs = [match.span() for match in _BACKTICKS.finditer(text)]
    # The next run of the same length after each run: a code span's closing run (CommonMark 6.1).
    closers: list[int | None] = [None] * len(runs)
    last_of_length: dict[int, int] = {}
    for index in range(len(runs) - 1, -1, -1):
        length = runs[index][1] - runs[index][0]
        closers[index] = last_of_length.get(length)
        last_of_length[length] = index
    position = index = 0
    while index < len(runs):
        closer = closers[index]
        if closer is None:
            index += 1
            continue
        start, end = runs[index][0], runs[closer][1]
        yield text[position:start], False
        yield text[start:end], True
        position, index = end, closer + 1
    yield text[position:], False
