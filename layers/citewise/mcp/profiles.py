"""Tool profiles: extra `rag_query` tools an operator defines, each bound to a fixed scope.

A profile is a named tool with its own description (what an agent reads to choose it), a scope (a filter
ANDed with whatever the caller sends, so it only ever narrows inside the caller's access), a default
`max_sources`, a `min_relevance_score` floor that a caller cannot lower, and a system prompt for the
synthesizer. They live in a TOML file named by `CITEWISE_MCP_PROFILES`:

```toml
[[tools]]
name = "rag_query_external"
description = "Answer from the external reference documentation (vendor manuals, public standards)."
scope = { startsWith = { key = "path", value = "external/" } }
max_sources = 5
min_relevance_score = 0.3
system_prompt = "The sources are reference material. Cite every claim; say so when they do not answer."
```

The file is read once at start: a bad file fails the start (or the Lambda cold start) with a message
naming the tool and the field, never a request.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

import pydantic
from pydantic import Field, StringConstraints, field_validator, model_validator

from citewise.domain.errors import ValidationError
from citewise.domain.models import Filter, Frozen
from citewise.query.retrieval import validate_filter

BUILTIN_TOOLS = frozenset({"rag_query", "search", "list_documents", "get_document"})
"""The tools every server has; a profile may not take one of their names."""
MAX_PROFILES = 50
ToolName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


class ToolProfile(Frozen):
    """One operator-defined answering tool."""

    name: ToolName = Field(description="The tool's name, e.g. `rag_query_external` (lower case, digits, `_`).")
    description: Annotated[str, StringConstraints(min_length=1, max_length=2000)] = Field(
        description="What the tool answers from, written for the agent that chooses among the tools."
    )
    scope: Filter | None = Field(
        default=None, description="A filter every call is held to (ANDed with the caller's own filters)."
    )
    max_sources: int = Field(default=3, ge=1, le=20, description="The default number of sources.")
    min_relevance_score: float = Field(
        default=0.0, ge=0.0, le=1.0, description="The lowest relevance a source may have; a caller may only raise it."
    )
    system_prompt: Annotated[str, StringConstraints(min_length=1, max_length=8000)] | None = Field(
        default=None, description="Instructions for the synthesizer, e.g. how to treat the sources."
    )

    @field_validator("name")
    @classmethod
    def _not_a_builtin(cls, name: str) -> str:
        if name in BUILTIN_TOOLS:
            raise ValueError(f"'{name}' is a built-in tool")
        return name

    @field_validator("scope")
    @classmethod
    def _no_reserved_keys(cls, scope: Filter | None) -> Filter | None:
        try:
            validate_filter(scope)  # the tenant comes from the identity, for a profile as for a caller
        except ValidationError as exc:
            raise ValueError(exc.message) from exc
        return scope


class ProfileFile(Frozen):
    """The profile file: `[[tools]]` tables."""

    tools: list[ToolProfile] = Field(default_factory=list, max_length=MAX_PROFILES)

    @model_validator(mode="after")
    def _unique_names(self) -> ProfileFile:
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique: {', '.join(duplicates)}")
        return self


def load_profiles(path: Path | None) -> tuple[ToolProfile, ...]:
    """The profiles in the TOML file at `path` (none without a file); ValidationError naming the problem."""
    if path is None:
        return ()
    try:
        document = tomllib.loads(path.expanduser().read_text(encoding="utf-8"))
        return tuple(ProfileFile.model_validate(document).tools)
    except OSError as exc:
        raise ValidationError(f"cannot read the tool profiles {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"the tool profiles {path} are not TOML: {exc}") from exc
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            ".".join(str(part) for part in err["loc"]) + ": " + err["msg"].removeprefix("Value error, ")
            for err in exc.errors(include_url=False)
        )
        raise ValidationError(f"invalid tool profiles in {path}: {problems}") from exc
