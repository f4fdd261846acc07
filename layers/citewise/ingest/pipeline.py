"""The ingestion pipeline: object -> registry PENDING -> parse -> chunk -> embed -> index -> INDEXED.

Idempotent on (tenant, path, version): the same version with the same access metadata is skipped
without being parsed. A changed document is re-chunked, but only chunks whose embedded text is new are
embedded; the rest reuse their stored vectors. The index swaps a document's chunks in one atomic step,
so no stale chunk survives an update and a crash never leaves half a document.

Long documents: progress is kept per embedding batch (`_embed`: each batch's vectors are staged in the
index, where only `vectors_by_hash` finds them), so a retry embeds only what no earlier attempt did; and
an attempt running short of the invocation's time stops between batches with `IngestDeferredError`,
the record PENDING and the previous version searchable, for the queue's next delivery to continue.

Ownership: an object replaces a registered document only if it was written by someone who may modify
that document (`citewise.domain.access.may_modify` of the owner the object was signed for); any other is
REFUSED and the record, chunks and status stay exactly as they were.

Quotas: a document that would take its tenant over a storage quota (documents, bytes) or the day's pages
is recorded FAILED with `QUOTA_EXCEEDED` and its object kept, so the operator's re-queue ingests it once
the quota is raised (`citewise.ingest.requeue`).

Failures are recorded, never lost: a document that cannot be indexed is FAILED in the registry with a
reason and none of its chunks stay searchable. A FAILED record keeps the owner and visibility the object
was written with: a failure never invents an owner or widens who can read it. Permanent problems (bad
input) are returned as FAILED results; transient ones (a throttled or failing backend) are recorded and
then re-raised, so a queue can retry the message.

Concurrency: two workers may ingest two versions of one document at once (S3 notifications of a busy key
arrive in parallel). The registry orders writes (`DocumentRegistry.put` refuses one older than the stored
record), so the older worker's final write fails with ConflictError. If that happens after its chunks
went into the index, they may have replaced the newer version's; the worker then flags the record
PENDING and raises the conflict, so its message is redelivered and re-ingests the object as it is now.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from citewise.domain import deadline
from citewise.domain.access import may_modify, object_writer
from citewise.domain.batching import batched
from citewise.domain.errors import (
    CitewiseError,
    ConflictError,
    IngestDeferredError,
    PayloadTooLargeError,
    ValidationError,
)
from citewise.domain.models import (
    AttributeValue,
    Chunk,
    Document,
    DocumentMetadata,
    DocumentStatus,
    ParsedDocument,
    Vector,
)
from citewise.domain.objects import SourceObject
from citewise.domain.provenance import Provenance, ProvenanceKeys, as_utc, path_source, provenance
from citewise.domain.quotas import QuotaExceededError
from citewise.domain.tenancy import document_id, validate_path, validate_tenant_id
from citewise.domain.textutil import count_tokens, embedding_text
from citewise.ingest.chunking import Chunker
from citewise.ingest.parsing import ParseLimits, parse
from citewise.ports.embedder import Embedder, ReportsTokens
from citewise.ports.index import VectorIndex
from citewise.ports.progress import Progress, Step, silent
from citewise.ports.quotas import UNLIMITED, QuotaGate
from citewise.ports.registry import DeletedDocumentError, DocumentRegistry
from citewise.ports.usage import UNMETERED, Meter, UsageCounts

logger = logging.getLogger(__name__)


class Outcome(StrEnum):
    """What one ingest call did, as counted in the CLI's summary."""

    NEW = "new"
    MODIFIED = "modified"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    DELETED = "deleted"
    SUPERSEDED = "superseded"
    REFUSED = "refused"


@dataclass(frozen=True)
class IngestResult:
    """The outcome and the registry record after it; `embedded`/`reused` count vectors; `reason` says
    why an object was REFUSED."""

    outcome: Outcome
    document: Document
    embedded: int = 0
    reused: int = 0
    reason: str | None = None


