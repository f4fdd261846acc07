"""The Router port: a question in, the constraints it states out (dates, sources, identifiers).

A router only recognises; what the constraints mean is decided once, for every router, by
`citewise.query.routing.constraint_filter` (dates ANDed, sources ORed, identifiers pinned), so the
deterministic router and the LLM router narrow a search in exactly the same way. A router never widens
anything: its filter is ANDed inside the caller's access filter and the caller's own filters.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, tzinfo
from typing import Protocol

from dateutil import tz
from pydantic import Field

from citewise.domain.errors import ValidationError
from citewise.domain.models import Frozen
from citewise.domain.versions import parse_version


class DateRange(Frozen):
    """`start <= source_date < end`, either bound open (None); instants are timezone-aware."""

    start: datetime | None = None
    end: datetime | None = None


class VersionMention(Frozen):
    """A version a question names, and the phrase it was read from (`Python 3.12`, `v0.115`)."""

    version: str
    phrase: str


class Constraints(Frozen):
    """What a question asks for besides its topic."""

    dates: list[DateRange] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    """Source values exactly as documents carry them (`Document.source`)."""
    ids: list[str] = Field(default_factory=list)
    """Identifiers (`PROJ-123`) whose documents must be among the results."""
    versions: list[VersionMention] = Field(default_factory=list)
    """Versions the question is about (`for Python 3.12`): documents valid for them are preferred."""

    @property
    def empty(self) -> bool:
        """True when the question stated no constraint at all."""
        return not (self.dates or self.sources or self.ids or self.versions)


class Route(Frozen):
    """A router's reading of one question: the text left to search, the constraints, what it took out."""

    text: str
    constraints: Constraints = Field(default_factory=Constraints)
    consumed_phrases: list[str] = Field(default_factory=list)
    router: str
    fallback: str | None = None
    """Why the configured router did not produce this route and its fallback did (None: it did)."""


class RoutingContext(Frozen):
    """What a router needs besides the question: when it is asked, where, and the tenant's sources.

    `sources` maps each phrase that names a source (lower case: a known source value, a configured alias)
    to the source value documents carry.
    """

    now: datetime
    time_zone: str = "UTC"
    sources: Mapping[str, str] = Field(default_factory=dict)
    id_patterns: tuple[str, ...] = ()


class Router(Protocol):
    """Turns constraint phrases of a question into constraints; a phrase it is unsure of stays in the text."""

    name: str

    def route(self, query: str, context: RoutingContext) -> Route:
        """The question's constraints and the text left once their phrases are removed. Never raises for
        any question: a router that fails answers with no constraints (the LLM router falls back), and so
        does one that runs out of its time budget (`RoutingBudget`)."""
        ...


ROUTING_BUDGET_SECONDS = 0.5
"""How long the deterministic router may read one question. Its work is linear in the question (the
slowest phrasing measured, 10,000 characters of a thousand dates, takes 0.05-0.12 s), so this is a safety
net: past it the question is searched as written, without constraints, rather than holding a worker."""


class RoutingBudgetExceeded(Exception):
    """A router ran past its `RoutingBudget`: it answers `unrouted` instead."""


