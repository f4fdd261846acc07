"""The SourceRegistry port: a tenant's web sources, the state of their pages, and the refresh lock.

Every adapter (`citewise.aws.dynamodb_sources`, `citewise_local.sources`) passes
`tests/contract/test_sources_contract.py`. What the refresh logic needs of a store:
- a source is read and written within its tenant only: another tenant's source is None, never an error
  that would reveal it;
- `start_run` is atomic: of two refreshes started together one gets the source, the other a
  RefreshRunningError (409), until the first ends or its lease runs out (a crashed run);
- `save_run` and `finish_run` succeed only for the run holding the source, so a run whose lease was
  taken over (or whose source was removed) learns it at its next save and stops;
- `due` lists every tenant's sources whose refresh time has come, for the schedule.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from citewise.domain.models import Frozen
from citewise.domain.sources import PageState, RefreshLock, RefreshRun, Source
from citewise.ports.erasure import ERASE_BATCH


class RefreshMessage(Frozen):
    """A run to start or continue: an SQS message body on AWS, a row of the local queue."""

    tenant_id: str
    source_id: str
    run_id: str


class RefreshQueue(Protocol):
    """Where a refresh's work goes to be run (on AWS an SQS queue that the refresh function consumes, each
    message one batch of the run, so that a large site never exceeds one function run)."""

    def send(self, message: RefreshMessage, *, delay_seconds: int = 0) -> None:
        """Have the run continue later; raises when that cannot be arranged."""
        ...


class SourceRegistry(Protocol):
    """Sources by tenant, their pages, their refresh lock; erasable by tenant (`citewise.ports.erasure`)."""

    def put_source(self, source: Source) -> None:
        """Store a new source; ConflictError if its id exists."""
        ...

    def source(self, tenant_id: str, source_id: str) -> Source | None:
        """The tenant's source, with its running refresh if any; None if the tenant has no such source."""
        ...

    def tenant_sources(self, tenant_id: str) -> list[Source]:
        """Every source of the tenant, oldest first."""
        ...

    def delete_source(self, tenant_id: str, source_id: str) -> bool:
        """Delete the source and its pages' states; False if there was none."""
        ...

    def due(self, now: datetime, *, limit: int) -> list[tuple[str, str]]:
        """(tenant, source id) of up to `limit` sources of any tenant whose `next_refresh_at` has come."""
        ...

    def start_run(self, tenant_id: str, source_id: str, lock: RefreshLock, now: datetime) -> None:
        """Hold the source for `lock`'s run: RefreshRunningError if another run holds it at `now`,
        NotFoundError if the tenant has no such source. The source is not `due` again before the lease
        ends (a crashed run's source is, then)."""
        ...

    def save_run(self, tenant_id: str, source_id: str, lock: RefreshLock) -> bool:
        """Store the run's progress and renew its lease; False if it no longer holds the source."""
        ...

    def finish_run(self, tenant_id: str, source_id: str, run: RefreshRun, next_refresh_at: datetime) -> bool:
        """Release the source: `run` becomes its last run, its next refresh is set; False if the run no
        longer held it (nothing changed then)."""
        ...

    def pages(self, tenant_id: str, source_id: str) -> list[PageState]:
        """The states of the source's pages, in no particular order."""
        ...

    def put_pages(self, tenant_id: str, source_id: str, pages: Iterable[PageState]) -> None:
        """Store these page states (replacing those of the same URL)."""
        ...

    def delete_pages(self, tenant_id: str, source_id: str, urls: Iterable[str]) -> None:
        """Forget these pages; an unknown URL is no error."""
        ...

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of the tenant's items (sources, pages); how many (0 only when none is left)."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """How many of the tenant's items remain."""
        ...
