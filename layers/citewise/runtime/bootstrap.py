"""The index bootstrap: what the deploy-time custom resource does with the chunk index.

CloudFormation sends the custom resource a Create, an Update or a Delete request.

- Create and Update make sure the shared chunk index exists with the mapping of the configured embedder
  (`VectorIndex.ensure`). Doing it at deploy time means the first upload never races to create the
  index, the functions that read or write documents need no permission to create indexes, and a
  deployment with an embedder that does not match the existing index fails at once, visibly, instead
  of every ingest failing later.
- Delete does nothing. The index holds every tenant's chunks: removing the resource (a stack deletion,
  a renamed index, a rollback) must never delete data. What happens to the data is decided by the
  removal policy of the domain or collection itself.

Retries: on a Serverless collection a data access policy takes effect some time after CloudFormation
reports it created (up to a few minutes), and until then every request is refused with HTTP 403; a new
domain or collection can also answer 5xx, throttle, or be unreachable for a moment. Those are retried
with capped exponential backoff and jitter until a deadline that leaves the function time to answer.
Anything else (an existing index of another embedder, a malformed answer) fails on the first attempt,
so a misconfiguration fails the deployment in seconds, not at the Lambda timeout.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from citewise.domain.errors import CitewiseError, SearchBackendError, ThrottledError, ValidationError
from citewise.runtime.services import Services

logger = logging.getLogger(__name__)

# 401/403: a data access policy (or an IAM policy) not propagated yet; 408/429/5xx: a service warming up.
RETRYABLE_STATUSES = frozenset({401, 403, 408, 429, 500, 502, 503, 504})


class EnsurableIndex(Protocol):
    """The one operation of the `VectorIndex` port that the bootstrap needs."""

    def ensure(self, embedder_name: str, dimension: int) -> None: ...


@dataclass(frozen=True)
class Backoff:
    """Waits between attempts: `initial`, multiplied by `multiplier` after each, never above `maximum`,
    each scaled by a random factor in [0.5, 1) so that several stacks deploying at once spread out."""

    initial: float = 2.0
    multiplier: float = 2.0
    maximum: float = 30.0

    def delay(self, attempt: int, jitter: float) -> float:
        """The wait after failed attempt number `attempt` (1-based); `jitter` is a number in [0, 1)."""
        base = min(self.maximum, self.initial * self.multiplier ** (attempt - 1))
        return base * (0.5 + jitter / 2)


def is_transient(error: CitewiseError) -> bool:
    """Whether retrying `error` can succeed: throttling, a retryable HTTP status, or an unreachable
    endpoint. An index of another embedder or a malformed answer will not change by waiting."""
    if isinstance(error, ThrottledError):
        return True
    if not isinstance(error, SearchBackendError):
        return False
    if error.details.get("status") in RETRYABLE_STATUSES:
        return True
    return _unreachable(error)


def _unreachable(error: SearchBackendError) -> bool:
    """The index adapter chains the client's connection error (DNS not ready, timeout) as the cause."""
    try:
        from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
    except ImportError:  # the local mode has no OpenSearch client, and nothing to wait for
        return False
    return isinstance(error.__cause__, OpenSearchConnectionError)


def ensure_index(
    index: EnsurableIndex,
    embedder_name: str,
    dimension: int,
    *,
    deadline: float,
    backoff: Backoff = Backoff(),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    jitter: Callable[[], float] = random.random,
) -> int:
    """Create the index (or check it matches), retrying transient failures until `deadline` (a value
    of `clock`); the number of attempts it took.

    Raises the first non-transient error as is, and a `SearchBackendError` naming the last transient
    one when the next wait would pass the deadline.
    """
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            index.ensure(embedder_name, dimension)
            return attempt
        except CitewiseError as exc:
            if not is_transient(exc):
                raise
            wait = backoff.delay(attempt, jitter())
            if clock() + wait > deadline:
                raise SearchBackendError(
                    f"the search index was still not ready after {attempt} attempts in "
                    f"{clock() - started:.0f} s: {exc.message}",
                    details={"attempts": attempt, "last_error": exc.code, "last_status": exc.details.get("status")},
                ) from exc
            logger.warning(
                "index not ready, retrying",
                extra={
                    "attempt": attempt,
                    "wait_s": round(wait, 1),
                    "error": exc.code,
                    "status": exc.details.get("status"),
                },
            )
            sleep(wait)


def handle_event(
    event: Mapping[str, Any],
    build_services: Callable[[], Services],
    *,
    deadline: float,
    backoff: Backoff = Backoff(),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    jitter: Callable[[], float] = random.random,
) -> dict[str, Any]:
    """Answer one CloudFormation custom resource request, as `custom_resources.Provider` expects of its
    on-event handler: `{"PhysicalResourceId", "Data"}`; an exception fails the request.

    `build_services` is called only for Create and Update, so a Delete succeeds even when the settings
    or the search backend are gone (a stack rolling back, or being deleted after a failed create).
    """
    request_type = event.get("RequestType")
    if request_type == "Delete":
        # Never delete the index: see the module docstring. Keep the id CloudFormation already knows.
        return {"PhysicalResourceId": str(event.get("PhysicalResourceId", "")), "Data": {}}
    if request_type not in ("Create", "Update"):
        raise ValidationError(f"unknown custom resource request type: {request_type!r}")
    services = build_services()
    try:
        name, dimension = services.embedder.name, services.embedder.dimension
        attempts = ensure_index(
            services.index,
            name,
            dimension,
            deadline=deadline,
            backoff=backoff,
            clock=clock,
            sleep=sleep,
            jitter=jitter,
        )
    finally:
        services.close()
    index_name = services.settings.index_name
    logger.info("index ready", extra={"index": index_name, "embedder": name, "attempts": attempts})
    # The id names the index only: an Update to another index gets a new id, and CloudFormation's
    # follow-up Delete of the old id is the no-op above, so the old index and its data stay.
    return {
        "PhysicalResourceId": index_name,
        "Data": {"IndexName": index_name, "Embedder": name, "Dimension": dimension, "Attempts": attempts},
    }