@dataclass(frozen=True)
class Limits:
    """Input limits that turn oversized documents into clear FAILED records instead of exhaustion: the
    upload's size, then what parsing it may cost (`ParseLimits`: pages, expansion, time), then its chunks
    (each one embedded, stored and listed)."""

    max_document_bytes: int = 50 * 1024 * 1024
    parse: ParseLimits = ParseLimits()
    max_chunks: int = 10_000


COMMIT_RESERVE_SECONDS = 5.0
COMMIT_SECONDS_PER_CHUNK = 0.012
"""Kept back from the invocation's budget for the index write and the registry record after the last
embedding batch: `COMMIT_RESERVE_SECONDS` plus this much per chunk of the group. Writing 10,000 chunks of
1,024 dimensions took up to 9.6 ms a chunk on the test's OpenSearch node, on a busy two-core machine
(docs/aws.md, "The largest document"); 10,000 chunks keep 125 s back."""
STAGE_SECONDS = 10.0
"""Embedding time between two stagings of a long document's vectors: what a kill -9 can cost."""


@dataclass
class _Work:
    """One changed document on its way through the phases of `ingest_many`."""

    obj: SourceObject
    pending: Document
    is_new: bool
    chunks: list[Chunk] = field(default_factory=list)
    vectors: list[Vector] = field(default_factory=list)
    embedded: int = 0
    indexed: Document | None = None
    outcome: IngestResult | CitewiseError | None = None


def _raiser(exc: Exception) -> Callable[[_Work], None]:
    """A step that fails with `exc`, so a shared failure settles each document like its own would."""

    def fail(_: _Work) -> None:
        raise exc

    return fail


