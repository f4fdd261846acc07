"""The OpenSearch adapter of the VectorIndex port: an Amazon OpenSearch Service domain or a Serverless
vector collection, through opensearch-py signed with SigV4.

Request bodies come from `opensearch_queries` (pure, unit-tested); this module sends them, reads the
answers and turns every failure into a `CitewiseError`: HTTP 429 (and a bulk item rejected with
`es_rejected_execution_exception`) becomes `ThrottledError`, so the ingest queue retries later; anything
else `SearchBackendError`, chained with `from` so the original stays in the logs.

`replace_document` cannot be atomic here: OpenSearch has no multi-document transactions. It is made
safe instead, in two steps:
1. write the new chunks, all tagged with a fresh `generation` (on a domain the `_id` is
   `<tenant>/<chunk_id>`, so a chunk that still exists is overwritten in place; a Serverless vector
   collection assigns its own ids, so every chunk is a new document there);
2. find the document's chunks of any other generation, and not among the ids just written, and
   delete them in bulk (by `_id`, which works on Serverless; `_delete_by_query` does not).
On a domain the last request of steps 1 and 2 asks `refresh=wait_for`: it returns once the index's
own periodic refresh (`refresh_interval`, 1 s by default) has made it searchable, so a replace returns
with its version visible, and the next replace of the document sees every chunk it must delete. No
refresh is forced: a forced refresh per document writes a tiny segment each time, and on a small
instance many tiny faiss segments cost merges and search time. What a reader sees meanwhile: the old
version; up to a second later (once step 1 is searchable) the new chunks *beside* the old chunks not
yet deleted; up to a second after step 2 the new version alone (Serverless: within its own refresh
window, below). On Serverless an old and a new chunk can share a `chunk_id` in that window:
searches return each `chunk_id` once (the better scored). Nothing is deleted before every new chunk is
written, so a failure half-way leaves old and new chunks side by side, never a document emptied;
running the replace again converges (the ingest queue retries it).

Staged vectors (`stage_vectors`, the durable progress of a long ingest) are entries of the same index
without owner, visibility, text or k-NN vector (`opensearch_queries.staged_actions`): every search's
access filter leaves them out, `vectors_by_hash` finds them, and they belong to their document, so its
next replace or delete removes them (a delete asked to `keep_staged` leaves them for the retry).

Serverless refresh lag. A vector collection makes writes searchable only after a refresh interval (AWS
documents up to about 60 seconds) and has no refresh API, so step 2 cannot see chunks written less
than that before: a document replaced twice in quick succession keeps the first replace's chunks.
Two things make that harmless:
- readers drop them: generations order by write time (`opensearch_queries.new_generation`), and every
  Serverless search asks, in one aggregation over the hit documents, for each document's newest
  searchable generation; a hit of an older one is dropped (so a superseded chunk never takes a result
  slot once its successor is searchable; until then the reader sees the previous version whole);
- a delayed sweep removes them: after a replace or delete on Serverless the index asks its
  `SweepScheduler` (the ingest queue, `citewise.aws.sqs_sweeps`) to deliver a `StaleSweep` after the
  refresh window, which deletes the document's chunks of every generation older than the replace's
  (`sweep_stale`), so chunk counts come right and a later replace is never touched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from opensearchpy import OpenSearch, Urllib3AWSV4SignerAuth, Urllib3HttpConnection
from opensearchpy.exceptions import (
    ConnectionError as OpenSearchConnectionError,
)
from opensearchpy.exceptions import (
    OpenSearchException,
    RequestError,
    SerializationError,
    TransportError,
)

from citewise.aws import opensearch_queries as q
from citewise.domain import deadline
from citewise.domain.access import may_read
from citewise.domain.errors import CitewiseError, SearchBackendError, ThrottledError, ValidationError
from citewise.domain.models import Caller, Chunk, Filter, Vector
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.index import ScoredChunk
from citewise.ports.sweeps import StaleSweep, SweepScheduler

logger = logging.getLogger(__name__)

_HASH_BATCH = 500
_THROTTLED_TYPES = frozenset({"es_rejected_execution_exception", "rejected_execution_exception"})
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_CURRENT_ROUNDS = 3  # searches at most per Serverless read that meets superseded chunks
_CLOCK_SKEW_NS = 300 * 10**9  # a sweep naming a generation further ahead than this is refused


class OpenSearchIndex:
    """A `VectorIndex` in one OpenSearch index (shared by tenants; every read filters by tenant).

    `client` is an `opensearchpy.OpenSearch` (see `connect`); `serverless` says whether it talks to a
    Serverless vector collection, which assigns document ids itself and has no refresh API. `timeout`
    bounds each request, cut shorter to the invocation's budget (`citewise.domain.deadline`). `sweeps`
    receives the delayed stale-chunk sweeps of a Serverless collection (see the module doc); without
    one, the next replace or delete of a document removes what its sweep could not see. `replicas` is
    the replica count an index created here gets (`opensearch_queries.index_body`).
    """

    def __init__(
        self,
        client: Any,
        index_name: str,
        *,
        serverless: bool,
        max_bulk_bytes: int = q.MAX_BULK_BYTES,
        page_size: int = q.PAGE_SIZE,
        timeout: float = 30.0,
        sweeps: SweepScheduler | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
        replicas: int | None = None,
    ) -> None:
        if serverless and replicas is not None:
            raise ValueError("a Serverless collection takes no replica setting")
        self._client = client
        self._replicas = replicas
        self._sweeps = sweeps
        self._clock_ns = clock_ns
        self._timeout = timeout
        self._index = index_name
        self._serverless = serverless
        self._max_bulk_bytes = max_bulk_bytes
        self._page_size = page_size
        self._dimension: int | None = None
        self._erase_positions: dict[str, list[str]] = {}  # per tenant: where its erasure's pass is

    # --- the index -------------------------------------------------------------------------------

    def ensure(self, embedder_name: str, dimension: int) -> None:
        body = q.index_body(dimension, embedder=embedder_name, replicas=self._replicas)
        with _translated("create or check the index"):
            if not self._client.indices.exists(index=self._index, **self._budget("check the index")):
                try:
                    self._client.indices.create(index=self._index, body=body, **self._budget("create the index"))
                except RequestError as exc:
                    if exc.error != "resource_already_exists_exception":  # another writer won the race
                        raise
            answer = self._client.indices.get_mapping(index=self._index, **self._budget("read the index mapping"))
        with _malformed("read the index mapping"):
            mappings = next(iter(answer.values()))["mappings"]
            stored_embedder = mappings.get("_meta", {}).get("embedder")
            stored_schema = mappings.get("_meta", {}).get("schema")
            stored_dimension = mappings.get("properties", {}).get(q.VECTOR_FIELD, {}).get("dimension")
        if (stored_embedder, stored_dimension) != (embedder_name, dimension):
            raise SearchBackendError(
                f"the OpenSearch index '{self._index}' holds vectors of embedder '{stored_embedder}' "
                f"({stored_dimension} dimensions) but '{embedder_name}' ({dimension}) is configured; use "
                "the same embedder, or a new index name and re-ingest",
                details={"index": self._index, "indexed_embedder": stored_embedder, "embedder": embedder_name},
            )
        if stored_schema != q.SCHEMA_VERSION:
            raise SearchBackendError(
                f"the OpenSearch index '{self._index}' has citewise's mapping schema {stored_schema}, this version "
                f"writes schema {q.SCHEMA_VERSION} (its keyword analyzer and text differ); create "
                "the index under a new name and re-ingest, as docs/aws.md ('Migrating an index') describes",
                details={"index": self._index, "indexed_schema": stored_schema, "schema": q.SCHEMA_VERSION},
            )
        self._dimension = dimension

    # --- writes ----------------------------------------------------------------------------------

    def replace_document(self, tenant_id: str, doc_id: str, chunks: Sequence[Chunk], vectors: Sequence[Vector]) -> None:
        """Make `chunks` the document's chunks: write them, then delete the others (see module doc)."""
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk is required")
        for chunk, vector in zip(chunks, vectors, strict=True):
            if chunk.document.tenant_id != tenant_id or chunk.document.doc_id != doc_id:
                raise ValueError("every chunk must belong to the document being replaced")
            self._check_dimension(len(vector), "a chunk vector")
        generation = q.new_generation(self._clock_ns())
        actions = q.bulk_actions(chunks, vectors, generation=generation, serverless=self._serverless)
        written = set(self._write_generation(actions, [chunk.chunk_id for chunk in chunks]))
        # Excluding the written ids as well as the generation matters on a domain: before a refresh the
        # search still sees the old version of an overwritten id, which must not be deleted.
        stale = [i for i in self._chunk_ids(tenant_id, doc_id, keep_generation=generation) if i not in written]
        self._bulk(q.delete_actions(stale), stale, visible=True)
        self._sweep_later(tenant_id, doc_id, generation)

    def delete_document(self, tenant_id: str, doc_id: str, *, keep_staged: bool = False) -> int:
        # Chunks written from here on belong to a later version: the delayed sweep leaves them.
        marker = q.new_generation(self._clock_ns())
        chunks: list[str] = []
        staged: list[str] = []
        for entry_id, generation in self._entries(tenant_id, doc_id):
            (staged if generation == q.STAGED_GENERATION else chunks).append(entry_id)
        ids = chunks if keep_staged else chunks + staged
        deleted = set(self._bulk(q.delete_actions(ids), ids, visible=True))
        self._sweep_later(tenant_id, doc_id, marker)
        return sum(1 for i in chunks if i in deleted)

    def stage_vectors(self, tenant_id: str, doc_id: str, vectors: Mapping[str, Vector]) -> None:
        """Write the staged vectors (`opensearch_queries.staged_actions`). On a domain the write waits for
        the index's periodic refresh, as chunk writes do: a delete right after (a document failing for
        good) must find them to remove them, and a retry must find them to reuse them. On Serverless a
        replace or delete within the refresh window cannot see them yet; the delayed sweep removes them."""
        for vector in vectors.values():
            self._check_dimension(len(vector), "a staged vector")
        actions = q.staged_actions(tenant_id, doc_id, vectors, serverless=self._serverless)
        self._bulk(actions, [source["chunk_id"] for _, source in actions], visible=True)

    def sweep_stale(self, sweep: StaleSweep) -> int:
        """Delete the document's chunks of generations older than `sweep.before` (a delayed sweep, see
        the module doc); the number deleted. A generation further in the future than any clock skew
        explains is refused: it would delete the versions written until then."""
        if sweep.before > q.new_generation(self._clock_ns() + _CLOCK_SKEW_NS):
            raise ValidationError("a stale-chunk sweep names a generation in the future", details={"doc": sweep.doc_id})
        ids = list(self._chunk_ids(sweep.tenant_id, sweep.doc_id, before_generation=sweep.before))
        deleted = self._bulk(q.delete_actions(ids), ids, visible=True)
        return len(deleted)

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete the next page of up to `limit` of the tenant's entries (by `_id`, which Serverless
        allows). Successive calls page on through the tenant (the position is kept per tenant in this
        adapter); at the end of a pass the next call starts again from the first entry, so it answers 0
        only when a whole new page finds nothing it can delete. On Serverless entries deleted within the
        refresh window are still found then and count nothing (deleting a missing entry is no error),
        while `count_tenant` still sees them: the erasure job waits and tries again
        (`citewise.ports.erasure`). On a domain each delete waits for the periodic refresh."""
        after = self._erase_positions.pop(tenant_id, None)
        hits = self._search(q.tenant_entries_query(tenant_id, limit, after), "list a tenant's entries")
        if not hits and after is not None:  # the end of a pass: start another from the first entry
            hits = self._search(q.tenant_entries_query(tenant_id, limit), "list a tenant's entries")
        with _malformed("list a tenant's entries"):
            ids = [str(hit["_id"]) for hit in hits]
            if hits:
                self._erase_positions[tenant_id] = [str(value) for value in hits[-1]["sort"]]
        return len(self._bulk(q.delete_actions(ids), ids, visible=True))

    def count_tenant(self, tenant_id: str) -> int:
        with _translated("count a tenant's entries"):
            answer = self._client.search(
                index=self._index, body=q.tenant_count_query(tenant_id), **self._budget("count a tenant's entries")
            )
        with _malformed("count a tenant's entries"):
            return int(answer["hits"]["total"]["value"])

    def _sweep_later(self, tenant_id: str, doc_id: str, generation: str) -> None:
        """On Serverless, have the sweep run again once the refresh window has passed (module doc)."""
        if self._serverless and self._sweeps is not None:
            self._sweeps.schedule(StaleSweep(tenant_id=tenant_id, doc_id=doc_id, before=generation))

    def _write_generation(self, actions: Sequence[tuple[q.Body, q.Body | None]], labels: Sequence[str]) -> list[str]:
        """Write a new generation's chunks; the `_id`s written. On Serverless a failed write takes back
        what it wrote: readers there show a document's newest generation only, so a partial one would
        hide the previous version, whole, that they see instead. (A domain's ids overwrite in place.)"""
        done: list[str] = []
        try:
            self._bulk(actions, labels, done, visible=True)
        except CitewiseError:
            if self._serverless and done:
                try:
                    self._bulk(q.delete_actions(done), done)
                except CitewiseError:  # the next replace or the delayed sweep removes them
                    logger.warning("could not take back a partly written generation", extra={"chunks": len(done)})
            raise
        return done

    def _bulk(
        self,
        actions: Sequence[tuple[q.Body, q.Body | None]],
        labels: Sequence[str],
        done: list[str] | None = None,
        *,
        visible: bool = False,
    ) -> list[str]:
        """Send `actions` in payloads of at most `max_bulk_bytes`; the `_id`s indexed or deleted, also
        appended to `done` as they succeed (so a caller knows them when a later payload fails).

        `labels[i]` names action i in errors (a chunk id). A delete of a missing document is not an
        error. Permanent item failures win over throttled ones: retrying would not fix them. `visible`:
        on a domain, the last payload waits for the index's next periodic refresh (module doc), which
        makes every payload before it searchable too; Serverless takes no `refresh` parameter.
        """
        done = [] if done is None else done
        payloads = list(q.bulk_payloads(actions, self._max_bulk_bytes))
        for number, (body, positions) in enumerate(payloads, start=1):
            wait = {"refresh": "wait_for"} if visible and not self._serverless and number == len(payloads) else {}
            with _translated("bulk write"):
                answer = self._client.bulk(body=body, index=self._index, **wait, **self._budget("bulk write"))
            with _malformed("bulk write"):
                items = answer["items"]
                if len(items) != len(positions):
                    raise ValueError(f"{len(items)} items for {len(positions)} actions")
                throttled: list[str] = []
                for position, item in zip(positions, items, strict=True):
                    ((operation, result),) = item.items()
                    error = result.get("error")
                    if error is None:
                        if result.get("result") != "not_found":
                            done.append(str(result["_id"]))
                        continue
                    if result.get("status") == 429 or error.get("type") in _THROTTLED_TYPES:
                        throttled.append(labels[position])
                        continue
                    raise _item_error(operation, labels[position], result)
            if throttled:
                raise ThrottledError(
                    f"OpenSearch rejected {len(throttled)} of {len(positions)} bulk actions as too many "
                    "requests; retry later",
                    details={"index": self._index, "rejected": len(throttled), "first": throttled[0]},
                )
        return done

    def _chunk_ids(
        self, tenant_id: str, doc_id: str, *, keep_generation: str | None = None, before_generation: str | None = None
    ) -> Iterator[str]:
        """The `_id` of every chunk of the document, except those of `keep_generation`, or only those
        older than `before_generation`."""
        for entry_id, _ in self._entries(
            tenant_id, doc_id, keep_generation=keep_generation, before_generation=before_generation
        ):
            yield entry_id

    def _entries(
        self, tenant_id: str, doc_id: str, *, keep_generation: str | None = None, before_generation: str | None = None
    ) -> Iterator[tuple[str, str]]:
        """`_chunk_ids` with each entry's generation (a sort key of the listing, so it costs nothing)."""
        search_after: list[str] | None = None
        while True:
            body = q.document_chunks_query(
                tenant_id,
                doc_id,
                keep_generation=keep_generation,
                before_generation=before_generation,
                search_after=search_after,
                size=self._page_size,
            )
            hits = self._search(body, "list a document's chunks")
            with _malformed("list a document's chunks"):
                for hit in hits:
                    yield str(hit["_id"]), str(hit["sort"][1])
                if len(hits) < body["size"]:
                    return
                search_after = list(hits[-1]["sort"])

    # --- reads -----------------------------------------------------------------------------------

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        found: dict[str, Vector] = {}
        unique = sorted(set(hashes))
        for start in range(0, len(unique), _HASH_BATCH):
            hits = self._search(
                q.vectors_by_hash_query(tenant_id, unique[start : start + _HASH_BATCH]), "reuse vectors"
            )
            with _malformed("reuse vectors"):
                for hit in hits:
                    source = hit["_source"]
                    vector = source[q.VECTOR_FIELD] if q.VECTOR_FIELD in source else source["chunk"][q.STAGED_VECTOR]
                    found[str(source["content_hash"])] = [float(x) for x in vector]
        return found

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        if limit < 1:
            return []
        hits = self._current_hits(
            caller, limit, "keyword search", lambda superseded: q.bm25_query(query, limit, caller, filters, superseded)
        )
        return self._scored(caller, hits, lambda score: score)

    def vector_search(self, caller: Caller, vector: Vector, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        if limit < 1:
            return []
        self._check_dimension(len(vector), "the query vector")
        hits = self._current_hits(
            caller, limit, "vector search", lambda superseded: q.knn_query(vector, limit, caller, filters, superseded)
        )
        return self._scored(caller, hits, q.knn_score_to_cosine)

    def _current_hits(
        self, caller: Caller, limit: int, action: str, query: Callable[[frozenset[str]], q.Body]
    ) -> list[dict[str, Any]]:
        """The hits of `query`, on Serverless without chunks of superseded generations (module doc).

        A superseded chunk found is dropped, and when that leaves fewer than `limit` hits the search is
        made again with the superseded generations filtered out (inside the k-NN filter too), so they
        cost no result slot; a few rounds at most (each round finds the older versions of other
        documents among the next hits). A domain sweeps before its refresh, so it never shows them.
        """
        superseded: frozenset[str] = frozenset()
        for _ in range(_CURRENT_ROUNDS):
            hits = self._search(query(superseded), action)
            if not self._serverless:
                return hits
            current, stale = self._split_superseded(caller, hits)
            if not stale or len(current) >= limit or len(hits) < limit:
                return current
            superseded |= stale
        return current

    def _split_superseded(self, caller: Caller, hits: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[str]]:
        """`hits` of their document's newest searchable generation, and the other generations seen."""
        if not hits:
            return hits, set()
        with _malformed("read search results"):
            doc_ids = {str(hit["_source"]["chunk"]["document"]["doc_id"]) for hit in hits}
        with _translated("find current generations"):
            answer = self._client.search(
                index=self._index,
                body=q.newest_generations_query(caller.tenant_id, doc_ids),
                **self._budget("find current generations"),
            )
        current: list[dict[str, Any]] = []
        stale: set[str] = set()
        with _malformed("find current generations"):
            newest = {
                str(bucket["key"]): str(bucket["newest"]["buckets"][0]["key"])
                for bucket in answer["aggregations"]["documents"]["buckets"]
                if bucket["newest"]["buckets"]
            }
            for hit in hits:
                generation = str(hit["_source"]["generation"])
                # A document missing from the aggregation has just been deleted: nothing of it is current.
                if newest.get(str(hit["_source"]["chunk"]["document"]["doc_id"])) == generation:
                    current.append(hit)
                else:
                    stale.add(generation)
        return current, stale

    def sources(self, caller: Caller) -> list[str]:
        with _translated("list sources"):
            answer = self._client.search(
                index=self._index, body=q.sources_query(caller), **self._budget("list sources")
            )
        with _malformed("list sources"):
            return sorted(
                str(bucket["key"]) for bucket in answer["aggregations"]["sources"]["buckets"] if bucket["key"]
            )

    def _search(self, body: q.Body, action: str) -> list[dict[str, Any]]:
        with _translated(action):
            answer = self._client.search(index=self._index, body=body, **self._budget(action))
        with _malformed(action):
            hits = answer["hits"]["hits"]
            if not isinstance(hits, list):
                raise TypeError("hits.hits is not a list")
            return hits

    def _scored(self, caller: Caller, hits: list[dict[str, Any]], score: Callable[[float], float]) -> list[ScoredChunk]:
        """Hits as ScoredChunks, best first, each chunk_id once, re-checked against the caller's access."""
        results: list[ScoredChunk] = []
        seen: set[str] = set()
        with _malformed("read search results"):
            for hit in hits:
                chunk = Chunk.model_validate(hit["_source"]["chunk"])
                if chunk.chunk_id in seen:
                    continue  # an old and a new version of a chunk during a replace on Serverless
                if not may_read(caller, chunk.document):
                    # The query filters by access; this is defence in depth against a wrong mapping.
                    logger.error("search returned a chunk outside the caller's access; dropped it")
                    continue
                seen.add(chunk.chunk_id)
                results.append(ScoredChunk(chunk=chunk, score=score(float(hit["_score"]))))
        return results

    def _budget(self, action: str) -> dict[str, float]:
        """The request's timeout, cut to the time the invocation has left; refused when too little is
        left, so the function answers SEARCH_BACKEND_ERROR instead of being killed. Outside a budget
        the client's own timeout applies."""
        left = deadline.remaining()
        if left is None:
            return {}
        if left < deadline.MIN_CALL_SECONDS:
            raise SearchBackendError(
                f"{action}: no time left in the function's budget for OpenSearch", details={"action": action}
            )
        return {"request_timeout": deadline.bounded(self._timeout)}

    def _check_dimension(self, size: int, what: str) -> None:
        if self._dimension is not None and size != self._dimension:
            raise SearchBackendError(f"{what} has {size} dimensions, the index {self._dimension}")


def connect(endpoint: str, region: str, service: str = "es", *, timeout: float = 30.0) -> Any:
    """An opensearch-py client for a domain (`service="es"`) or a Serverless collection (`"aoss"`),
    signing every request with SigV4 and the credentials of the default boto3 session.

    `endpoint` is a host name or an `https://` URL; plain `http://` is accepted only for a loopback host
    (a local test cluster). Nothing is contacted here: credentials are resolved on the first request
    and refreshed by botocore before they expire, so a Lambda can build the client at cold start.
    Urllib3 rather than requests: it is opensearch-py's default connection, pools connections, and
    opensearch-py signs it natively.
    """
    if service not in ("es", "aoss"):
        raise ValueError("service must be 'es' (a domain) or 'aoss' (Serverless)")
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    host = parts.hostname or ""
    if parts.scheme != "https" and not (parts.scheme == "http" and host in _LOOPBACK_HOSTS):
        raise ValueError(f"OpenSearch endpoint must use https: {endpoint}")
    use_ssl = parts.scheme == "https"
    return OpenSearch(
        hosts=[{"host": host, "port": parts.port or (443 if use_ssl else 80)}],
        http_auth=Urllib3AWSV4SignerAuth(_SessionCredentials(), region, service),
        use_ssl=use_ssl,
        verify_certs=use_ssl,
        ssl_show_warn=use_ssl,
        connection_class=Urllib3HttpConnection,
        timeout=timeout,
        pool_maxsize=10,
    )


class _SessionCredentials:
    """The default boto3 session's credentials, looked up on first use instead of at construction."""

    def __init__(self) -> None:
        self._credentials: Any = None

    def get_frozen_credentials(self) -> Any:
        if self._credentials is None:
            import boto3

            self._credentials = boto3.Session().get_credentials()
            if self._credentials is None:
                raise SearchBackendError("no AWS credentials found to sign OpenSearch requests")
        return self._credentials.get_frozen_credentials()


def _item_error(operation: str, label: str, result: dict[str, Any]) -> SearchBackendError:
    """A failed bulk item as an error naming the chunk; reasons are cut before any preview of a value,
    which could be document text."""
    error = result.get("error") or {}
    kind = error.get("type", "unknown")
    reason = str(error.get("reason", "")).split(" Preview of field's value", 1)[0]
    cause = error.get("caused_by") or {}
    if cause:
        reason += f" (caused by {cause.get('type')}: {cause.get('reason')})"
    return SearchBackendError(
        f"OpenSearch refused to {operation} chunk '{label}': {kind}: {reason}",
        details={"chunk_id": label, "error_type": kind, "status": result.get("status")},
    )


class _translated:  # noqa: N801 - used like a function: `with _translated("search"):`
    """Turn opensearch-py's exceptions raised inside the block into CitewiseErrors."""

    def __init__(self, action: str) -> None:
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, _: object) -> None:
        if exc is None or isinstance(exc, CitewiseError) or not isinstance(exc, OpenSearchException):
            return
        raise translate(exc, self._action) from exc


class _malformed(_translated):  # noqa: N801
    """Turn a response of an unexpected shape (missing key, wrong type) into a SearchBackendError."""

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, _: object) -> None:
        if isinstance(exc, LookupError | TypeError | ValueError | AttributeError | StopIteration) and not isinstance(
            exc, CitewiseError
        ):
            raise SearchBackendError(
                f"{self._action}: OpenSearch answered a malformed response ({type(exc).__name__}: {exc})",
                details={"action": self._action},
            ) from exc


def translate(exc: OpenSearchException, action: str) -> CitewiseError:
    """The CitewiseError for a failed opensearch-py call: ThrottledError for HTTP 429, else
    SearchBackendError (unreachable cluster, HTTP error, unreadable answer)."""
    details: dict[str, Any] = {"action": action}
    if isinstance(exc, OpenSearchConnectionError):
        return SearchBackendError(f"{action} failed: OpenSearch is unreachable: {exc.error}", details=details)
    if isinstance(exc, TransportError):
        details.update(status=exc.status_code, error_type=exc.error)
        if exc.status_code == 429:
            return ThrottledError(f"{action} was throttled by OpenSearch; retry later", details=details)
        return SearchBackendError(f"{action} failed: HTTP {exc.status_code}: {exc.error}", details=details)
    if isinstance(exc, SerializationError):
        return SearchBackendError(f"{action}: OpenSearch answered an unreadable response: {exc}", details=details)
    return SearchBackendError(f"{action} failed: {type(exc).__name__}: {exc}", details=details)
