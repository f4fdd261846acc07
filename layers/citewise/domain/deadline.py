"""The time the current invocation has left, so a call to a service ends before the function does.

A Lambda function that runs out of time is killed: the API caller gets API Gateway's bare 504 instead
of `THROTTLED` or `GENERATION_ERROR`, and an ingest record is retried without a recorded reason. So the
handler opens a `budget` from `context.get_remaining_time_in_millis()` (less a reserve for answering the
error), and each adapter bounds its read timeout and stops retrying when the budget runs out
(`citewise.aws.clients`, `citewise.aws.opensearch`).

The budget lives in a context variable: concurrent invocations in one process (the local server's
threads) each see their own, and work handed to a thread pool must carry it along
(`contextvars.copy_context().run`). Outside a budget (the CLI, tests) nothing is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

RESERVE_SECONDS = 1.0
"""Kept back from the function's remaining time: enough to log, answer the error and flush metrics."""

MIN_CALL_SECONDS = 0.5
"""A request with less time left than this is not sent: it could not get an answer in time."""

_DEADLINE: ContextVar[float | None] = ContextVar("citewise_deadline", default=None)


@contextmanager
def budget(remaining_ms: int, *, reserve: float = RESERVE_SECONDS) -> Iterator[None]:
    """Within the block, calls to services must end `reserve` seconds before `remaining_ms` elapse."""
    token = _DEADLINE.set(time.monotonic() + remaining_ms / 1000 - reserve)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left in the current budget (negative once spent); None outside a budget."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def bounded(timeout: float) -> float:
    """`timeout`, shortened to the time left in the budget (never below zero)."""
    left = remaining()
    return timeout if left is None else max(0.0, min(timeout, left))