class Ingestor:
    """Runs the pipeline against injected ports, for one object or a stream of them."""

    def __init__(
        self,
        index: VectorIndex,
        registry: DocumentRegistry,
        embedder: Embedder,
        chunker: Chunker,
        *,
        limits: Limits | None = None,
        embed_batch_size: int = 64,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        provenance_keys: ProvenanceKeys | None = None,
        commit_reserve: float = COMMIT_RESERVE_SECONDS,
        commit_seconds_per_chunk: float = COMMIT_SECONDS_PER_CHUNK,
        stage_seconds: float = STAGE_SECONDS,
        meter: Meter = UNMETERED,
        quotas: QuotaGate = UNLIMITED,
    ) -> None:
        self.index = index
        self.registry = registry
        self.embedder = embedder
        self.chunker = chunker
        self.limits = limits or Limits()
        self.embed_batch_size = embed_batch_size
        self.clock = clock
        self.provenance_keys = provenance_keys or ProvenanceKeys()
        self.commit_reserve = commit_reserve
        self.commit_seconds_per_chunk = commit_seconds_per_chunk
        self.stage_seconds = stage_seconds
        self.meter = meter
        self.quotas = quotas
        self._index_ready = False

    def ingest(self, obj: SourceObject) -> IngestResult:
        """Bring the index and registry up to date with `obj`.

        Raises `ValidationError` for an invalid tenant or path (nothing is recorded), transient
        errors (throttling, a failing backend) after recording the document as FAILED, so a queue
        retries it, and `IngestDeferredError` when the invocation's time budget ran low between two
        embedding batches (the record stays PENDING, the previous version searchable, the vectors
        embedded so far staged); everything else is a result.
        """
        [(_, outcome)] = self.ingest_many([obj])
        if isinstance(outcome, CitewiseError):
            raise outcome
        return outcome

    def ingest_many(
        self, objects: Iterable[SourceObject], *, group: int = 32, progress: Progress = silent
    ) -> Iterator[tuple[SourceObject, IngestResult | CitewiseError]]:
        """`ingest` for many objects, yielding each with its result or the error `ingest` would raise.

        Objects are taken `group` at a time so the chunks of all changed documents in a group are
        embedded together: one large batch keeps a model busy where one call per short document does not.
        `progress` hears of the long steps inside a group: a PDF's pages read, the group's chunks embedded.
        """
        self.ensure_index()
        for batch in batched(objects, group):
            works: list[_Work] = []
            for obj in batch:
                started = self._start(obj)
                if isinstance(started, _Work):
                    works.append(started)
                else:
                    yield obj, started
            prepared = [work for work in works if self._guarded(work, functools.partial(self._prepare, progress))]
            used: dict[str, UsageCounts] = {}
            try:
                self._embed(prepared, progress, used)
            except Exception as exc:  # noqa: BLE001 - each document records the failure its own way
                for work in prepared:
                    self._guarded(work, _raiser(exc))
            for work in prepared:
                if work.outcome is None:
                    self._guarded(work, self._commit)
            for work in works:
                tenant_id = work.obj.tenant_id
                used[tenant_id] = used.get(tenant_id, UsageCounts()) + _outcome_usage(work.outcome)
            for tenant_id, counts in used.items():  # one increment per tenant and group: one write each
                self.meter.record(tenant_id, counts)
            for work in works:
                assert work.outcome is not None  # noqa: S101 - every path above sets it
                yield work.obj, work.outcome

    def layout(self, obj: SourceObject, metadata: DocumentMetadata) -> tuple[ParsedDocument, list[Chunk]]:
        """`obj` parsed and chunked as indexing does it (the same parser limits and chunker): the text
        and spans a citation points into (`citewise.ingest.layout`)."""
        parsed = parse(obj.load(), obj.path, obj.content_type, limits=self.limits.parse)
        return parsed, self.chunker.split(parsed, metadata, max_chunks=self.limits.max_chunks)

    def delete(self, tenant_id: str, doc_id: str) -> bool:
        """Remove the document's chunks and record; False if it was not registered.

        The registry keeps a tombstone of the delete, so a worker still ingesting an older state of the
        document cannot record it again (see `_superseded` for the chunks such a worker wrote).
        """
        self.ensure_index()  # a removal may be the first event a fresh index sees (a sidecar before its file)
        existed = self.registry.get(tenant_id, doc_id) is not None
        self.index.delete_document(tenant_id, doc_id)
        self.registry.delete(tenant_id, doc_id, deleted_at=self.clock())
        return existed

    def ensure_index(self) -> None:
        """Create the index for this embedder (or check it matches), once per process, on first use.

        Not at construction: building the pipeline stays free of network calls at a Lambda's cold start.
        """
        if not self._index_ready:
            self.index.ensure(self.embedder.name, self.embedder.dimension)
            self._index_ready = True

    def _start(self, obj: SourceObject) -> _Work | IngestResult | CitewiseError:
        """Validate, skip an unchanged version, else record PENDING and hand back the work to do."""
        try:
            validate_tenant_id(obj.tenant_id)
            validate_path(obj.path)
            doc_id = document_id(obj.tenant_id, obj.path)
            previous = self.registry.get(obj.tenant_id, doc_id)
            if previous is not None and not may_modify(object_writer(obj), previous):
                reason = f"written for '{obj.owner}', who may not modify this document of '{previous.owner}'"
                return IngestResult(Outcome.REFUSED, previous, reason=reason)
            described = self._described(obj)
            if previous is not None and described is not None and _unchanged(previous, obj, described):
                return IngestResult(Outcome.UNCHANGED, previous)
            pending = self._pending(obj, previous, described)
        except CitewiseError as exc:
            return exc
        try:
            self.registry.put(pending)
        except DeletedDocumentError as exc:  # what this worker read was deleted since: nothing to do or retry
            return IngestResult(Outcome.SUPERSEDED, pending, reason=exc.message)
        except CitewiseError as exc:
            return exc
        return _Work(obj, pending, is_new=previous is None)

    def _described(self, obj: SourceObject) -> Provenance | None:
        """The object's source, metadata date and remaining attributes; None if its metadata date is not a
        date (`_prepare` then fails the document with the reason)."""
        try:
            return provenance(obj.path, obj.attributes, self.provenance_keys)
        except ValidationError:
            return None

    def _pending(self, obj: SourceObject, previous: Document | None, described: Provenance | None) -> Document:
        """The PENDING record of `obj`'s version, keeping what the previous record knew (title, creation)."""
        now = self.clock()
        attributes = described.attributes if described else obj.attributes
        return Document(
            tenant_id=obj.tenant_id,
            doc_id=document_id(obj.tenant_id, obj.path),
            path=obj.path,
            source=described.source if described else path_source(obj.path),
            channel=obj.channel,
            # Until the content is parsed: what the metadata or the store says; `_prepare` settles it.
            source_date=(described and described.declared_date) or _object_date(obj),
            title=previous.title if previous else None,
            owner=obj.owner,
            visibility=obj.visibility,
            status=DocumentStatus.PENDING,
            version=obj.version,
            size_bytes=obj.size,
            tags=_tags(attributes),
            attributes=attributes,
            created_at=previous.created_at if previous else now,
            # Ordered by when the object was seen: a worker that saw it before a delete writes too late.
            updated_at=obj.read_at or now,
        )

    def _guarded(self, work: _Work, step: Callable[[_Work], None]) -> bool:
        """Run one step; on failure settle the work's outcome as `ingest` promises. True if it went on."""
        try:
            step(work)
            return True
        except IngestDeferredError as exc:  # not a failure: the record stays PENDING, the index as it was
            work.outcome = exc
        except ConflictError as exc:
            self._superseded(work, exc, touched_index=step == self._commit)
        except CitewiseError as exc:
            # A quota refusal is final for this attempt, the object kept: the operator's re-queue retries it.
            permanent = isinstance(exc, ValidationError | PayloadTooLargeError | QuotaExceededError)
            failed = self._settle_failure(work, f"{exc.code}: {exc.message}", keep_staged=not permanent)
            if failed is not None:
                work.outcome = IngestResult(Outcome.FAILED, failed) if permanent else exc
        except Exception as exc:  # noqa: BLE001 - a bug in one document must not lose the others
            logger.exception("unexpected failure ingesting %s", work.pending.doc_id)
            failed = self._settle_failure(work, f"INTERNAL_ERROR: {type(exc).__name__}")
            if failed is not None:
                work.outcome = IngestResult(Outcome.FAILED, failed)
        return False

    def _superseded(self, work: _Work, conflict: ConflictError, *, touched_index: bool) -> None:
        """A newer version owns the record now: leave its status alone, unless this worker's index write
        may have replaced (or removed) the newer version's chunks. Then flag the record so the redelivery
        that the re-raised conflict asks for re-ingests the current object instead of skipping it. If a
        delete took the record instead, the chunks this worker wrote go too: the document stays deleted."""
        tenant_id, doc_id = work.pending.tenant_id, work.pending.doc_id
        latest = self.registry.get(tenant_id, doc_id)
        work.outcome = IngestResult(Outcome.SUPERSEDED, latest or work.pending)
        if not touched_index:
            return
        if latest is None:
            self.index.delete_document(tenant_id, doc_id)
        else:
            self._flag_for_reingest(latest)
            work.outcome = conflict

    def _settle_failure(self, work: _Work, reason: str, *, keep_staged: bool = False) -> Document | None:
        """Record FAILED; None (the work superseded) if a newer version took the record meanwhile.
        `keep_staged`: a transient failure keeps the staged vectors for the retry."""
        try:
            return self._fail(work.pending, reason, keep_staged=keep_staged)
        except ConflictError as exc:
            self._superseded(work, exc, touched_index=True)  # `_fail` removed the document's chunks first
            return None

    def _prepare(self, progress: Progress, work: _Work) -> None:
        """Load, parse and chunk the object."""
        obj, pending = work.obj, work.pending
        if obj.defect is not None:
            raise obj.defect
        if obj.size > self.limits.max_document_bytes:
            raise PayloadTooLargeError(
                f"document is {obj.size} bytes; the limit is {self.limits.max_document_bytes}",
                details={"size": obj.size, "limit": self.limits.max_document_bytes},
            )
        described = provenance(obj.path, obj.attributes, self.provenance_keys)  # a date that is not one fails here
        # The totals hold this version's PENDING record already: it is what the document replaces.
        self.quotas.check_storage(obj.tenant_id, pending, obj.size)
        data = obj.load()
        step = Step("parse", obj.path, "page")
        parsed = parse(
            data,
            obj.path,
            obj.content_type,
            limits=self.limits.parse,
            on_page=lambda done, total: progress(step, done, total),
        )
        self.quotas.check_pages(obj.tenant_id, parsed.page_count or 1)
        title = parsed.title or obj.path.rsplit("/", 1)[-1]
        source_date = described.declared_date or parsed.source_date or _object_date(obj) or pending.updated_at
        metadata = DocumentMetadata(
            tenant_id=obj.tenant_id,
            doc_id=pending.doc_id,
            owner=obj.owner,
            visibility=obj.visibility,
            source=described.source,
            channel=obj.channel,
            source_date=as_utc(source_date),
            path=obj.path,
            title=title,
            tags=pending.tags,
            created_at=pending.created_at,
            updated_at=pending.updated_at,
            attributes=described.attributes,
        )
        work.chunks = self.chunker.split(parsed, metadata, max_chunks=self.limits.max_chunks)
        work.indexed = pending.model_copy(
            update={
                "status": DocumentStatus.INDEXED,
                "title": title,
                "content_hash": hashlib.sha256(data).hexdigest(),
                "chunk_count": len(work.chunks),
                "page_count": parsed.page_count,
                "char_count": len(parsed.text),
                "content_type": obj.content_type,
                "source_date": metadata.source_date,
                "error": None,
            }
        )

    def _embed(self, works: list[_Work], progress: Progress, used: dict[str, UsageCounts]) -> None:
        """Give every chunk a vector: stored (or staged) ones are reused, the rest embedded together in
        batches. Each batch adds what it cost to `used` (per tenant) as it returns, so an attempt that
        fails or is deferred still counts the embedding it paid for.

        When the group needs more than one batch, the vectors embedded are staged in the index
        (`VectorIndex.stage_vectors`) after each batch once `stage_seconds` have passed since the last
        staging, and whatever is left when an attempt fails or is deferred: an attempt that is killed
        loses at most that much embedding, one that fails or stops nothing; the next one finds the rest
        by hash. (A staging write on a domain waits for the index's refresh, up to a second: staging
        every batch of a fast embedder would cost more than it saves.) Before each
        batch the invocation's budget is checked: if it could not fit one more batch (as long as the
        longest so far) and the index write (`COMMIT_SECONDS_PER_CHUNK`), the group is deferred with
        `IngestDeferredError` instead of running into the function's hard timeout.
        """
        vectors: dict[tuple[str, str], Vector] = {}
        missing: dict[tuple[str, str], str] = {}
        needed_by: dict[tuple[str, str], list[_Work]] = {}
        for tenant_id in {work.obj.tenant_id for work in works}:
            chunks = [c for work in works if work.obj.tenant_id == tenant_id for c in work.chunks]
            known = self.index.vectors_by_hash(tenant_id, {c.content_hash for c in chunks})
            vectors.update(((tenant_id, h), v) for h, v in known.items())
            for chunk in chunks:
                if chunk.content_hash not in known:
                    text = embedding_text(chunk.document.title, chunk.heading_path, chunk.text)
                    missing[(tenant_id, chunk.content_hash)] = text
        for work in works:
            for key in dict.fromkeys((work.obj.tenant_id, c.content_hash) for c in work.chunks):
                if key in missing:
                    needed_by.setdefault(key, []).append(work)
        keys = list(missing)
        staging = len(keys) > self.embed_batch_size
        step = Step("embed", works[0].obj.path if len(works) == 1 else f"{len(works)} documents", "chunk")
        longest = 0.0
        reserve = self.commit_reserve + self.commit_seconds_per_chunk * sum(len(work.chunks) for work in works)
        unstaged: dict[tuple[str, str], Vector] = {}
        staged_at = time.monotonic()
        try:
            for start in range(0, len(keys), self.embed_batch_size):
                self._check_budget(longest + reserve, done=start, total=len(keys))
                began = time.monotonic()
                batch = keys[start : start + self.embed_batch_size]
                billed = self._billed_tokens()
                embedded = dict(zip(batch, self.embedder.embed_documents([missing[k] for k in batch]), strict=True))
                self._count_batch(used, {key: missing[key] for key in batch}, billed)
                vectors.update(embedded)
                if staging:
                    unstaged.update(embedded)
                    if time.monotonic() - staged_at >= self.stage_seconds:
                        self._stage(unstaged, needed_by)
                        unstaged, staged_at = {}, time.monotonic()
                longest = max(longest, time.monotonic() - began)
                progress(step, start + len(batch), len(keys))
        except Exception:
            if unstaged:  # a failure or deferral keeps what was embedded, for the next attempt
                try:
                    self._stage(unstaged, needed_by)
                except Exception:  # noqa: BLE001 - the original failure matters; this only costs a re-embed
                    logger.warning("could not stage embedded vectors", exc_info=True)
            raise
        for work in works:
            keys_of_work = [(work.obj.tenant_id, c.content_hash) for c in work.chunks]
            work.vectors = [vectors[key] for key in keys_of_work]
            work.embedded = len({key for key in keys_of_work if key in missing})

    def _billed_tokens(self) -> int | None:
        """The embedder's running count of billed input tokens, if it keeps one."""
        return self.embedder.usage if isinstance(self.embedder, ReportsTokens) else None

    def _count_batch(self, used: dict[str, UsageCounts], texts: dict[tuple[str, str], str], billed: int | None) -> None:
        """Add one embedded batch to `used`: its chunks and input tokens, per tenant. The tokens the model
        billed for the batch (the embedder's count after minus before) are shared among the batch's
        tenants in proportion to their estimated tokens; without a billed count, the estimate is counted as
        such (`embedding_tokens_estimated`)."""
        estimated: dict[str, int] = {}
        chunks: dict[str, int] = {}
        for (tenant_id, _), text in texts.items():
            estimated[tenant_id] = estimated.get(tenant_id, 0) + count_tokens(text)
            chunks[tenant_id] = chunks.get(tenant_id, 0) + 1
        after = self._billed_tokens()
        shares = _shares(after - billed, estimated) if billed is not None and after is not None else None
        for tenant_id, count in chunks.items():
            tokens = (
                {"embedding_tokens": shares[tenant_id]}
                if shares is not None
                else {"embedding_tokens_estimated": estimated[tenant_id]}
            )
            used[tenant_id] = used.get(tenant_id, UsageCounts()) + UsageCounts(chunks_embedded=count, **tokens)

    def _check_budget(self, needed: float, *, done: int, total: int) -> None:
        """Defer the group if the invocation's budget cannot fit `needed` seconds: another batch and the
        index write."""
        left = deadline.remaining()
        if left is not None and left < needed:
            raise IngestDeferredError(
                f"stopped after {done} of {total} chunks to embed, before the function's time ran out; "
                "the vectors embedded so far are kept and the next attempt embeds the rest",
                details={"embedded": done, "total": total, "seconds_left": round(left, 1)},
            )

    def _stage(self, embedded: dict[tuple[str, str], Vector], needed_by: dict[tuple[str, str], list[_Work]]) -> None:
        """Stage one batch's vectors under each document that needs them."""
        per_document: dict[tuple[str, str], dict[str, Vector]] = {}
        for (tenant_id, content_hash), vector in embedded.items():
            for work in needed_by[(tenant_id, content_hash)]:
                per_document.setdefault((tenant_id, work.pending.doc_id), {})[content_hash] = vector
        for (tenant_id, doc_id), of_document in per_document.items():
            self.index.stage_vectors(tenant_id, doc_id, of_document)

    def _commit(self, work: _Work) -> None:
        """Swap the document's chunks in the index, then record it INDEXED."""
        assert work.indexed is not None  # noqa: S101 - _prepare set it
        self.index.replace_document(work.obj.tenant_id, work.pending.doc_id, work.chunks, work.vectors)
        self.registry.put(work.indexed)
        work.outcome = IngestResult(
            Outcome.NEW if work.is_new else Outcome.MODIFIED,
            work.indexed,
            work.embedded,
            len(work.chunks) - work.embedded,
        )

    def _flag_for_reingest(self, latest: Document) -> None:
        """Mark `latest` PENDING (keeping its version) so the next delivery does not skip it as unchanged."""
        try:
            self.registry.put(latest.model_copy(update={"status": DocumentStatus.PENDING, "updated_at": self.clock()}))
        except ConflictError:
            pass  # a still newer write happened; its own commit or flag settles the record

    def _fail(self, pending: Document, reason: str, *, keep_staged: bool = False) -> Document:
        """Record the failure and make sure none of the document's old chunks stay searchable."""
        self.index.delete_document(pending.tenant_id, pending.doc_id, keep_staged=keep_staged)
        failed = pending.model_copy(update={"status": DocumentStatus.FAILED, "error": reason, "chunk_count": 0})
        self.registry.put(failed)
        return failed


