"""Quotas where the work enters: the RateLimiter port (a token bucket per tenant) and the QuotaGate the
logic holds.

The bucket is GCRA (the generic cell rate algorithm), a token bucket kept as one number per tenant: the
"theoretical arrival time" `tat`, when the bucket would be full again. A request at `now` is admitted if
`tat - now <= (burst - 1) * period` (the bucket still holds a token), and moves `tat` to
`max(tat, now) + period`; a refused request changes nothing and waits `tat - now - (burst - 1) * period`.
One number, so each adapter can admit atomically in one conditional write (a SQLite transaction locally,
a DynamoDB UpdateItem on AWS) and every process sees the same bucket. `admit` is the rule for both.

`QuotaGate` checks a tenant's effective quotas (`citewise.domain.quotas`) before work:
- `admit_query`: one token of the bucket for every query and search, REST and MCP alike; for a generated
  answer, also the day's generation tokens (refused once they reached the limit: the answer's size is
  not known before it is written);
- `check_storage`: documents and bytes stored, with what the document replaces left out (a new version
  replaces the old one's bytes); at presign and again at ingest;
- `check_pages`: the day's pages ingested plus the document's (at ingest, once it is parsed; at presign,
  whether the day has any left).
Refusals are `QuotaExceededError` (429, `Retry-After`). A check whose store fails lets the work through
and logs a warning: quotas protect the platform from one tenant, and a throttled table must not turn into
an outage for every tenant. Checks of parallel requests may each see the same use, so a storage or page
limit can be passed by the work admitted at the same moment (at most one ingest group per worker); the
bucket cannot, its write is atomic.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Protocol

from citewise.domain.errors import CitewiseError
from citewise.domain.models import Document, Frozen, Operator
from citewise.domain.quotas import (
    STORAGE_RETRY_SECONDS,
    EffectiveQuota,
    QuotaExceededError,
    QuotaOverrides,
    Quotas,
    effective,
    seconds_to_next_day,
)
from citewise.domain.tenancy import validate_tenant_id
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.registry import DocumentRegistry, StoredTotals, contribution
from citewise.ports.usage import UsageCounts, UsageMeter

logger = logging.getLogger(__name__)

MINUTE_US = 60_000_000


def admit(tat_us: int | None, now_us: int, period_us: int, burst: int) -> tuple[int | None, int]:
    """GCRA (module docstring): (the new `tat`, 0) if a request at `now_us` is admitted, else (None, the
    microseconds to wait). `tat_us` None: a bucket never used (full)."""
    tat = now_us if tat_us is None else max(tat_us, now_us)
    wait = tat - now_us - (burst - 1) * period_us
    if wait > 0:
        return None, wait
    return tat + period_us, 0


class RateLimiter(Protocol):
    """One token bucket per tenant, shared by every process that serves it."""

    def take(self, tenant_id: str, *, per_minute: int, burst: int, now_us: int) -> int:
        """Take a token from the tenant's bucket (`admit`, atomically): 0 if the request is admitted,
        else the microseconds until it would be (nothing taken)."""
        ...

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Forget the tenant's bucket (`citewise.ports.erasure.TenantStore`): 1 if there was one, else 0."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """1 if the tenant has a bucket, else 0."""
        ...


class QuotaGate:
    """The quota checks of the logic (module docstring). Each store is given as a callable, built on first
    need; None: the function has no such store and skips the checks that need it."""

    def __init__(
        self,
        defaults: Quotas,
        overrides: Callable[[str], QuotaOverrides | None],
        *,
        totals: Callable[[str], StoredTotals] | None = None,
        usage: Callable[[], UsageMeter] | None = None,
        rates: Callable[[], RateLimiter] | None = None,
        ttl: float = 60.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.defaults = defaults
        self._overrides = overrides
        self._totals = totals
        self._usage = usage
        self._rates = rates
        self._ttl = ttl
        self._clock = clock
        self._cached: dict[str, tuple[float, Quotas]] = {}
        self._lock = threading.Lock()

    def quotas(self, tenant_id: str) -> Quotas:
        """The tenant's effective limits, read at most once per `ttl` seconds per process (an operator's
        change applies within that time)."""
        now = time.monotonic()
        with self._lock:
            cached = self._cached.get(tenant_id)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        try:
            overrides = self._overrides(tenant_id)
        except CitewiseError:
            logger.warning("quota overrides of tenant %s unreadable, using the last known", tenant_id, exc_info=True)
            if cached is not None:
                return cached[1]
            overrides = None
        quotas = effective(tenant_id, self.defaults, overrides).as_quotas()
        with self._lock:
            self._cached[tenant_id] = (now, quotas)
        return quotas

    def admit_query(self, tenant_id: str, *, generative: bool) -> None:
        """Refuse a query or search over the rate, or a generated answer once the day's tokens are spent."""
        quotas = self.quotas(tenant_id)
        if quotas.queries_per_minute is not None and self._rates is not None:
            self._take(tenant_id, quotas)
        if generative and quotas.generation_tokens_per_day is not None:
            today = self._today(tenant_id)
            if today is not None:
                used = today.generation_input_tokens + today.generation_output_tokens
                if used >= quotas.generation_tokens_per_day:
                    raise QuotaExceededError(
                        "generation_tokens_per_day",
                        limit=quotas.generation_tokens_per_day,
                        used=used,
                        retry_after=seconds_to_next_day(self._clock()),
                        message="the tenant's answer model tokens of today are spent; search still works",
                    )

    def check_storage(self, tenant_id: str, replaces: Document | None, size: int) -> None:
        """Refuse storing a document of `size` bytes that replaces `replaces` (its record, or None for a new
        document) if the tenant would then hold more documents or bytes than it may."""
        quotas = self.quotas(tenant_id)
        if (quotas.max_documents is None and quotas.max_stored_bytes is None) or self._totals is None:
            return
        try:
            totals = self._totals(tenant_id)
        except CitewiseError:
            logger.warning("stored totals of tenant %s unreadable; not checked", tenant_id, exc_info=True)
            return
        previous = contribution(replaces)
        documents = totals.documents - previous.documents + 1
        stored = totals.bytes - previous.bytes + size
        if quotas.max_documents is not None and documents > quotas.max_documents:
            raise QuotaExceededError(
                "max_documents",
                limit=quotas.max_documents,
                used=totals.documents,
                retry_after=STORAGE_RETRY_SECONDS,
                message="the tenant stores as many documents as it may; delete some or ask the operator",
            )
        if quotas.max_stored_bytes is not None and stored > quotas.max_stored_bytes:
            raise QuotaExceededError(
                "max_stored_bytes",
                limit=quotas.max_stored_bytes,
                used=totals.bytes,
                retry_after=STORAGE_RETRY_SECONDS,
                message=f"storing {size} more bytes would pass the tenant's limit; delete some or ask the operator",
            )

    def check_pages(self, tenant_id: str, pages: int) -> None:
        """Refuse ingesting `pages` more pages today if the day's limit cannot hold them (0: refuse only a
        day whose limit is reached)."""
        limit = self.quotas(tenant_id).pages_per_day
        if limit is None:
            return
        today = self._today(tenant_id)
        if today is not None and today.pages + max(pages, 1) > limit:
            raise QuotaExceededError(
                "pages_per_day",
                limit=limit,
                used=today.pages,
                retry_after=seconds_to_next_day(self._clock()),
                message=f"{max(pages, 1)} more pages would pass the tenant's pages of today",
            )

    def _take(self, tenant_id: str, quotas: Quotas) -> None:
        assert self._rates is not None and quotas.queries_per_minute is not None  # noqa: S101 - the caller checked
        burst = quotas.burst() or 0
        if quotas.queries_per_minute == 0 or burst == 0:
            wait_us = MINUTE_US
        else:
            try:
                wait_us = self._rates().take(
                    tenant_id,
                    per_minute=quotas.queries_per_minute,
                    burst=burst,
                    now_us=int(self._clock().timestamp() * 1_000_000),
                )
            except CitewiseError:
                logger.warning("rate of tenant %s not checked: its bucket is unreadable", tenant_id, exc_info=True)
                return
        if wait_us > 0:
            raise QuotaExceededError(
                "queries_per_minute",
                limit=quotas.queries_per_minute,
                used=burst,
                retry_after=max(1, math.ceil(wait_us / 1_000_000)),
                message=f"the tenant sent more than {quotas.queries_per_minute} queries a minute "
                f"(bursts of {burst}); retry after the pause",
            )

    def _today(self, tenant_id: str) -> UsageCounts | None:
        """The tenant's counters of today (UTC); None if there is no meter or it cannot be read."""
        if self._usage is None:
            return None
        today = self._clock().astimezone(UTC).date()
        try:
            days = self._usage().read(tenant_id, today, today)
        except CitewiseError:
            logger.warning("usage of tenant %s unreadable; daily quotas not checked", tenant_id, exc_info=True)
            return None
        return days[0].counts if days else UsageCounts()


