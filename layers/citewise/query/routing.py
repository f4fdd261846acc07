"""The deterministic router: date, source and identifier phrases of a question become constraints.

What it recognises (case-insensitive; see docs/routing.md for the whole list):
- periods: `today`, `yesterday`, `this|last week|month|quarter|year`, `in 2024`, `in March [2025]`,
  `in Q3 [2025]`, `on 3 March 2026`, `on 2026-03-03`;
- bounds: `since|after|before|until <date>`, `between <date> and <date>`, `from <date> to <date>`;
- rolling windows: `in the last 30 days`, `over the past two weeks`, `past 3 months`;
- sources: `in|from|on|within <source>` where <source> is a known source of the tenant or an alias
  (`in Jira`, `from Confluence`, `in the runbooks`), with an optional `tickets|pages|docs...` after it;
- identifiers: the configured patterns (default `[A-Z][A-Z0-9]+-\\d+`, Jira-style `PROJ-123`);
- versions: a dotted version of 2-4 numbers, optionally after a name or `v` (`for Python 3.12`, `in FastAPI
  0.115`, `v3.12`), read by `ports.router.version_mentions` for both routers (docs/versions.md).

Dates resolve against the request time in the configured time zone: a calendar period is
[its first local midnight, the next period's); a month, quarter or day given without a year is its
latest occurrence that has begun (`in December` asked in March 2026 is December 2025). The arithmetic is
python-dateutil's (`relativedelta`, `parser`, `tz`), already in the Lambda layer.

A phrase is consumed only when it is unambiguous: a bare year (`the 2024 roadmap`), a bare month name or
`in Jira` when no source `jira` is known stay in the text and add nothing, and so does a date right after
a verb of content history (`support was added in 2023`): it dates what the text tells, not the document.
Identifiers stay in the text too (they are good keywords) and pin their documents.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from dateutil import parser as date_parser
from dateutil.relativedelta import MO, relativedelta

from citewise.domain.models import MAX_FILTER_LIST_VALUES, MAX_FILTER_STRING, Filter
from citewise.domain.provenance import iso
from citewise.ports.router import (
    MASK,
    ROUTING_BUDGET_SECONDS,
    Constraints,
    DateRange,
    Route,
    RoutingBudget,
    RoutingBudgetExceeded,
    RoutingContext,
    remainder,
    time_zone,
    unrouted,
    version_mentions,
)

logger = logging.getLogger(__name__)

DEFAULT_ID_PATTERN = r"[A-Z][A-Z0-9]+-\d+"
DETERMINISTIC = "deterministic"

_MONTH_NAMES = (
    r"january|february|march|april|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec|(?-i:May)"
)
_MONTH = rf"(?:{_MONTH_NAMES})\.?"
_YEAR = r"(?:19|20)\d{2}"
_ORDINAL = r"\d{1,2}(?:st|nd|rd|th)?"
_RELATIVE = r"(?:today|yesterday|(?:this|last|previous|past) (?:week|month|quarter|year))"
_DATE = (
    rf"(?:{_RELATIVE}"
    rf"|q[1-4](?:\s+{_YEAR})?"
    rf"|{_YEAR}-\d{{2}}-\d{{2}}"
    rf"|{_ORDINAL}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?"
    rf"|{_MONTH}\s+{_ORDINAL}(?:,?\s+{_YEAR})?(?!\d)"
    rf"|{_MONTH}(?:\s+{_YEAR})?"
    rf"|{_YEAR})"
)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_NUMBERS |= {"eight": 8, "nine": 9, "ten": 10, "twelve": 12, "couple of": 2, "few": 3}
_COUNT = r"(?:\d{1,4}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_FLAGS = re.IGNORECASE

_BETWEEN = re.compile(
    rf"\b(?:between|from)\s+(?P<a>{_DATE})\s+(?:and|to|until|till|through)\s+(?P<b>{_DATE})\b", _FLAGS
)
_BOUND = re.compile(
    rf"\b(?P<op>since|after|before|until|till|prior to|as of|starting|not before|not after)\s+(?:the\s+)?"
    rf"(?P<a>{_DATE})\b",
    _FLAGS,
)
_ROLLING = re.compile(
    rf"\b(?:(?:in|over|during|within|for)\s+)?(?:the\s+)?(?:last|past|previous)\s+(?P<count>{_COUNT})\s+{_UNIT}\b"
    # `in the last week` is the last seven days; `last week` alone is the calendar week before this one.
    rf"|\b(?:in|over|during|within|for)\s+the\s+(?:last|past)\s+(?P<one>day|week|month|year)\b",
    _FLAGS,
)
# A calendar period after a preposition (`in 2024`, `on 3 March`, `during Q3`), or a relative one alone.
_PERIOD = re.compile(
    rf"\b(?:(?:in|on|during|from|for|throughout)\s+(?:the\s+)?(?P<a>{_DATE})|(?P<r>{_RELATIVE}))\b", _FLAGS
)


@dataclass(frozen=True)
class _Period:
    """A resolved date expression: [start, end) in the local time zone."""

    start: datetime
    end: datetime


class DeterministicRouter:
    """The `Router` that needs no network: regular phrases, resolved with python-dateutil.

    Its work is linear in the question whatever the tenant's sources are: the date patterns are fixed
    (no tenant data in them), and source names are matched token by token (`_SourceNames`), never compiled
    into a pattern. It checks a time budget between steps all the same, and answers `unrouted` past it.
    """

    name = DETERMINISTIC

    def __init__(
        self, budget_seconds: float = ROUTING_BUDGET_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """`budget_seconds` per question, read on `clock` (a test's own clock shows the budget at work)."""
        self.budget_seconds = budget_seconds
        self._clock = clock

    def route(self, query: str, context: RoutingContext) -> Route:
        """The question's route, or `unrouted` with `fallback` saying why if it ran past the budget."""
        try:
            return self._route(query, context, RoutingBudget(self.budget_seconds, self._clock))
        except RoutingBudgetExceeded as exc:
            logger.warning("routing ran past its budget, the question is searched unrouted", extra={"reason": str(exc)})
            return unrouted(query, self.name, f"{self.name}: TIMEOUT ({exc})")

    def _route(self, query: str, context: RoutingContext, budget: RoutingBudget) -> Route:
        zone = time_zone(context.time_zone)
        now = context.now.astimezone(zone)
        text = query
        consumed: list[tuple[int, str]] = []
        dates: list[DateRange] = []

        for pattern, reading in (
            (_BETWEEN, _between),
            (_BOUND, _bound),
            (_ROLLING, _rolling),
            (_PERIOD, _period),
        ):
            for match in pattern.finditer(text):  # over the text as it was before this pattern's matches
                budget.check()
                if _dates_the_content(text, match.start()):
                    continue
                found = reading(match, now)
                if found is not None:
                    dates.append(found)
                    consumed.append((match.start(), match.group(0).strip()))
                    text = _masked(text, match.start(), match.end())
        sources: list[str] = []
        if context.sources:
            for start, end, named in _source_names(tuple(context.sources.items())).phrases(text, budget):
                sources += named
                consumed.append((start, text[start:end]))
                text = _masked(text, start, end)
        ids: list[str] = []
        for id_pattern in context.id_patterns:
            for found_id in re.finditer(rf"\b{id_pattern}\b", query):
                budget.check()
                ids.append(found_id.group(0))
        return Route(
            text=remainder(text),
            constraints=Constraints(
                dates=dates,
                sources=list(dict.fromkeys(sources)),
                ids=list(dict.fromkeys(ids)),
                versions=version_mentions(query, budget),
            ),
            consumed_phrases=[phrase for _, phrase in sorted(consumed)],
            router=self.name,
        )


_CONTENT_EVENT = re.compile(
    r"\b(?:added|introduced|released|supported|deprecated|removed|dropped|discontinued|launched|announced"
    r"|invented|founded|born)\s+$",
    _FLAGS,
)
_CONTENT_EVENT_WINDOW = 16
"""Characters before a date phrase read for a verb of content history: the longest verb and a space."""


def _dates_the_content(text: str, start: int) -> bool:
    """Whether the date phrase at `start` follows a verb of content history (`support was added in 2023`,
    `deprecated since March`): it dates what the text tells, not the document, which may be years younger
    (issue 26), so it stays a search word. Read in a fixed window, so the check is constant time."""
    return _CONTENT_EVENT.search(text[max(0, start - _CONTENT_EVENT_WINDOW) : start]) is not None


def _masked(text: str, start: int, end: int) -> str:
    """`text` with `[start, end)` blanked out, same length, so later matches keep their positions."""
    return text[:start] + MASK * (end - start) + text[end:]


MAX_ROUTED_DATE_BOUNDS = 4
"""Date comparisons a routed filter lists one by one (two ranges); more ranges become their intersection."""
MAX_ROUTED_NODES = 2 + MAX_ROUTED_DATE_BOUNDS
"""Filter objects a routed filter holds at most: the `andAll`, the date bounds and one `in` of sources. The
retriever ANDs it with the caller's own filter without validating the pair again (`retrieval._both`), so
this bound is what keeps a filter at the limits plus routing within what the backends are sized for."""


def constraint_filter(constraints: Constraints) -> Filter | None:
    """The filter the constraints mean: every date range ANDed, the sources ORed (one `in`), all ANDed.

    At most `MAX_ROUTED_NODES` filter objects, whatever the question: beyond `MAX_ROUTED_DATE_BOUNDS` bounds
    the ranges are replaced by the one they all leave (the latest start, the earliest end), which selects
    the same documents; sources beyond what one `in` may list (`MAX_FILTER_LIST_VALUES`, each at most
    `MAX_FILTER_STRING` characters) add no filter, since any subset would be narrower than the question.
    Identifiers add no filter: they pin documents instead (`Retriever`)."""
    bounds = [
        (kind, moment)
        for window in constraints.dates
        for kind, moment in ((">=", window.start), ("<", window.end))
        if moment is not None
    ]
    if len(bounds) > MAX_ROUTED_DATE_BOUNDS:
        starts = [moment for kind, moment in bounds if kind == ">="]
        ends = [moment for kind, moment in bounds if kind == "<"]
        bounds = ([(">=", max(starts))] if starts else []) + ([("<", min(ends))] if ends else [])
    clauses: list[dict[str, object]] = [
        {"greaterThanOrEquals" if kind == ">=" else "lessThan": {"key": "source_date", "value": iso(moment)}}
        for kind, moment in bounds
    ]
    sources = sorted(set(constraints.sources))
    if sources and len(sources) <= MAX_FILTER_LIST_VALUES and all(len(s) <= MAX_FILTER_STRING for s in sources):
        clauses.append({"in": {"key": "source", "value": sources}})
    if not clauses:
        return None
    return Filter.model_validate(clauses[0] if len(clauses) == 1 else {"andAll": clauses})


def source_vocabulary(known: list[str], aliases: Mapping[str, str]) -> dict[str, str]:
    """Phrase (lower case) -> source value: every known source by its own name, then the aliases."""
    vocabulary = {name.lower(): name for name in known if name.strip()}
    return vocabulary | {alias.lower(): target for alias, target in aliases.items()}


# --- date expressions ------------------------------------------------------------------------------


def _between(match: re.Match[str], now: datetime) -> DateRange | None:
    first, last = _resolve(match["a"], now), _resolve(match["b"], now)
    if first is None or last is None or last.end <= first.start:
        return None
    return DateRange(start=first.start, end=last.end)


def _bound(match: re.Match[str], now: datetime) -> DateRange | None:
    period = _resolve(match["a"], now)
    if period is None:
        return None
    operator = " ".join(match["op"].lower().split())
    if operator in ("since", "as of", "starting", "not before"):
        return DateRange(start=period.start)
    if operator == "after":
        return DateRange(start=period.end)
    if operator in ("before", "prior to"):
        return DateRange(end=period.start)
    return DateRange(end=period.end)  # until, till, not after: the named period included


def _rolling(match: re.Match[str], now: datetime) -> DateRange | None:
    raw = (match["count"] or "1").lower()
    count = int(raw) if raw.isdigit() else _NUMBERS[raw]
    unit = (match["unit"] or match["one"]).lower()
    if count < 1:
        return None
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    step = relativedelta(**{f"{unit}s": count})  # type: ignore[arg-type]
    return DateRange(start=midnight - step)


def _period(match: re.Match[str], now: datetime) -> DateRange | None:
    period = _resolve(match["a"] or match["r"], now)
    return DateRange(start=period.start, end=period.end) if period is not None else None


def _resolve(expression: str, now: datetime) -> _Period | None:
    """The local period an expression names, or None if it names none (`30 February`)."""
    text = " ".join(expression.lower().replace(".", "").split())
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for reading in _READINGS:
        period = reading(text, midnight)
        if period is not None:
            return period
    return None


def _relative(text: str, midnight: datetime) -> _Period | None:
    if text == "today":
        return _Period(midnight, midnight + relativedelta(days=1))
    if text == "yesterday":
        return _Period(midnight - relativedelta(days=1), midnight)
    match = re.fullmatch(r"(this|last|previous|past) (week|month|quarter|year)", text)
    if match is None:
        return None
    back = 0 if match[1] == "this" else 1
    unit = match[2]
    if unit == "week":
        start = midnight + relativedelta(weekday=MO(-1)) - relativedelta(weeks=back)
        return _Period(start, start + relativedelta(weeks=1))
    if unit == "month":
        start = midnight.replace(day=1) - relativedelta(months=back)
        return _Period(start, start + relativedelta(months=1))
    if unit == "quarter":
        start = midnight.replace(month=3 * ((midnight.month - 1) // 3) + 1, day=1) - relativedelta(months=3 * back)
        return _Period(start, start + relativedelta(months=3))
    start = midnight.replace(month=1, day=1) - relativedelta(years=back)
    return _Period(start, start + relativedelta(years=1))


def _quarter(text: str, midnight: datetime) -> _Period | None:
    match = re.fullmatch(rf"q([1-4])(?: ({_YEAR}))?", text)
    if match is None:
        return None
    month = 3 * (int(match[1]) - 1) + 1
    start = midnight.replace(month=month, day=1)
    if match[2]:
        start = start.replace(year=int(match[2]))
    elif start > midnight:
        start -= relativedelta(years=1)
    return _Period(start, start + relativedelta(months=3))


def _year(text: str, midnight: datetime) -> _Period | None:
    if not re.fullmatch(_YEAR, text):
        return None
    start = midnight.replace(year=int(text), month=1, day=1)
    return _Period(start, start + relativedelta(years=1))


def _calendar(text: str, midnight: datetime) -> _Period | None:
    """A day (`3 march 2026`, `march 3`, `2026-03-03`) or a month (`march`, `march 2025`), via dateutil."""
    has_year = re.search(_YEAR, text) is not None
    has_day = re.search(rf"(?<!\d){_ORDINAL}(?!\d)(?!-)", re.sub(_YEAR, "", text)) is not None or "-" in text
    try:
        parsed = date_parser.parse(text, default=midnight.replace(day=1, tzinfo=None), fuzzy=False)
    except (ValueError, OverflowError):
        return None
    start = parsed.replace(tzinfo=midnight.tzinfo)
    if not has_day:
        start = start.replace(day=1)
    length = relativedelta(days=1) if has_day else relativedelta(months=1)
    if not has_year and start > midnight:
        start -= relativedelta(years=1)  # the latest occurrence that has begun
    return _Period(start, start + length)


_READINGS: tuple[Callable[[str, datetime], _Period | None], ...] = (_relative, _quarter, _year, _calendar)


# --- sources ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"(\w+)|[^\w\s]")
"""A word, or one sign; whitespace only separates. A fixed pattern, so tokenizing is linear."""
_PREPOSITIONS = frozenset({"in", "from", "on", "within", "across", "inside"})
_JOINERS = frozenset({",", "or", "and"})
_SOURCE_NOUNS = frozenset(
    word + plural
    for word in ("ticket", "issue", "page", "doc", "document", "space", "note", "article", "thread", "channel")
    for plural in ("", "s")
)
MAX_NAME_TOKENS = 16
"""Longer source names (in words and signs) are not recognised in questions: nobody types them, and the
bound keeps matching at most this many steps per position of the question."""


@dataclass(frozen=True)
class _Token:
    text: str
    """Lower case."""
    start: int
    end: int
    word: bool
    """A run of word characters (else one sign)."""
    joined: bool
    """No whitespace between it and the token before (False for the first)."""


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN.finditer(text):
        joined = bool(tokens) and tokens[-1].end == match.start()
        tokens.append(_Token(match[0].lower(), match.start(), match.end(), match[1] is not None, joined))
    return tokens


class _Node:
    """A trie node over name tokens: children by (token, joined to the one before), the value a name ends in."""

    __slots__ = ("children", "value")

    def __init__(self) -> None:
        self.children: dict[tuple[str, bool], _Node] = {}
        self.value: str | None = None


class _SourceNames:
    """The vocabulary's names (singular or plural) as a trie of tokens, and the source phrases of a text.

    A source phrase: `in|from|on|within|across|inside [the|our] <name>['s]`, then any more names each after
    `,`, `or` or `and` (and an optional `the`), then optionally a noun (`tickets`, `pages`...). At each
    position the longest name is taken and never given back, so the scan is linear in the text (at most
    `MAX_NAME_TOKENS` steps per position) whatever the names are; a pattern built from tenant data could
    backtrack exponentially on names that overlap (`x-` and `x-, x-`). A name never ends inside a run of word
    characters: `in x-y` does not name `x-` (as `in jiracloud` does not name `jira`), though it names `x`
    (as `in jira-cloud` names `jira`).
    """

    def __init__(self, vocabulary: Mapping[str, str]) -> None:
        self.root = _Node()
        for phrase in vocabulary:
            stem = phrase.removesuffix("s")
            for form in (stem, stem + "s"):
                tokens = _tokens(form)
                if tokens and len(tokens) <= MAX_NAME_TOKENS and MASK not in form:
                    node = self.root
                    for token in tokens:
                        node = node.children.setdefault((token.text, token.joined), _Node())
                    node.value = vocabulary[_singular(form, vocabulary)]

    def phrases(self, text: str, budget: RoutingBudget) -> list[tuple[int, int, list[str]]]:
        """Each source phrase of `text` as (start, end, the sources it names, in order), left to right."""
        tokens = _tokens(text)
        found: list[tuple[int, int, list[str]]] = []
        at = 0
        while at < len(tokens):
            budget.check()
            phrase = self._phrase(tokens, at) if tokens[at].text in _PREPOSITIONS and tokens[at].word else None
            if phrase is None:
                at += 1
                continue
            end, named = phrase
            found.append((tokens[at].start, tokens[end - 1].end, named))
            at = end
        return found

    def _phrase(self, tokens: list[_Token], at: int) -> tuple[int, list[str]] | None:
        """The source phrase that starts with the preposition at `at`: (the token after it, the sources)."""
        if at + 1 >= len(tokens) or tokens[at + 1].joined:
            return None
        first = self._name(tokens, at + 1, ("the", "our"))
        if first is None:
            return None
        end, value = first
        named = [value]
        if _follows(tokens, end, ("'", "s")):
            end += 2
        while end < len(tokens) and tokens[end].text in _JOINERS:
            more = self._name(tokens, end + 1, ("the",))
            if more is None:
                break
            end, value = more
            named.append(value)
        if end < len(tokens) and not tokens[end].joined and tokens[end].text in _SOURCE_NOUNS:
            end += 1
        return end, named

    def _name(self, tokens: list[_Token], at: int, articles: tuple[str, ...]) -> tuple[int, str] | None:
        """The longest name at `at`, or after one of `articles` there (`the wiki` is the source `the wiki`
        if there is one, else `wiki`): (the token after it, its source)."""
        at_article = self._longest(tokens, at)
        if at + 1 < len(tokens) and tokens[at].text in articles and not tokens[at + 1].joined:
            after_article = self._longest(tokens, at + 1)
            if after_article is not None and (at_article is None or after_article[0] > at_article[0]):
                return after_article
        return at_article

    def _longest(self, tokens: list[_Token], at: int) -> tuple[int, str] | None:
        node = self.root
        longest = None
        for end in range(at, min(len(tokens), at + MAX_NAME_TOKENS)):
            token = tokens[end]
            child = node.children.get((token.text, token.joined and end > at))
            if child is None:
                break
            node = child
            if node.value is not None and _word_ends(tokens, end + 1):
                longest = (end + 1, node.value)
        return longest


@lru_cache(maxsize=8)
def _source_names(vocabulary: tuple[tuple[str, str], ...]) -> _SourceNames:
    """The trie of a vocabulary, kept for the next questions of the same tenants (10,000 names take 0.25 s
    to build and a few MB; a 10,000-character question takes 0.05 s to scan)."""
    return _SourceNames(dict(vocabulary))


def _follows(tokens: list[_Token], at: int, texts: tuple[str, ...]) -> bool:
    """Whether the tokens from `at` are `texts`, each joined to the one before."""
    return all(
        at + i < len(tokens) and tokens[at + i].joined and tokens[at + i].text == text for i, text in enumerate(texts)
    )


def _word_ends(tokens: list[_Token], at: int) -> bool:
    """Whether a name ending before token `at` ends outside a run of word characters (no word glued to it)."""
    return at == len(tokens) or not tokens[at].joined or not tokens[at].word


def _singular(name: str, vocabulary: Mapping[str, str]) -> str:
    """The vocabulary key a name form stands for (`runbook` for `runbooks`, or the other way round)."""
    for candidate in (name, name + "s", name.removesuffix("s")):
        if candidate in vocabulary:
            return candidate
    raise KeyError(name)  # every form is made from a vocabulary name