def _outcome_usage(outcome: IngestResult | CitewiseError | None) -> UsageCounts:
    """What a document's outcome adds to its tenant's usage: a document indexed with its pages (1 for a
    format without pages) and reused chunks, or a failure recorded (a permanent one, or a transient one
    the queue retries: each attempt recorded FAILED is counted). A deferral, a superseded or refused
    write, or an unchanged document counts nothing: its work is counted by the attempt that finishes."""
    if isinstance(outcome, IngestResult):
        if outcome.outcome in (Outcome.NEW, Outcome.MODIFIED):
            return UsageCounts(
                documents_ingested=1, pages=outcome.document.page_count or 1, chunks_reused=outcome.reused
            )
        return UsageCounts(documents_failed=1) if outcome.outcome is Outcome.FAILED else UsageCounts()
    if isinstance(outcome, IngestDeferredError | ConflictError) or outcome is None:
        return UsageCounts()
    return UsageCounts(documents_failed=1)


def _shares(total: int, weights: dict[str, int]) -> dict[str, int]:
    """`total` split among the keys of `weights` in proportion (largest remainders), summing to `total`."""
    weight = sum(weights.values())
    if weight == 0:
        return {key: total if i == 0 else 0 for i, key in enumerate(weights)}
    exact = {key: total * w / weight for key, w in weights.items()}
    shares = {key: int(value) for key, value in exact.items()}
    for key in sorted(exact, key=lambda k: exact[k] - shares[k], reverse=True)[: total - sum(shares.values())]:
        shares[key] += 1
    return shares


def _unchanged(previous: Document, obj: SourceObject, described: Provenance) -> bool:
    # A record without `source_date` was written before sources and channels were split: its next
    # ingest re-derives both (and re-indexes its chunks, reusing their vectors).
    return (
        obj.defect is None
        and previous.status is DocumentStatus.INDEXED
        and previous.version == obj.version
        and previous.owner == obj.owner
        and previous.visibility == obj.visibility
        and previous.attributes == described.attributes
        and previous.source == described.source
        and previous.channel == obj.channel
        and previous.source_date is not None
    )


def _object_date(obj: SourceObject) -> datetime | None:
    return as_utc(obj.last_modified) if obj.last_modified is not None else None


def _tags(attributes: dict[str, AttributeValue]) -> tuple[str, ...]:
    tags = attributes.get("tags", [])
    return tuple(tags) if isinstance(tags, list) else (str(tags),)
