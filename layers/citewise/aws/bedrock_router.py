"""The LLM router on Amazon Bedrock's Converse API with tool use, falling back to another router.

The model is offered one tool per constraint type, each with a JSON schema:
- `date_range`: the phrase that states a period and its local `start` (inclusive) / `end` (exclusive);
- `sources`: the phrase that names sources and the sources, an enum of the tenant's known ones;
- `identifiers`: identifiers the question names (they stay in the searched text and pin documents).
It calls as many as the question needs (several date ranges are ANDed, the sources ORed: the same
`Constraints` as the deterministic router, turned into a filter by the same code in `citewise.query`).

The model is trusted to read the question, never to invent: every tool call is checked (a known tool,
an input of the tool's schema, a phrase that is in the question, dates that parse with `start < end`,
only known sources, identifiers in the question that match the configured patterns). Anything wrong
(throttling, a timeout, a malformed or unknown tool call, a bad date) and the whole answer is dropped:
the fallback router (the deterministic one) routes the question instead and the route says why, so a
query never fails because of the router.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, tzinfo
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as SchemaError

from citewise.aws import clients as aws
from citewise.domain.errors import CitewiseError, GenerationError
from citewise.ports.router import (
    Constraints,
    DateRange,
    Route,
    Router,
    RoutingContext,
    remainder,
    time_zone,
    version_mentions,
    without_phrases,
)

logger = logging.getLogger(__name__)

BEDROCK = "bedrock"
ACTION = "bedrock:Converse"
# The router sits in front of every query: fail fast and let the fallback answer rather than retry.
CLIENT_CONFIG = {"max_attempts": 2, "read_timeout": 10}


class UnusableRoute(ValueError):
    """The model's answer cannot be used as a route (a tool call outside the contract)."""


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


_I = TypeVar("_I", bound=_Input)


class _DateRangeInput(_Input):
    phrase: str = Field(min_length=1)
    start: str | None = None
    end: str | None = None


class _SourcesInput(_Input):
    phrase: str = Field(min_length=1)
    sources: list[str] = Field(min_length=1)


class _IdentifiersInput(_Input):
    ids: list[str] = Field(min_length=1)


_DATE_VALUE = {
    "type": "string",
    "description": "A local date YYYY-MM-DD or date-time YYYY-MM-DDTHH:MM:SS in the question's time zone.",
}


def tool_specs(context: RoutingContext) -> list[dict[str, Any]]:
    """The Converse `toolSpec`s offered for `context` (no `sources` tool when the tenant has none)."""
    specs = [
        _spec(
            "date_range",
            "The question limits the documents to a period of time (when their content changed). Call once per "
            "period phrase; give the bounds of the period as local dates: start inclusive, end exclusive, "
            "either may be left out for an open bound.",
            {"phrase": _phrase("the period"), "start": _DATE_VALUE, "end": _DATE_VALUE},
            ["phrase"],
        ),
        _spec(
            "identifiers",
            "The question names identifiers such as ticket keys (PROJ-123). List them exactly as written.",
            {"ids": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
            ["ids"],
        ),
    ]
    known = sorted(set(context.sources.values()))
    if known:
        specs.insert(
            1,
            _spec(
                "sources",
                "The question limits the documents to where they come from (e.g. 'in Jira', 'from the wiki'). "
                "Only these sources exist: " + ", ".join(known) + ".",
                {
                    "phrase": _phrase("the sources"),
                    "sources": {"type": "array", "items": {"type": "string", "enum": known}, "minItems": 1},
                },
                ["phrase", "sources"],
            ),
        )
    return specs


def _phrase(what: str) -> dict[str, str]:
    return {"type": "string", "description": f"The words of the question that name {what}, copied exactly."}


def _spec(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"toolSpec": {"name": name, "description": description, "inputSchema": {"json": schema}}}


def system_prompt(context: RoutingContext) -> str:
    """The instructions: what counts as a constraint, and the clock and zone that dates are read in."""
    now = context.now.astimezone(time_zone(context.time_zone))
    return (
        "You read a search question for the constraints it states and report each with a tool call. "
        f"It is now {now:%A %Y-%m-%d %H:%M} in the time zone {context.time_zone}; weeks start on Monday. "
        "Report only what the question states explicitly: a period of time, the sources to search, "
        "identifiers. A word that is only the topic (the 2024 roadmap, Jira workflow configuration) is not a "
        "constraint. If the question states none, answer 'none' and call no tool. Never answer the question."
    )


class BedrockRouter:
    """The `Router` over `bedrock-runtime` Converse tool use; `fallback` routes whenever it cannot."""

    name = BEDROCK

    def __init__(
        self,
        model_id: str,
        *,
        fallback: Router,
        client: Any | None = None,
        region: str | None = None,
        max_tokens: int = 512,
    ) -> None:
        """Configure only: the client (`citewise.aws.clients.client`, few retries, a short read timeout)
        is created on the first question, so a cold start pays nothing for it."""
        self.model_id = model_id
        self._fallback = fallback
        self._client = client
        self._region = region
        self._max_tokens = max_tokens

    def route(self, query: str, context: RoutingContext) -> Route:
        """The model's route, or the fallback's (with `fallback` saying why) if anything goes wrong."""
        try:
            return self._route(query, context)
        except Exception as exc:  # noqa: BLE001 - any failure of the model's route means the fallback routes
            reason = f"{BEDROCK}: {_reason(exc)}"
            logger.warning("the LLM router failed, the fallback routes", extra={"reason": reason})
            route = self._fallback.route(query, context)
            # the fallback's own reason (past its time budget: unrouted) is kept after this one
            return route.model_copy(update={"fallback": f"{reason}; {route.fallback}" if route.fallback else reason})

    def _route(self, query: str, context: RoutingContext) -> Route:
        try:
            response = self._runtime().converse(**self._request(query, context))
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, GenerationError, ACTION) from exc
        calls = _tool_calls(response)
        zone = time_zone(context.time_zone)
        dates: list[DateRange] = []
        sources: list[str] = []
        ids: list[str] = []
        phrases: list[str] = []
        for name, raw in calls:
            if name == "date_range":
                period = _checked(_DateRangeInput, raw, name)
                dates.append(_range(period, zone))
                phrases.append(period.phrase)
            elif name == "sources" and context.sources:
                chosen = _checked(_SourcesInput, raw, name)
                sources += _known_sources(chosen.sources, context)
                phrases.append(chosen.phrase)
            elif name == "identifiers":
                ids += _named_ids(_checked(_IdentifiersInput, raw, name).ids, query, context)
            else:
                raise UnusableRoute(f"the model called an unknown tool {name!r}")
        try:
            masked, consumed = without_phrases(query, phrases)
        except ValueError as exc:
            raise UnusableRoute(str(exc)) from exc
        return Route(
            text=remainder(masked),
            constraints=Constraints(
                dates=dates,
                sources=list(dict.fromkeys(sources)),
                ids=list(dict.fromkeys(ids)),
                versions=version_mentions(query),  # read as the deterministic router reads them
            ),
            consumed_phrases=consumed,
            router=self.name,
        )

    def _runtime(self) -> Any:
        if self._client is None:
            self._client = aws.client("bedrock-runtime", region=self._region, **CLIENT_CONFIG)
        return self._client

    def _request(self, query: str, context: RoutingContext) -> dict[str, Any]:
        return {
            "modelId": self.model_id,
            "system": [{"text": system_prompt(context)}],
            "messages": [{"role": "user", "content": [{"text": query}]}],
            "toolConfig": {"tools": tool_specs(context), "toolChoice": {"auto": {}}},
            "inferenceConfig": {"maxTokens": self._max_tokens, "temperature": 0.0},
        }


