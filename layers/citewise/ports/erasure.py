"""Erasing a tenant: what every store's port must offer, the erasure's state record, and the job.

Every store that holds a tenant's data implements `TenantStore` on its own port (`DocumentRegistry`,
`VectorIndex`, `BlobStore`, `UsageMeter`), held to it by that port's contract suite:
- `erase_tenant(tenant_id, limit=...)` deletes at most `limit` of the tenant's items and says how many
  it deleted; it answers 0 only when none was left. Bounded steps, so one call never outlives a function
  run, and a crash between two calls loses nothing: the next call finds what is left.
- `count_tenant(tenant_id)` counts what is left of the tenant: the proof a receipt shows.
Neither touches another tenant, however its id begins (`acme` erases nothing of `acme-eu` or `acme2`).

The job (`run_erasure`) walks `erased_stores(...)`, the one list of what an erasure deletes: a store
added later (conversation history, web sources) joins that list and its port gains the two methods.
It is resumable and idempotent: progress lives in the `Erasure` record, written after each step, and a
step deletes what is there whatever an earlier, interrupted run already deleted; it ends only when
every store's count is 0, read after the last delete (an upload that slipped in during the erasure is
found by that count and erased too). Then the record becomes the receipt: ERASED, with each store's
deleted and remaining counts, the operator who asked, start and end times. The record lives outside
every tenant's data (its own partition or file), so erasing the tenant never erases it.

A store that encrypts each tenant's data under a key of the tenant's own (`TenantKeyHolder`: search mode
s3vectors with a key per tenant) destroys that key once every store counts 0: it schedules the key's
deletion, the record names the key and its deletion date, and only then is the key's name (its alias)
released, so a run interrupted anywhere finds the key again and the receipt always names it.

Usage counters are kept (`kept_stores`): they hold no document content, only per-day counts under the
tenant id, and billing the tenant's last period needs them after it has left (docs/operations.md). The
receipt reports how many day records are kept; `UsageMeter.erase_tenant` exists for when the billing
retention has passed.

While a tenant's erasure runs, its requests are refused (`TenantErasingError`, 409 `TENANT_ERASING`):
`check_not_erasing` is one point read of the record per request.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol, runtime_checkable

from pydantic import Field

from citewise.domain.errors import ConflictError, NotFoundError
from citewise.domain.models import Frozen

ERASE_BATCH = 500
"""Items one `erase_tenant` step deletes at most by default: one S3 DeleteObjects (up to 1000 keys)
or 20 DynamoDB BatchWriteItem calls, well inside a second or two of a function's time."""


RETRY_SECONDS = 120
"""How long to wait before running an unfinished erasure again when a run found nothing it could delete
yet (two Serverless refresh windows)."""


class TenantStore(Protocol):
    """What every store's port offers for erasing a tenant (module docstring)."""

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of the tenant's items; how many were deleted (0 only when none was left)."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """How many of the tenant's items remain."""
        ...


class KeyDeletion(Frozen):
    """A tenant's encryption key whose deletion an erasure scheduled: what the receipt shows of it."""

    key_arn: str = Field(description="The KMS key, by ARN.")
    alias: str = Field(description="The alias it had (released once the deletion was scheduled).")
    deletion_date: datetime = Field(description="When KMS deletes the key; until then it is disabled.")


@runtime_checkable
class TenantKeyHolder(Protocol):
    """A `TenantStore` that may encrypt a tenant's data under a key of the tenant's own (module docstring):
    both methods are idempotent, so an interrupted erasure converges when run again."""

    def schedule_key_deletion(self, tenant_id: str) -> KeyDeletion | None:
        """Schedule the deletion of the tenant's key (a key already scheduled answers its date); None when
        the tenant has no key (or its name was released already)."""
        ...

    def release_key(self, tenant_id: str) -> None:
        """Release the key's name (its alias), so a tenant that comes back gets a new key."""
        ...


class TenantErasingError(ConflictError):
    """The tenant is being erased: its requests (queries, listings, uploads, MCP calls) are refused
    until the erasure ends. Not a 403: nothing is wrong with the caller's identity; not a 404 either:
    the tenant's data is still partly there."""

    code = "TENANT_ERASING"

    def __init__(self, tenant_id: str) -> None:
        super().__init__(
            "this tenant is being erased; its data can no longer be read or changed",
            details={"tenant_id": tenant_id},
        )


