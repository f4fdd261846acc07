"""The Amazon S3 Vectors adapter of the VectorIndex port: one vector bucket, one index per tenant.

docs/s3vectors-design.md is the design; `s3vectors_requests` builds names, metadata and filters (pure).
Here the requests are sent and their answers read: every limit is checked before the call (a
ValidationError naming it), throttling becomes ThrottledError (the ingest queue retries), any other
failure SearchBackendError, chained with `from`.

A tenant's index is created on its first write and remembered per process; a read of a tenant without
one finds nothing. `replace_document` writes the new chunks (overwriting ids that still exist), then
deletes the document's vectors of any other generation: readers see the old or the new version of a
chunk, never an empty document.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import s3vectors_requests as r
from citewise.aws.clients import error_code, translate
from citewise.aws.tenant_keys import TenantKeys
from citewise.domain.errors import CitewiseError, SearchBackendError, ValidationError
from citewise.domain.models import Caller, Chunk, Filter, Vector, Visibility
from citewise.ports.erasure import ERASE_BATCH, KeyDeletion
from citewise.ports.index import ScoredChunk

logger = logging.getLogger(__name__)

EMBEDDER_TAG = "citewise-embedder"
DIMENSION_TAG = "citewise-dimension"
_LIST_PAGE = 1000


class S3VectorsIndex:
    """A `VectorIndex` in one S3 Vectors bucket, an index per tenant (`s3vectors_requests.index_name`).

    `client` is a boto3 `s3vectors` client (`citewise.aws.clients.client("s3vectors")`): the writes, the
    erasure and the ingest's reads use it. `reader(tenant_id)` is the client of a caller's reads (searches,
    sources); by default `client`, and in the deployed mode a client on that tenant's session credentials
    (`citewise.aws.tenant_sessions`), which IAM lets read that tenant's index and no other. With `keys`
    (search.key_per_tenant) each index is created under a KMS key of its tenant's own, which the erasure
    destroys (`citewise.aws.tenant_keys`); without, every index uses the bucket's key."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        *,
        reader: Callable[[str], Any] | None = None,
        keys: TenantKeys | None = None,
    ) -> None:
        self._client = client
        self._keys = keys
        self._reader: Callable[[str], Any] = reader or (lambda _tenant_id: client)
        self._bucket = bucket
        self._dimension: int | None = None
        self._dimensions: dict[str, int] = {}  # the dimension of each index described here
        self._existing: set[str] = set()  # tenant indexes known to exist
        self._searchable: set[str] = set()  # ... and whose text analyzer is ACTIVE

    # --- the index -------------------------------------------------------------------------------

    def ensure(self, embedder_name: str, dimension: int) -> None:
        """Tag the bucket with the vector space on first use; refuse another space afterwards."""
        arn = self._call("read the vector bucket", self._client.get_vector_bucket, vectorBucketName=self._bucket)
        bucket_arn = str(arn["vectorBucket"]["vectorBucketArn"])
        tags = self._call("read the bucket's tags", self._client.list_tags_for_resource, resourceArn=bucket_arn)
        wanted = {EMBEDDER_TAG: embedder_name, DIMENSION_TAG: str(dimension)}
        stored = {key: tags.get("tags", {}).get(key) for key in wanted}
        if stored == dict.fromkeys(wanted):
            self._call("tag the bucket", self._client.tag_resource, resourceArn=bucket_arn, tags=wanted)
        elif stored != wanted:
            raise SearchBackendError(
                f"the vector bucket '{self._bucket}' holds vectors of embedder '{stored[EMBEDDER_TAG]}' "
                f"({stored[DIMENSION_TAG]} dimensions) but '{embedder_name}' ({dimension}) is configured; use the "
                "same embedder, or a new bucket and re-ingest",
                details={"bucket": self._bucket, "indexed_embedder": stored[EMBEDDER_TAG], "embedder": embedder_name},
            )
        self._dimension = dimension

    def _tenant_index(self, tenant_id: str, *, create: bool, client: Any = None) -> str | None:
        """The tenant's index name; created when `create` and missing, None when missing otherwise.
        `client` (default: the function's own) asks whether it exists."""
        name = r.index_name(tenant_id)
        if name in self._searchable or name in self._existing:
            return name
        try:
            answer = (client or self._client).get_index(vectorBucketName=self._bucket, indexName=name)
        except ClientError as exc:
            if error_code(exc) != "NotFoundException":
                raise translate(exc, SearchBackendError, "read a tenant's index") from exc
            if not create:
                return None
            self._create_index(tenant_id, name)
            self._existing.add(name)
            return name
        except BotoCoreError as exc:
            raise translate(exc, SearchBackendError, "read a tenant's index") from exc
        self._remember(name, answer)
        return name

    def _text_searchable(self, name: str, client: Any) -> bool:
        """Whether the index's text analyzer serves queries (not `BUILDING`); asked (with `client`) until it
        does. A missing index (dropped since this process saw it) is forgotten and answers False."""
        if name not in self._searchable:
            try:
                self._remember(name, self._call("read a tenant's index", client.get_index, **self._at(name)))
            except SearchBackendError as exc:
                if not _missing(exc):
                    raise
                self._forget(name)
        return name in self._searchable

    def _remember(self, name: str, answer: dict[str, Any]) -> None:
        self._existing.add(name)
        try:
            # A reader never ensures the bucket (it may not read its tags): its probes take the index's size.
            self._dimensions[name] = int(answer["index"]["dimension"])
            configurations = answer["index"]["metadataConfiguration"]["textSearchConfigurations"]
            active = any(c["metadataKey"] == r.TEXT_KEY and c.get("status") == "ACTIVE" for c in configurations)
        except (LookupError, TypeError) as exc:
            raise SearchBackendError(f"S3 Vectors described index '{name}' in an unexpected shape: {exc}") from exc
        if active:
            self._searchable.add(name)

    def _create_index(self, tenant_id: str, name: str) -> None:
        if self._dimension is None:
            raise SearchBackendError("the S3 Vectors index was not ensured before its first write")
        request = r.index_request(self._dimension)
        if self._keys is not None:
            # The key first (created, or the one an earlier, interrupted run left under the tenant's alias).
            key_arn = self._keys.key_for(tenant_id)
            request["encryptionConfiguration"] = {"sseType": "aws:kms", "kmsKeyArn": key_arn}
        try:
            self._client.create_index(vectorBucketName=self._bucket, indexName=name, **request)
        except ClientError as exc:
            code = error_code(exc)
            if code == "ServiceQuotaExceededException":  # not throttling: retrying cannot help
                raise SearchBackendError(
                    f"the vector bucket '{self._bucket}' holds its maximum of indexes (10,000 tenants)",
                    details={"bucket": self._bucket, "aws_error": code},
                ) from exc
            if code != "ConflictException":  # another writer created it first
                raise translate(exc, SearchBackendError, "create a tenant's index") from exc
        except BotoCoreError as exc:
            raise translate(exc, SearchBackendError, "create a tenant's index") from exc

    # --- writes ----------------------------------------------------------------------------------

    def replace_document(self, tenant_id: str, doc_id: str, chunks: Sequence[Chunk], vectors: Sequence[Vector]) -> None:
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk is required")
        generation = uuid.uuid4().hex
        entries = []
        if chunks and chunks[0].document.source:
            # First, so a document that fits one PutVectors still takes one call.
            marker = r.source_metadata(chunks[0].document, generation)
            entries.append(_entry(r.source_key(doc_id), self._probe()["float32"], marker))
        for chunk, vector in zip(chunks, vectors, strict=True):
            if chunk.document.tenant_id != tenant_id or chunk.document.doc_id != doc_id:
                raise ValueError("every chunk must belong to the document being replaced")
            self._check_vector(vector, f"chunk '{chunk.chunk_id}'")
            entries.append(_entry(r.chunk_key(chunk.chunk_id), vector, r.chunk_metadata(chunk, generation)))
        index = self._put(tenant_id, entries) if entries else self._tenant_index(tenant_id, create=False)
        if index is None:
            return
        stale = {"$or": [{r.GENERATION_KEY: {"$exists": False}}, {r.GENERATION_KEY: {"$ne": generation}}]}
        self._delete_matching(index, {"$and": [{"doc_id": {"$eq": doc_id}}, stale]})

    def delete_document(self, tenant_id: str, doc_id: str, *, keep_staged: bool = False) -> int:
        index = self._tenant_index(tenant_id, create=False)
        if index is None:
            return 0
        # The source marker goes with the chunks (kept staged vectors are no document yet).
        kinds = {r.KIND_KEY: {"$in": ["chunk", r.SOURCE_KIND]}}
        deleted = self._delete_matching(index, {"$and": [{"doc_id": {"$eq": doc_id}}, kinds]})
        if not keep_staged:
            self._delete_matching(index, {"$and": [{"doc_id": {"$eq": doc_id}}, {r.KIND_KEY: {"$eq": "staged"}}]})
        return sum(1 for key in deleted if not _is_marker(key))

    def stage_vectors(self, tenant_id: str, doc_id: str, vectors: Mapping[str, Vector]) -> None:
        for content_hash, vector in vectors.items():
            self._check_vector(vector, f"the staged vector of '{content_hash}'")
        entries = [
            _entry(r.staged_key(doc_id, content_hash), vector, r.staged_metadata(doc_id, content_hash))
            for content_hash, vector in vectors.items()
        ]
        if entries:
            self._put(tenant_id, entries)

    def _put(self, tenant_id: str, entries: list[dict[str, Any]]) -> str:
        """PutVectors in batches within the vector count and the payload size, into the tenant's index
        (created if missing, also when it was dropped since this process last saw it); its name."""
        index = self._tenant_index(tenant_id, create=True)
        if index is None:
            raise SearchBackendError("the tenant's S3 Vectors index could not be created")
        for batch in _batches(entries, r.MAX_PUT_VECTORS, r.MAX_PAYLOAD_BYTES // 2):
            try:
                self._call("write vectors", self._client.put_vectors, **self._at(index), vectors=batch)
            except SearchBackendError as exc:
                if not _missing(exc):
                    raise
                self._forget(index)  # an erasure dropped it: the tenant starts again with a new one
                self._tenant_index(tenant_id, create=True)
                self._call("write vectors", self._client.put_vectors, **self._at(index), vectors=batch)
        return index

    def _forget(self, index: str) -> None:
        self._existing.discard(index)
        self._searchable.discard(index)

    def _delete_matching(self, index: str, flt: dict[str, Any]) -> set[str]:
        """Delete every vector matching `flt`, a query of `MAX_TOP_K` at a time (filters apply before the
        search, and a deleted vector is gone from the next query); the keys deleted. A query that
        finds only vectors already deleted ends the loop: a delete not yet visible never loops forever."""
        deleted: set[str] = set()
        while True:
            found = self._query(index, {"queryVector": self._probe(), "filter": flt}, r.MAX_TOP_K)
            keys = [str(hit["key"]) for hit in found if hit["key"] not in deleted]
            self._delete_keys(index, keys)
            deleted.update(keys)
            if len(found) < r.MAX_TOP_K or not keys:
                return deleted

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete the next `limit` of the tenant's vectors; once none is left, drop its index (0). Source
        markers are deleted on the way but not counted (they are no entry of the port's): a page of
        markers only is followed by the next."""
        index = self._tenant_index(tenant_id, create=False)
        if index is None:
            return 0
        while True:
            page = self._call(
                "list a tenant's vectors",
                self._client.list_vectors,
                **self._at(index),
                maxResults=max(1, min(limit, _LIST_PAGE)),
            )
            keys = [str(vector["key"]) for vector in page["vectors"]][:limit]
            if not keys:
                self._call("drop a tenant's index", self._client.delete_index, **self._at(index))
                self._forget(index)
                return 0
            self._delete_keys(index, keys)
            if erased := sum(1 for key in keys if not _is_marker(key)):
                return erased

    def schedule_key_deletion(self, tenant_id: str) -> KeyDeletion | None:
        """With a key per tenant, schedule the deletion of the tenant's key once its index is dropped
        (`citewise.ports.erasure.TenantKeyHolder`): anything of the index left anywhere is unreadable
        then. None without a key per tenant, or when the tenant has none."""
        return self._keys.schedule_deletion(tenant_id) if self._keys is not None else None

    def release_key(self, tenant_id: str) -> None:
        """Release the name of the tenant's key (its alias), after its deletion was scheduled and recorded."""
        if self._keys is not None:
            self._keys.release(tenant_id)

    def _delete_keys(self, index: str, keys: list[str]) -> None:
        for start in range(0, len(keys), r.MAX_DELETE_VECTORS):
            batch = keys[start : start + r.MAX_DELETE_VECTORS]
            self._call("delete vectors", self._client.delete_vectors, **self._at(index), keys=batch)

    def count_tenant(self, tenant_id: str) -> int:
        index = self._tenant_index(tenant_id, create=False)
        if index is None:
            return 0
        return sum(1 for vector in self._listed(index, metadata=False) if not _is_marker(str(vector["key"])))

    # --- reads -----------------------------------------------------------------------------------

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        unique = sorted(set(hashes))
        index = self._tenant_index(tenant_id, create=False) if unique else None
        if index is None:
            return {}
        found: dict[str, Vector] = {}
        for start in range(0, len(unique), r.MAX_GET_VECTORS):
            wanted = unique[start : start + r.MAX_GET_VECTORS]
            hits = self._query(
                index,
                {"queryVector": self._probe(), "filter": {r.HASH_KEY: {"$in": wanted}}},
                r.MAX_TOP_K,
                metadata=True,
            )
            keys = {str(hit["key"]): str(hit["metadata"][r.HASH_KEY]) for hit in hits}
            if not keys:
                continue
            answer = self._call(
                "read vectors", self._client.get_vectors, **self._at(index), keys=list(keys), returnData=True
            )
            for vector in answer["vectors"]:
                found[keys[str(vector["key"])]] = [float(x) for x in vector["data"]["float32"]]
        return found

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        if limit < 1 or not query.strip():
            return []
        if len(query) > r.MAX_QUERY_TEXT:
            raise ValidationError(
                f"a keyword query may have at most {r.MAX_QUERY_TEXT} characters in search mode {r.MODE}",
                details={"limit": r.MAX_QUERY_TEXT, "length": len(query)},
            )
        request = {"queryTexts": [{"metadataKey": r.TEXT_KEY, "text": query}], "returnScores": True}
        return self._search(caller, request, filters, limit, _bm25_score, full_text=True)

    def vector_search(self, caller: Caller, vector: Vector, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        if limit < 1:
            return []
        self._check_dimension(len(vector), "the query vector")
        request = {"queryVector": {"float32": list(vector)}, "returnDistance": True}
        return self._search(caller, request, filters, limit, lambda hit: 1.0 - float(hit["distance"]))

    def _search(
        self,
        caller: Caller,
        request: dict[str, Any],
        filters: Filter | None,
        limit: int,
        score: Callable[[dict[str, Any]], float],
        *,
        full_text: bool = False,
    ) -> list[ScoredChunk]:
        if limit > r.MAX_TOP_K:
            raise ValidationError(
                f"a search may ask for at most {r.MAX_TOP_K} results in search mode {r.MODE}",
                details={"limit": r.MAX_TOP_K, "asked": limit},
            )
        flt = r.read_filter(caller, filters)  # a filter this mode cannot evaluate is refused before any call
        client = self._reader(caller.tenant_id)
        index = self._tenant_index(caller.tenant_id, create=False, client=client)
        if index is None:
            return []
        if full_text and not self._text_searchable(index, client):
            # A new analyzer backfills (`BUILDING`) before it serves queries: the keyword list is empty
            # meanwhile, so a hybrid search ranks by its vector list alone instead of failing.
            if index in self._existing:
                logger.warning("the keyword analyzer of a tenant's S3 Vectors index is still building")
            return []
        hits = self._query(index, {**request, "filter": flt}, limit, metadata=True, client=client)
        results: list[ScoredChunk] = []
        try:
            for hit in hits:
                metadata = hit["metadata"]
                if not _readable(caller, metadata):
                    # The filter holds the access rule; this is defence in depth against a wrong translation.
                    logger.error("S3 Vectors returned an entry outside the caller's access; dropped it")
                    continue
                chunk_id, doc_id = _chunk_id(hit), str(metadata["doc_id"])
                results.append(ScoredChunk.stored(chunk_id, doc_id, str(metadata[r.CHUNK_KEY]), score(hit)))
        except (LookupError, TypeError, ValueError) as exc:
            raise SearchBackendError(f"S3 Vectors answered a malformed hit ({type(exc).__name__}: {exc})") from exc
        return results

    def sources(self, caller: Caller) -> list[str]:
        """The sources of the documents the caller may read, from their source markers (one per document,
        written and deleted with it): one query while the first 100 markers found hold every source, one
        more per 100 markers otherwise, each excluding the sources found before."""
        client = self._reader(caller.tenant_id)
        index = self._tenant_index(caller.tenant_id, create=False, client=client)
        if index is None:
            return []
        found: set[str] = set()
        while True:
            request = {"queryVector": self._probe(index), "filter": r.sources_filter(caller, sorted(found))}
            hits = self._query(index, request, r.MAX_TOP_K, metadata=True, client=client)
            new = {
                str(hit["metadata"]["source"])
                for hit in hits
                if _readable(caller, hit.get("metadata", {}), kind=r.SOURCE_KIND) and hit["metadata"].get("source")
            } - found
            found |= new
            if len(hits) < r.MAX_TOP_K or not new:
                return sorted(found)

    # --- plumbing --------------------------------------------------------------------------------

    def _query(
        self, index: str, request: dict[str, Any], top_k: int, *, metadata: bool = False, client: Any = None
    ) -> list[dict[str, Any]]:
        try:
            answer = self._call(
                "query vectors",
                (client or self._client).query_vectors,
                **self._at(index),
                topK=top_k,
                returnMetadata=metadata,
                **request,
            )
        except SearchBackendError as exc:
            if not _missing(exc):
                raise
            self._forget(index)  # dropped by an erasure since this process saw it: nothing to find
            return []
        hits: list[dict[str, Any]] = answer["vectors"]
        return hits

    def _listed(self, index: str, *, metadata: bool) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            paging = {"nextToken": token} if token else {}
            page = self._call(
                "list vectors",
                self._client.list_vectors,
                **self._at(index),
                maxResults=_LIST_PAGE,
                returnMetadata=metadata,
                **paging,
            )
            yield from page["vectors"]
            token = page.get("nextToken")
            if not token:
                return

    def _at(self, index: str) -> dict[str, str]:
        return {"vectorBucketName": self._bucket, "indexName": index}

    def _probe(self, index: str | None = None) -> dict[str, list[float]]:
        """A unit query vector for queries that only list what a filter matches (the order is unused), of
        the ensured dimension, or else of `index` as described by GetIndex."""
        dimension = self._dimension if self._dimension is not None else self._dimensions.get(index or "")
        if dimension is None:
            raise SearchBackendError("the S3 Vectors index was not ensured before use")
        return {"float32": [1.0] + [0.0] * (dimension - 1)}

    def _check_vector(self, vector: Vector, what: str) -> None:
        """What S3 Vectors refuses in a stored vector, refused before the call: another dimension,
        NaN or infinity, and (cosine) a zero vector."""
        self._check_dimension(len(vector), f"{what}'s vector")
        if not all(math.isfinite(x) for x in vector) or not any(vector):
            raise SearchBackendError(
                f"{what} has a vector S3 Vectors cannot store (a zero vector, or NaN or infinite values)",
                details={"mode": r.MODE},
            )

    def _check_dimension(self, size: int, what: str) -> None:
        if self._dimension is not None and size != self._dimension:
            raise SearchBackendError(f"{what} has {size} dimensions, the index {self._dimension}")

    @staticmethod
    def _call(action: str, operation: Callable[..., Any], **params: Any) -> dict[str, Any]:
        """`operation(**params)`, a failure translated: throttling to ThrottledError, else SearchBackendError."""
        try:
            answer: dict[str, Any] = operation(**params)
            return answer
        except CitewiseError:
            raise
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, SearchBackendError, f"S3 Vectors: {action}") from exc


def _readable(caller: Caller, metadata: dict[str, Any], *, kind: str = "chunk") -> bool:
    """Whether an entry is one of `kind` (a chunk, a source marker) that the caller may read, by its
    metadata (`domain.access.may_read`'s rule; the tenant is the index)."""
    shared = metadata.get("visibility") == Visibility.SHARED.value
    return metadata.get(r.KIND_KEY) == kind and (shared or metadata.get("owner") == caller.user_id)


def _is_marker(key: str) -> bool:
    return key.startswith(r.source_key(""))


def _missing(error: SearchBackendError) -> bool:
    """Whether a translated failure is S3 Vectors' NotFoundException (an index dropped meanwhile)."""
    return error.details.get("aws_error") == "NotFoundException"


def _entry(key: str, vector: Vector, metadata: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "data": {"float32": [float(x) for x in vector]}, "metadata": metadata}


def _batches(entries: list[dict[str, Any]], count: int, max_bytes: int) -> Iterator[list[dict[str, Any]]]:
    """Consecutive batches of at most `count` entries and about `max_bytes` (a rough JSON size)."""
    batch: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        entry_size = len(str(entry))
        if batch and (len(batch) == count or size + entry_size > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(entry)
        size += entry_size
    if batch:
        yield batch


def _chunk_id(hit: dict[str, Any]) -> str:
    key = str(hit["key"])
    if not key.startswith("c:"):
        raise ValueError(f"a search hit '{key}' is no chunk")
    return key[2:]


def _bm25_score(hit: dict[str, Any]) -> float:
    return sum(float(part["score"]) for part in hit["scores"]["bm25Scores"] if part["metadataKey"] == r.TEXT_KEY)