class TodayUse(Frozen):
    """What counts against the daily quotas today (UTC)."""

    day: date
    pages: int
    generation_tokens: int


class QuotaStatus(Frozen):
    """A tenant's quotas as the operator sees them: each limit with its source, the overrides stored, and
    the current use (stored totals, today's pages and generation tokens)."""

    tenant_id: str
    quotas: dict[str, EffectiveQuota]
    overrides: QuotaOverrides | None
    stored: StoredTotals
    today: TodayUse


def quota_status(
    defaults: Quotas, registry: DocumentRegistry, usage: UsageMeter, tenant_id: str, today: date
) -> QuotaStatus:
    """The tenant's quotas and use, read now (no cache): what the operator's GET and `citewise tenant
    quotas` show."""
    overrides = registry.tenant_quotas(tenant_id)
    days = usage.read(tenant_id, today, today)
    counts = days[0].counts if days else UsageCounts()
    return QuotaStatus(
        tenant_id=tenant_id,
        quotas=effective(tenant_id, defaults, overrides).quotas,
        overrides=overrides,
        stored=registry.stored_totals(tenant_id),
        today=TodayUse(
            day=today,
            pages=counts.pages,
            generation_tokens=counts.generation_input_tokens + counts.generation_output_tokens,
        ),
    )


def save_quotas(
    registry: DocumentRegistry, tenant_id: str, overrides: QuotaOverrides, operator: Operator, now: datetime
) -> QuotaOverrides:
    """Replace the tenant's overrides, stamped with the operator and the time. A limit below the current
    use is accepted: new work is refused until the use falls under it."""
    stamped = overrides.model_copy(update={"updated_at": now, "updated_by": operator.user_id})
    registry.put_tenant_quotas(validate_tenant_id(tenant_id), stamped)
    return stamped


UNLIMITED = QuotaGate(Quotas(), lambda _: None)
"""A gate that refuses nothing: the default of the logic (tests, evaluation, benchmarks)."""
