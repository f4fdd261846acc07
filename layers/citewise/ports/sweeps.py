"""Delayed stale-chunk sweeps: the message an index asks to have delivered back to it later.

An index that makes writes searchable only after a refresh interval it cannot force (a Serverless
vector collection: up to about a minute, no refresh API) cannot see, at the end of a replace, the
chunks an earlier replace wrote moments before. It asks a `SweepScheduler` to deliver a `StaleSweep`
once that window has passed; the ingest function receives it beside S3 notifications (on the ingest
queue) and hands it to the index, a `StaleSweeper`, which then removes the document's chunks of every
generation older than `before`. A newer replace's chunks are never touched, whenever the sweep runs.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from citewise.domain.errors import ValidationError
from citewise.domain.models import Frozen

MESSAGE_TYPE = "citewise.stale-sweep"


class StaleSweep(Frozen):
    """Remove the document's chunks of generations older than `before` (an index's own generation)."""

    tenant_id: str = Field(min_length=1, max_length=128)
    doc_id: str = Field(min_length=1, max_length=256)
    before: str = Field(pattern=r"^[0-9a-z-]{1,64}$")


class SweepScheduler(Protocol):
    """Delivers a sweep to the index later (after the index's refresh window)."""

    def schedule(self, sweep: StaleSweep) -> None:
        """Deliver `sweep` later; raises when it cannot be queued."""
        ...


@runtime_checkable
class StaleSweeper(Protocol):
    """An index that can run a delivered sweep."""

    def sweep_stale(self, sweep: StaleSweep) -> int:
        """Remove the document's chunks older than `sweep.before`; the number removed."""
        ...


def sweep_message(sweep: StaleSweep) -> str:
    """The message body carrying `sweep` (JSON, told apart from S3 notifications by its `type`)."""
    return json.dumps({"type": MESSAGE_TYPE, **sweep.model_dump()}, sort_keys=True)


def parse_sweep(body: str) -> StaleSweep | None:
    """The sweep in a message body, or None when the body is not a sweep message (an S3 notification).

    Raises ValidationError for a sweep message of the wrong shape: it can never succeed.
    """
    try:
        message: Any = json.loads(body)
    except json.JSONDecodeError:
        return None  # not ours; the notification parser reports it
    if not isinstance(message, dict) or message.get("type") != MESSAGE_TYPE:
        return None
    fields = {key: value for key, value in message.items() if key != "type"}
    try:
        return StaleSweep.model_validate(fields)
    except PydanticValidationError as exc:
        raise ValidationError(f"malformed stale-sweep message: {exc.error_count()} invalid field(s)") from exc
