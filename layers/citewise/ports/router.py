"""The Router port: a question in, the constraints it states out (dates, sources, identifiers).

A router only recognises; what the constraints mean is decided once, for every router, by
`citewise.query.routing.constraint_filter` (dates ANDed, sources ORed, identifiers pinned), so the
deterministic router and the LLM router narrow a search in exactly the same way. A router never widens
anything: its filter is ANDed inside the caller's access filter and the caller's own filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from pydantic import Field

from citewise.domain.models import Frozen


class DateRange(Frozen):
    """`start <= source_date < end`, either bound open (None); instants are timezone-aware."""

    start: datetime | None = None
    end: datetime | None = None


class Constraints(Frozen):
    """What a question asks for besides its topic."""

    dates: list[DateRange] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    """Source values exactly as documents carry them (`Document.source`)."""
    ids: list[str] = Field(default_factory=list)
    """Identifiers (`PROJ-123`) whose documents must be among the results."""

    @property
    def empty(self) -> bool:
        """True when the question stated no constraint at all."""
        return not (self.dates or self.sources or self.ids)


class Route(Frozen):
    """A router's reading of one question: the text left to search, the constraints, what it took out."""

    text: str
    constraints: Constraints = Field(default_factory=Constraints)
    consumed_phrases: list[str] = Field(default_factory=list)
    router: str


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
        any question: a router that fails answers with no constraints (the LLM router falls back)."""
        ...
