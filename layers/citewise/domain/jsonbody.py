"""Request bodies as JSON, within limits that keep parsing cheap: the REST API and the MCP endpoint read
their bodies with `parse_json`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from citewise.domain.errors import ValidationError

JSON_MEDIA_TYPE = "application/json"
MAX_JSON_DEPTH = 32
"""Nesting levels of a request body: the deepest filter the models accept (`models.MAX_FILTER_DEPTH`) needs
about twenty, and Python's parser would otherwise recurse until it fails at about a thousand."""
MAX_NUMBER_CHARS = 32
"""Characters of one number in a request body. Every number the API takes fits in far fewer (the largest is
2**53, 16 digits); a longer one is refused before Python converts it, which costs quadratic time and stops
with a ValueError at 4300 digits."""


def parse_json(text: str) -> Any:
    """The request body as JSON, or ValidationError for a body no route could take: nested deeper than
    MAX_JSON_DEPTH, or holding a number longer than MAX_NUMBER_CHARS, NaN or an infinity (none of which
    JSON has). Malformed JSON still raises `json.JSONDecodeError`, which Powertools reports."""

    def number(kind: type[int] | type[float]) -> Callable[[str], int | float]:
        def convert(literal: str) -> int | float:
            if len(literal) > MAX_NUMBER_CHARS:
                raise ValidationError(
                    f"a number in the body is longer than {MAX_NUMBER_CHARS} characters",
                    details={"limit": MAX_NUMBER_CHARS},
                )
            value = kind(literal)
            if value in (float("inf"), float("-inf")):
                raise ValidationError("a number in the body is too large", details={"limit": MAX_NUMBER_CHARS})
            return value

        return convert

    def constant(name: str) -> None:
        raise ValidationError(f"{name} is not JSON", details={"constant": name})

    try:
        document = json.loads(text, parse_int=number(int), parse_float=number(float), parse_constant=constant)
    except RecursionError as exc:
        raise _too_deep() from exc
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:  # iterative: the check must not itself recurse as deep as the body
        value, depth = pending.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_JSON_DEPTH:
                    raise _too_deep()
                pending.append((child, depth + 1))
    return document


def _too_deep() -> ValidationError:
    return ValidationError(
        f"the body is nested more than {MAX_JSON_DEPTH} levels deep", details={"limit": MAX_JSON_DEPTH}
    )


def is_json(content_type: str) -> bool:
    """Whether a Content-Type header names JSON: media types are case-insensitive (RFC 9110 8.3.1)."""
    return content_type.split(";", 1)[0].strip().lower() == JSON_MEDIA_TYPE