def _tool_calls(response: Any) -> list[tuple[str, Any]]:
    """(tool name, input) of each `toolUse` block of the output message; none when the model called none."""
    output = response.get("output") if isinstance(response, dict) else None
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        raise UnusableRoute("the response has no output message")
    if response.get("stopReason") not in ("tool_use", "end_turn"):
        raise UnusableRoute(f"the model stopped with {response.get('stopReason')!r}")
    calls = []
    for block in content:
        use = block.get("toolUse") if isinstance(block, dict) else None
        if use is not None:
            if not isinstance(use, dict) or not isinstance(use.get("name"), str):
                raise UnusableRoute("a tool call has no name")
            calls.append((use["name"], use.get("input")))
    return calls


def _checked(model: type[_I], raw: Any, tool: str) -> _I:
    if not isinstance(raw, dict):
        raise UnusableRoute(f"the input of {tool} is not a JSON object")
    try:
        return model.model_validate(raw)
    except SchemaError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
        raise UnusableRoute(f"the input of {tool} does not fit its schema ({problems})") from exc


def _range(period: _DateRangeInput, zone: tzinfo) -> DateRange:
    start, end = (_instant(value, zone) if value else None for value in (period.start, period.end))
    if start is None and end is None:
        raise UnusableRoute("a date range has neither start nor end")
    if start is not None and end is not None and end <= start:
        raise UnusableRoute(f"a date range ends before it starts ({period.start} .. {period.end})")
    return DateRange(start=start, end=end)


def _instant(value: str, zone: tzinfo) -> datetime:
    """An ISO date or date-time; without an offset it is local to the question's time zone."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise UnusableRoute(f"{value!r} is not an ISO date") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def _known_sources(chosen: list[str], context: RoutingContext) -> list[str]:
    known = set(context.sources.values())
    unknown = sorted(set(chosen) - known)
    if unknown:
        raise UnusableRoute(f"the model named sources the tenant does not have: {', '.join(unknown)}")
    return chosen


def _named_ids(ids: list[str], query: str, context: RoutingContext) -> list[str]:
    for identifier in ids:
        if identifier not in query or not any(re.fullmatch(p, identifier) for p in context.id_patterns):
            raise UnusableRoute("an identifier the model named is not in the question or matches no pattern")
    return ids


def _reason(exc: Exception) -> str:
    """A short, text-free reason for the report and the log: an error code, or what was wrong."""
    if isinstance(exc, CitewiseError):
        return exc.code
    if isinstance(exc, UnusableRoute):
        return f"unusable answer: {exc}"
    return type(exc).__name__