class ErasureInProgressError(ConflictError):
    """A second erasure of a tenant whose erasure is still running."""

    code = "ERASURE_IN_PROGRESS"


class ErasureStatus(StrEnum):
    """Where an erasure is: running (or interrupted, to be resumed), or done with its receipt."""

    ERASING = "ERASING"
    ERASED = "ERASED"


class StoreReceipt(Frozen):
    """One store's part of an erasure: what was deleted, and the count that shows what remains."""

    store: str
    deleted: int = Field(default=0, ge=0, description="Items deleted by this erasure (every step added).")
    remaining: int | None = Field(
        default=None, ge=0, description="`count_tenant` after the last delete; None until counted."
    )
    kept: bool = Field(default=False, description="The store is kept on purpose (usage: for billing).")
    key: KeyDeletion | None = Field(
        default=None, description="The tenant's own encryption key this store destroyed, if it had one."
    )


class Erasure(Frozen):
    """The state record of a tenant's erasure, and once ERASED its receipt."""

    tenant_id: str
    status: ErasureStatus
    requested_by: str = Field(description="The operator who asked for the erasure.")
    started_at: datetime
    finished_at: datetime | None = None
    steps: int = Field(default=0, ge=0, description="Delete steps run so far, over every invocation.")
    stores: list[StoreReceipt]

    def store(self, name: str) -> StoreReceipt:
        """The part of the store called `name`."""
        return next(part for part in self.stores if part.store == name)


class ErasureLog(Protocol):
    """Where erasure records live, one per tenant, outside every tenant's data."""

    def get(self, tenant_id: str) -> Erasure | None:
        """The tenant's erasure record (running or finished), or None if it was never erased."""
        ...

    def erasing(self, tenant_id: str) -> bool:
        """Whether the tenant's erasure is running: the cheapest read there is (one attribute, eventually
        consistent on DynamoDB), made by every request of the tenant."""
        ...

    def start(self, erasure: Erasure) -> None:
        """Store a new ERASING record, atomically refused (ErasureInProgressError) if the tenant's record
        is ERASING already; a finished record is replaced (a tenant may come back and leave again)."""
        ...

    def save(self, erasure: Erasure) -> None:
        """Store the record's progress or its receipt (last write wins: one job runs per tenant)."""
        ...


class ErasureQueue(Protocol):
    """Runs (or continues) a tenant's erasure later: an SQS message on AWS."""

    def send(self, tenant_id: str, *, delay_seconds: int = 0) -> None:
        """Have the job run for `tenant_id` (after `delay_seconds`); raises when that cannot be arranged."""
        ...


def erased_stores(
    *,
    credentials: TenantStore,
    registry: TenantStore,
    index: TenantStore,
    blobs: TenantStore,
    rates: TenantStore,
    conversations: TenantStore,
    sources: TenantStore,
    feedback: TenantStore,
) -> dict[str, TenantStore]:
    """Every store an erasure empties, by the name its receipt shows, in the order they are emptied:
    the programs' credentials first (no program of the tenant gets a token any more), the originals next
    (nothing new is ingested from them), then the index, the users' conversations (their answers quote
    the documents) and their feedback on them, the query-rate bucket, the registry last (its catalogue
    item keeps the tenant known until the end). The web sources go before the originals: no refresh of
    the tenant starts once they are gone (one running finds its source gone at its next save). A later
    store joins here."""
    return {
        "credentials": credentials,
        "sources": sources,
        "blobs": blobs,
        "index": index,
        "conversations": conversations,
        "feedback": feedback,
        "rates": rates,
        "registry": registry,
    }


def kept_stores(*, usage: TenantStore) -> dict[str, TenantStore]:
    """The stores an erasure counts for its receipt but keeps (module docstring): the usage counters."""
    return {"usage": usage}


def check_not_erasing(log: ErasureLog, tenant_id: str) -> None:
    """Refuse a tenant's request while its erasure runs: one point read of its record."""
    if log.erasing(tenant_id):
        raise TenantErasingError(tenant_id)