class RoutingBudget:
    """A time budget a router checks between steps of bounded work (a router's work cannot be interrupted
    from outside: a regular expression holds the interpreter until it ends, so the steps must be small)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds

    def check(self) -> None:
        """RoutingBudgetExceeded once the budget is spent."""
        if self._clock() > self._end:
            raise RoutingBudgetExceeded(f"routing took longer than {self.seconds:g} s")


def unrouted(query: str, router: str, reason: str) -> Route:
    """The route of a question a router gave up on: the whole question searched, no constraints, and
    `fallback` saying why (as the LLM router's fallback does), so the query never fails for its router."""
    return Route(text=query, router=router, fallback=reason)


def time_zone(name: str) -> tzinfo:
    """The IANA time zone `name` (dateutil's, which falls back to its bundled database); ValidationError
    for an unknown name."""
    zone = tz.gettz(name)
    if zone is None:
        raise ValidationError(f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC")
    return zone


MASK = "\x00"
"""What a consumed phrase is blanked with: same length, so later matches keep their positions."""
_SPACES = re.compile(r"\s+")
_DANGLING_WORDS = frozenset({"in", "on", "from", "since", "during", "for", "of", "and", "or", "the"})
_DANGLING = "(?:" + "|".join(sorted(_DANGLING_WORDS)) + ")"


def remainder(masked: str) -> str:
    """The text left to search once consumed phrases were blanked with `MASK`: spaces collapsed, no
    connector left dangling at either end (`what changed in` -> `what changed`, `or about retries` ->
    `about retries`), no space before its final punctuation. Every router ends with this, so a phrase
    consumed by any of them leaves the same text."""
    text = _SPACES.sub(" ", masked.replace(MASK, " ")).strip(" ,;")
    text = re.sub(r"\s+([?.!,;])", r"\1", text)
    return re.sub(rf"^(?:{_DANGLING}\s+)+", "", _without_dangling_end(text), flags=re.IGNORECASE).strip()


def _without_dangling_end(text: str) -> str:
    """`text` (single-spaced) without the connectors that end it, before its final `?`, `.` or `!`.

    Word by word from the end rather than a pattern anchored at `$`: a regular expression would try every
    position of a question made of connectors (`x in in in ...`) and take quadratic time."""
    mark = text[-1] if text.endswith(("?", ".", "!")) else ""
    words = text[: len(text) - len(mark)].split(" ")
    end = len(words)
    while end > 1 and words[end - 1].lower() in _DANGLING_WORDS:
        end -= 1
    return text if end == len(words) else " ".join(words[:end]) + mark


def without_phrases(query: str, phrases: Iterable[str]) -> tuple[str, list[str]]:
    """`query` with each phrase (found case-insensitively, first free occurrence) blanked, and the phrases
    as they are written in the query, in query order. ValueError for a phrase the query does not contain:
    a router may only consume what the question says."""
    masked, found = query, []
    for phrase in phrases:
        at = masked.lower().find(phrase.strip().lower()) if phrase.strip() else -1
        if at < 0:
            raise ValueError("a phrase to consume is not in the question")
        end = at + len(phrase.strip())
        found.append((at, query[at:end]))
        masked = masked[:at] + MASK * (end - at) + masked[end:]
    return masked, [text for _, text in sorted(found)]


_UNITS = (
    r"[kmgtp]i?b|bytes?|[kmg]?hz|ms|s|secs?|seconds?|min|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?"
    r"|x|times|percent|pct|pp|points?|kg|g|mg|km|m|cm|mm|miles?|k|m|bn|million|billion|usd|eur|gbp|dollars?"
)
_VERSION_MENTION = re.compile(
    r"(?<![\w.$€£¥])(?:(?P<name>[A-Za-z][\w+#-]{0,30})\s{1,3})?(?P<version>v?\d{1,5}(?:\.\d{1,5}){1,3})"
    rf"(?![\w%]|\.\d|[ \t]{{1,2}}(?i:{_UNITS})\b)"
)
"""A dotted version of 2-4 numbers (a bare `3` or `2024` is no version here), not inside a longer number or
word, not an amount (`$3.50`) or a quantity (`3.5 GB`, `1.5 s`, `2.5 times`), with the word before it as its
name. Fixed and bounded: at most a 31-character name tried per position and one unit word after it, so
reading is linear in the question."""
_NOT_NAMES = frozenset(
    {"in", "for", "on", "of", "with", "to", "since", "until", "before", "after", "from", "using", "under", "and"}
    | {"or", "the", "is", "at", "by", "as", "than", "vs", "about"}
)
MAX_VERSION_MENTIONS = 5
"""Versions one question may name: enough for a comparison, and the preference reads each for every candidate."""


def version_mentions(query: str, budget: RoutingBudget | None = None) -> list[VersionMention]:
    """The versions `query` names (`for Python 3.12` -> 3.12, phrase `Python 3.12`), distinct, in order, at
    most `MAX_VERSION_MENTIONS`. The phrases stay in the searched text: they are good keywords, and a
    version names no filter, only a preference (`citewise.query.versioning`)."""
    found: dict[str, VersionMention] = {}
    for match in _VERSION_MENTION.finditer(query):
        if budget is not None:
            budget.check()
        version = parse_version(match["version"])
        name = match["name"]
        phrase = match[0] if name and name.lower() not in _NOT_NAMES else match["version"]
        found.setdefault(version.sort_key, VersionMention(version=version.text.lstrip("vV"), phrase=phrase))
        if len(found) == MAX_VERSION_MENTIONS:
            break
    return list(found.values())
