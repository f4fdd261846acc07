"""Web sources: registration, removal, and the refresh that costs nothing when nothing changed (issue 31).

A refresh visits the source's pages: those its discovery finds (the sitemap's, the crawl's, the list)
and every page an earlier refresh knew, so a page that left the sitemap is still checked, and a page
answering 304 (whose links cannot be read) still has its children visited. Each known page is asked
for conditionally (its ETag and Last-Modified): a 304 re-reads, re-parses and re-embeds nothing. A page
fetched whole is extracted (`citewise.ingest.web_pages.extract_page`) and compared by the SHA-256 of what
would be stored: the same hash stores nothing either. A changed or new page is stored in the tenant's
blob store at the contract's path (`sources/<source_id>/<sha256(url)[:32]>.<ext>`), owned by the admin
who registered the source, shared with the tenant, its source, category, URL, version and date in its
metadata: from there it goes through the same ingest path as an upload (`DocumentWriter`). A page gone
(404/410) `gone_after` refreshes in a row loses its document.

A refresh holds its source (`SourceRegistry.start_run`): a second is refused (409), never queued twice.
It may stop and continue: `Refresher.run` works until the caller's time budget runs low, saves where it
is (pages visited, counts) and returns; the next call continues it. On AWS each call is one SQS message
to the refresh function, so a large site never exceeds one function run; locally one call runs it all.
Caps stop a refresh and say so (`RefreshSummary.capped`): `max_pages` pages queued, `max_bytes` bytes
downloaded; what they leave waits for the next refresh, and nothing it left is counted as gone.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Protocol

from citewise.domain.access import require_admin
from citewise.domain.errors import CitewiseError, ConflictError, NotFoundError
from citewise.domain.models import Caller, Visibility
from citewise.domain.objects import SourceObject
from citewise.domain.sources import (
    PageState,
    RefreshLock,
    RefreshRun,
    RefreshRunningError,
    RefreshStatus,
    RefreshSummary,
    Source,
    SourceKind,
    SourceSpec,
    page_path,
)
from citewise.domain.tenancy import document_id
from citewise.domain.weburl import check_public_url
from citewise.ingest import web_pages
from citewise.ports.blobstore import BlobStore
from citewise.ports.sources import RefreshMessage, RefreshQueue, SourceRegistry
from citewise.ports.web import FetchedPage, FetchOutcome, PageFetcher, Validators

logger = logging.getLogger(__name__)

MANAGE = "manage web sources"
"""What only a tenant admin may do (`require_admin`'s message)."""
MAX_SOURCES = 100
"""Sources one tenant may register: each is refreshed on a schedule, and this bounds what one costs."""
LEASE = timedelta(minutes=20)
"""How long a refresh holds its source without saving: longer than one function run (15 minutes at
most) plus a page's time cap, so only a run that crashed loses its source."""
SAVE_EVERY = 20
"""Pages between two saves of a run's progress (and renewals of its lease)."""
MIN_SECONDS = 60.0
"""A run stops (to be continued) when less than this is left of its time budget: a page's fetch and store."""
EXTENSIONS: Mapping[str, str] = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/plain": "txt",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}
"""The content types a page's document may have, and the extension its path gets (what the parsers take)."""
_SITEMAP_INDEX = b"<sitemapindex"
MAX_SITEMAPS = 50
"""Sitemaps one discovery reads at most (an index and those it lists)."""
PAGES_CAP, BYTES_CAP = "max_pages", "max_bytes"
"""The caps a refresh stops at: queuing (the pages queued are still visited), or downloading (it ends)."""
Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class DocumentWriter(Protocol):
    """Where a page's document goes: the blob store, and from there the ingest path of an upload."""

    def store(
        self, tenant_id: str, path: str, data: bytes, *, content_type: str, owner: str, metadata: dict[str, str]
    ) -> None:
        """Store (or replace) the document at `path`, to be ingested."""
        ...

    def remove(self, tenant_id: str, path: str) -> None:
        """Remove the document at `path` (object, chunks and record)."""
        ...


class BlobWriter:
    """On AWS: the object alone. The bucket's notifications bring it to the ingest function (or, for a
    removal, remove its chunks and record), exactly as for an upload."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    def store(
        self, tenant_id: str, path: str, data: bytes, *, content_type: str, owner: str, metadata: dict[str, str]
    ) -> None:
        self.blobs.put(
            tenant_id,
            path,
            data,
            content_type=content_type,
            owner=owner,
            visibility=Visibility.SHARED,
            metadata=metadata,
        )

    def remove(self, tenant_id: str, path: str) -> None:
        self.blobs.delete(tenant_id, path)


class Ingesting(Protocol):
    """What `IngestingWriter` needs of the pipeline (`citewise.ingest.pipeline.Ingestor`)."""

    def ingest(self, obj: SourceObject, /) -> object: ...

    def delete(self, tenant_id: str, doc_id: str) -> bool: ...


class IngestingWriter(BlobWriter):
    """Locally, where no bucket notification follows a write: the object, then its ingestion (or removal)
    by the same pipeline the notifications drive."""

    def __init__(self, blobs: BlobStore, ingestor: Ingesting) -> None:
        super().__init__(blobs)
        self.ingestor = ingestor

    def store(
        self, tenant_id: str, path: str, data: bytes, *, content_type: str, owner: str, metadata: dict[str, str]
    ) -> None:
        super().store(tenant_id, path, data, content_type=content_type, owner=owner, metadata=metadata)
        self.ingestor.ingest(self.blobs.get(tenant_id, path))

    def remove(self, tenant_id: str, path: str) -> None:
        super().remove(tenant_id, path)
        self.ingestor.delete(tenant_id, document_id(tenant_id, path))


# --- registration and removal --------------------------------------------------------------------------


def register_source(
    store: SourceRegistry, caller: Caller, spec: SourceSpec, *, now: datetime, allow_loopback: bool = False
) -> Source:
    """A new source of the caller's tenant, due for its first refresh now; tenant admins only.

    Every start URL must be http(s), without credentials, naming a host that is not a private address
    (`check_public_url`: ValidationError naming the reason, 400); the fetcher checks every address it
    connects to again. At most `MAX_SOURCES` per tenant (ConflictError, 409, beyond)."""
    require_admin(caller, MANAGE)
    for url in spec.start_urls():
        check_public_url(url, allow_loopback=allow_loopback)
    if len(store.tenant_sources(caller.tenant_id)) >= MAX_SOURCES:
        raise ConflictError(
            f"a tenant may register at most {MAX_SOURCES} sources; remove one first", details={"limit": MAX_SOURCES}
        )
    source = Source(
        source_id=uuid.uuid4().hex,
        tenant_id=caller.tenant_id,
        spec=spec,
        created_at=now,
        created_by=caller.user_id,
        next_refresh_at=now,
    )
    store.put_source(source)
    return source


def visible_source(store: SourceRegistry, caller: Caller, source_id: str) -> Source:
    """The caller's tenant's source (every member may read it); NotFoundError for any other."""
    source = store.source(caller.tenant_id, source_id)
    if source is None:
        raise NotFoundError("no such source", details={"id": source_id})
    return source


def remove_source(
    store: SourceRegistry, writer: DocumentWriter, caller: Caller, source_id: str, *, now: datetime
) -> int:
    """Remove the source and every document it brought; how many documents. Tenant admins only; refused
    (409) while a refresh of it runs, which would store pages after the removal."""
    require_admin(caller, MANAGE)
    source = visible_source(store, caller, source_id)
    running = source.running_at(now)
    if running is not None:
        raise RefreshRunningError(source_id, running.run.run_id)
    removed = 0
    for page in store.pages(caller.tenant_id, source_id):
        if page.path is not None:
            writer.remove(caller.tenant_id, page.path)
            removed += 1
    store.delete_source(caller.tenant_id, source_id)
    return removed


def hold_source(store: SourceRegistry, tenant_id: str, source_id: str, *, now: datetime) -> RefreshMessage:
    """Hold the source for a new run (RefreshRunningError, 409, if one holds it); the run to run."""
    lock = RefreshLock(run=RefreshRun(run_id=uuid.uuid4().hex, started_at=now), lease_until=now + LEASE)
    store.start_run(tenant_id, source_id, lock, now)
    return RefreshMessage(tenant_id=tenant_id, source_id=source_id, run_id=lock.run.run_id)


def start_refresh(
    store: SourceRegistry, queue: RefreshQueue, tenant_id: str, source_id: str, *, now: datetime
) -> RefreshMessage:
    """Hold the source for a new run and queue its first batch; RefreshRunningError (409) if one runs."""
    message = hold_source(store, tenant_id, source_id, now=now)
    queue.send(message)
    return message


def request_refresh(
    store: SourceRegistry, queue: RefreshQueue, caller: Caller, source_id: str, *, now: datetime
) -> Source:
    """A tenant admin's refresh now (`POST /v1/sources/{id}/refresh`): the source, holding its new run."""
    require_admin(caller, MANAGE)
    visible_source(store, caller, source_id)
    start_refresh(store, queue, caller.tenant_id, source_id, now=now)
    return visible_source(store, caller, source_id)


def start_due(store: SourceRegistry, queue: RefreshQueue, *, now: datetime, limit: int = 100) -> list[RefreshMessage]:
    """Start a run for each source of any tenant whose time has come (the schedule's tick); what started.
    A source with a run still holding it is left to that run."""
    started = []
    for tenant_id, source_id in store.due(now, limit=limit):
        try:
            started.append(start_refresh(store, queue, tenant_id, source_id, now=now))
        except (RefreshRunningError, NotFoundError):
            continue
    return started


# --- the refresh ---------------------------------------------------------------------------------------


class Refresher:
    """Runs the refreshes of sources: discovery, conditional fetches, stores and removals, progress."""

    def __init__(
        self,
        store: SourceRegistry,
        fetcher: PageFetcher,
        writer: DocumentWriter,
        *,
        source_key: str,
        source_date_key: str,
        clock: Clock = _now,
        progress: Callable[[RefreshSummary], None] = lambda _: None,
    ) -> None:
        self.store = store
        self.fetcher = fetcher
        self.writer = writer
        self.source_key = source_key
        self.source_date_key = source_date_key
        self.clock = clock
        self.progress = progress

    def run(
        self,
        message: RefreshMessage,
        *,
        time_left: Callable[[], float | None] = lambda: None,
        min_seconds: float = MIN_SECONDS,
    ) -> RefreshRun | None:
        """Continue the run of `message` until it ends (the finished run, `finished_at` set) or the time
        budget runs low (the run as saved, to be continued by another call). None when the run no longer
        holds its source (a stale message, a lease taken over, the source removed): nothing to do."""
        source = self.store.source(message.tenant_id, message.source_id)
        if source is None or source.running is None or source.running.run.run_id != message.run_id:
            return None
        work = _Work(self, source, source.running.run)
        if not work.run.discovered:
            work.discover()
        while work.pending and work.run.summary.capped != BYTES_CAP:
            left = time_left()
            if left is not None and left < min_seconds:
                return work.run if work.save() else None
            work.visit(work.pending.popleft())
            if work.visited % SAVE_EVERY == 0 and not work.save():
                return None
        return work.finish()


class _Work:
    """One call's share of a run: the source's pages in memory, the queue of pages to visit, the counts."""

    def __init__(self, refresher: Refresher, source: Source, run: RefreshRun) -> None:
        self.r = refresher
        self.source = source
        self.spec = source.spec
        self.run = run
        self.pages = {page.url: page for page in refresher.store.pages(source.tenant_id, source.source_id)}
        queued = [p for p in self.pages.values() if p.run_id == run.run_id and not p.done]
        self.pending: deque[str] = deque(p.url for p in sorted(queued, key=lambda p: (p.depth, p.url)))
        self.dirty: dict[str, PageState] = {}
        self.gone: set[str] = set()
        self.visited = 0
        self.queued = sum(1 for page in self.pages.values() if page.run_id == run.run_id)
        """Pages this run queued (the `max_pages` cap counts them)."""

    def count(self, **counts: int) -> None:
        self.run = self.run.model_copy(update={"summary": self.run.summary.add(**counts)})

    def fail(self, reason: str) -> None:
        reasons = dict(self.run.summary.reasons)
        reasons[reason] = reasons.get(reason, 0) + 1
        self.run = self.run.model_copy(
            update={"summary": self.run.summary.add(failed=1).model_copy(update={"reasons": reasons})}
        )

    def cap(self, which: str) -> None:
        self.run = self.run.model_copy(update={"summary": self.run.summary.model_copy(update={"capped": which})})

    def put(self, page: PageState) -> None:
        self.pages[page.url] = page
        self.dirty[page.url] = page

    def enqueue(self, url: str, depth: int) -> None:
        """Queue `url` for this run unless it is queued already or the page cap is reached."""
        known = self.pages.get(url)
        if known is not None and known.run_id == self.run.run_id:
            return
        if self.queued >= self.spec.max_pages:
            self.cap(PAGES_CAP)
            return
        base = known or PageState(url=url, depth=depth)
        self.put(base.model_copy(update={"run_id": self.run.run_id, "done": False, "depth": min(base.depth, depth)}))
        self.pending.append(url)
        self.queued += 1

    # --- discovery ---

    def discover(self) -> None:
        """Queue what the source lists now, then every page an earlier refresh knew."""
        if self.spec.kind is SourceKind.SITEMAP:
            for url in self._sitemap_pages(str(self.spec.url)):
                self.enqueue(url, 0)
        else:
            for url in self.spec.start_urls():
                self.enqueue(url, 0)
        for page in sorted(self.pages.values(), key=lambda p: (p.depth, p.url)):
            self.enqueue(page.url, page.depth)
        self.run = self.run.model_copy(update={"discovered": True})
        self.save()

    def _sitemap_pages(self, url: str) -> list[str]:
        """The pages of the sitemap at `url`, following a sitemap index one level (at most MAX_SITEMAPS)."""
        sitemaps = deque([(url, 0)])
        pages: list[str] = []
        read = 0
        while sitemaps and read < MAX_SITEMAPS:
            location, level = sitemaps.popleft()
            read += 1
            fetched = self._fetch(location, None)
            if fetched.outcome is not FetchOutcome.FETCHED:
                self.fail(f"sitemap_{fetched.reason or fetched.outcome.value}")
                continue
            entries = web_pages.sitemap_urls(fetched.body)
            if _SITEMAP_INDEX in fetched.body[:4096] and level == 0:
                sitemaps.extend((entry.url, 1) for entry in entries)
            else:
                pages.extend(entry.url for entry in entries)
        return pages

    # --- one page ---

    def _fetch(self, url: str, validators: Validators | None) -> FetchedPage:
        fetched = self.r.fetcher.fetch(url, validators=validators)
        if fetched.outcome is not FetchOutcome.REFUSED:
            self.count(requests=1)
        return fetched

    def visit(self, url: str) -> None:
        """Fetch one queued page (conditionally if it has a document) and act on the answer."""
        page = self.pages[url]
        validators = Validators(page.etag, page.last_modified) if page.path else None
        fetched = self._fetch(url, validators)
        self.visited += 1
        page = page.model_copy(update={"done": True})
        if fetched.outcome is FetchOutcome.NOT_MODIFIED:
            self.count(not_modified=1)
            self.put(page.model_copy(update={"misses": 0}))
        elif fetched.outcome is FetchOutcome.GONE:
            self._gone(page)
        elif fetched.outcome is FetchOutcome.FETCHED:
            self._fetched(page, fetched)
        else:
            self.fail(fetched.reason or fetched.outcome.value)
            self.put(page)
        self.r.progress(self.summary())

    def _gone(self, page: PageState) -> None:
        self.count(gone=1)
        misses = page.misses + 1
        if misses < self.spec.gone_after:
            self.put(page.model_copy(update={"misses": misses}))
            return
        if page.path is not None:
            self.r.writer.remove(self.source.tenant_id, page.path)
            self.count(removed=1)
        self.pages.pop(page.url, None)
        self.dirty.pop(page.url, None)
        self.gone.add(page.url)

    def _fetched(self, page: PageState, fetched: FetchedPage) -> None:
        self.count(bytes=len(fetched.body))
        if (
            self.spec.kind is SourceKind.CRAWL
            and page.depth < self.spec.depth
            and fetched.content_type
            in (
                "text/html",
                "application/xhtml+xml",
            )
        ):
            for link in web_pages.page_links(fetched.body, fetched.final_url):
                if self.spec.in_scope(link):
                    self.enqueue(link, page.depth + 1)
        if self.run.summary.bytes >= self.spec.max_bytes:
            self.cap(BYTES_CAP)
        validators = {"etag": fetched.validators.etag, "last_modified": fetched.validators.last_modified, "misses": 0}
        extracted = web_pages.extract_page(fetched)
        digest = hashlib.sha256(extracted.body).hexdigest()
        if page.path is not None and digest == page.content_hash:
            self.count(unchanged=1)
            self.put(page.model_copy(update=validators))
            return
        extension = EXTENSIONS.get(extracted.content_type)
        if extension is None:
            self.fail("content_type")
            self.put(page)
            return
        path = page_path(self.source.source_id, page.url, extension)
        try:
            self.r.writer.store(
                self.source.tenant_id,
                path,
                extracted.body,
                content_type=extracted.content_type,
                owner=self.source.created_by,
                metadata=self._metadata(page.url, extracted.source_date),
            )
        except CitewiseError as exc:
            logger.warning("page %s of source %s not stored: %s", page.url, self.source.source_id, exc.message)
            self.fail("store")
            self.put(page)
            return
        if page.path is not None and page.path != path:
            self.r.writer.remove(self.source.tenant_id, page.path)  # its content type changed
        self.count(**({"changed": 1} if page.path is not None else {"new": 1}))
        self.put(page.model_copy(update={**validators, "path": path, "content_hash": digest}))

    def _metadata(self, url: str, source_date: datetime | None) -> dict[str, str]:
        """The document's metadata: the contract's keys, and the provenance keys (source = category)."""
        category = self.spec.category.value
        metadata = {"source_id": self.source.source_id, "url": url, "category": category, self.r.source_key: category}
        if source_date is not None:
            metadata[self.r.source_date_key] = source_date.isoformat()
        version = self.spec.page_version(url)
        if version is not None:
            metadata["version"] = version
        return metadata

    # --- saving ---

    def summary(self) -> RefreshSummary:
        return self.run.summary.model_copy(update={"pending": len(self.pending)})

    def save(self) -> bool:
        """Store the pages changed since the last save and the run's progress (renewing its lease)."""
        tenant_id, source_id = self.source.tenant_id, self.source.source_id
        if self.dirty:
            self.r.store.put_pages(tenant_id, source_id, self.dirty.values())
            self.dirty = {}
        if self.gone:
            self.r.store.delete_pages(tenant_id, source_id, self.gone)
            self.gone = set()
        self.run = self.run.model_copy(update={"summary": self.summary()})
        lock = RefreshLock(run=self.run, lease_until=self.r.clock() + LEASE)
        return self.r.store.save_run(tenant_id, source_id, lock)

    def finish(self) -> RefreshRun | None:
        if not self.save():
            return None
        now = self.r.clock()
        status = RefreshStatus.CAPPED if self.run.summary.capped else RefreshStatus.COMPLETED
        finished = self.run.model_copy(update={"finished_at": now, "status": status})
        tenant_id, source_id = self.source.tenant_id, self.source.source_id
        if not self.r.store.finish_run(tenant_id, source_id, finished, now + self.spec.interval):
            return None
        self.r.progress(finished.summary)
        return finished