def start_erasure(
    log: ErasureLog,
    tenant_id: str,
    *,
    operator: str,
    known: bool,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Erasure:
    """Record that `operator` asked to erase `tenant_id`; the new ERASING record. NotFoundError when the
    tenant is not `known` (no store has heard of it), ErasureInProgressError while one runs."""
    current = log.get(tenant_id)
    if current is not None and current.status is ErasureStatus.ERASING:
        raise ErasureInProgressError("an erasure of this tenant is already running", details={"tenant_id": tenant_id})
    if not known:
        raise NotFoundError("no tenant by that id", details={"tenant_id": tenant_id})
    erasure = Erasure(
        tenant_id=tenant_id,
        status=ErasureStatus.ERASING,
        requested_by=operator,
        started_at=clock(),
        stores=[],
    )
    log.start(erasure)
    return erasure


def run_erasure(
    log: ErasureLog,
    tenant_id: str,
    stores: dict[str, TenantStore],
    kept: dict[str, TenantStore],
    *,
    time_left: Callable[[], float | None] = lambda: None,
    min_seconds: float = 5.0,
    limit: int = ERASE_BATCH,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Erasure:
    """Continue the tenant's ERASING erasure until it is done or `time_left()` (None: unbounded) drops
    under `min_seconds`; the record as it stands (ERASED with its receipt when done). A finished
    record is returned as it is: running the job again is harmless. NotFoundError if none was started.

    Each step deletes one batch of one store and then saves the record, so an interruption anywhere
    loses at most the count of one batch (its items are gone, the receipt undercounts them).
    """
    record = log.get(tenant_id)
    if record is None:
        raise NotFoundError("no erasure of this tenant was started", details={"tenant_id": tenant_id})
    if record.status is ErasureStatus.ERASED:
        return record
    parts = {part.store: part for part in record.stores}
    for name in stores:
        parts.setdefault(name, StoreReceipt(store=name))

    def out_of_time() -> bool:
        left = time_left()
        return left is not None and left < min_seconds

    while True:
        progressed = False
        for name, store in stores.items():
            while True:
                if out_of_time():
                    return _save(log, record, parts, status=ErasureStatus.ERASING)
                deleted = store.erase_tenant(tenant_id, limit=limit)
                if not deleted:
                    break
                progressed = True
                parts[name] = parts[name].model_copy(update={"deleted": parts[name].deleted + deleted})
                record = _save(log, record, parts, status=ErasureStatus.ERASING, step=True)
        # The proof, read after every delete: a write that slipped in meanwhile sends the job round again.
        counts = {name: store.count_tenant(tenant_id) for name, store in stores.items()}
        if not any(counts.values()):
            break
        if not progressed:
            # Counted but not found to delete: a Serverless index still shows entries deleted within its
            # refresh window. The caller runs the job again later (`RETRY_SECONDS`).
            return _save(log, record, parts, status=ErasureStatus.ERASING)
    for name, store in stores.items():
        if isinstance(store, TenantKeyHolder) and (deletion := store.schedule_key_deletion(tenant_id)) is not None:
            # Recorded before the alias goes: a run interrupted in between finds the key by it again.
            parts[name] = parts[name].model_copy(update={"key": deletion})
            record = _save(log, record, parts, status=ErasureStatus.ERASING)
            store.release_key(tenant_id)
    for name, count in counts.items():
        parts[name] = parts[name].model_copy(update={"remaining": count})
    for name, store in kept.items():
        parts[name] = StoreReceipt(store=name, remaining=store.count_tenant(tenant_id), kept=True)
    return _save(log, record, parts, status=ErasureStatus.ERASED, finished_at=clock())


def _save(
    log: ErasureLog,
    record: Erasure,
    parts: dict[str, StoreReceipt],
    *,
    status: ErasureStatus,
    step: bool = False,
    finished_at: datetime | None = None,
) -> Erasure:
    saved = record.model_copy(
        update={
            "status": status,
            "stores": list(parts.values()),
            "steps": record.steps + step,
            "finished_at": finished_at,
        }
    )
    log.save(saved)
    return saved
