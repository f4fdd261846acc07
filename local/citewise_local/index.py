"""The embedded local index: SQLite FTS5 for BM25 and exact cosine search on numpy, in one file.

Why this shape: SQLite gives crash-safe transactions (a killed ingest rolls back, so a document is
never half-replaced) and BM25 in the standard library; exact search over an in-memory float32 matrix is
fast enough at laptop scale (100k chunks) and has no recall loss.

Choices that keep tenants apart and a query fast when the index is large:
- Vectors are held ordered by tenant, so a tenant's rows are one contiguous slice: scoring them is one
  matrix-vector product on a view, and other tenants' vectors are never touched.
- Every indexed term is prefixed with its tenant (`t<hex tenant>z<term>`), so a tenant's terms are its
  own FTS tokens: a keyword query reads only its tenant's postings, and term frequencies (which decide
  what is pruned, below) are counted within the tenant. Only the corpus size and average chunk length
  in the BM25 formula are index-wide.
- BM25 cost grows with the postings it scores (about 2 us each). A query's terms are taken rarest
  first until `MAX_POSTINGS` postings are reached; the very common terms left out carry little IDF
  weight, the same bet that Lucene's WAND/MaxScore pruning makes, here approximate.
- The keyword ranking reads the FTS table alone and checks the access rule on the same in-memory arrays
  as vector search: joining each match to `chunks` (wide rows: body and vector) cost one random B-tree
  lookup per posting, most of a keyword query at 100k chunks (docs/benchmarks.md).
- Every chunk a search returns is re-read with the tenant and access filter in the SQL, so a row id
  reused after a concurrent delete can never hand one tenant another's chunk.

Each thread reads through its own connection (WAL mode allows concurrent readers), so the keyword and
vector halves of a hybrid query can run in parallel; writes go through one connection under a lock.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from citewise.domain.batching import batched
from citewise.domain.errors import SearchBackendError
from citewise.domain.matching import matches, metadata_view
from citewise.domain.models import Caller, Chunk, Filter, Vector, Visibility
from citewise.domain.textutil import keyword_text
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.index import ScoredChunk
from citewise_local.analysis import keyword_terms
from citewise_local.sqlite import transaction

SCHEMA_VERSION = "3"  # 3: Snowball terms of `textutil.keyword_text` (2: the light stemmer's of embedding_text)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    visibility TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    body TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (tenant_id, doc_id);
CREATE INDEX IF NOT EXISTS chunks_by_hash ON chunks (tenant_id, content_hash);
CREATE TABLE IF NOT EXISTS staged_vectors (
    tenant_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (tenant_id, doc_id, content_hash)
);
CREATE INDEX IF NOT EXISTS staged_by_hash ON staged_vectors (tenant_id, content_hash);
"""
_KEYWORD_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0');
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab (chunks_fts, 'row');
"""
MAX_POSTINGS = 10_000
_SQL_PARAMS = 500  # stay well under SQLite's host-parameter limit
_FILTER_BATCH = 256


@dataclass(frozen=True)
class _Matrix:
    """All vectors, ordered by tenant, with what the access filter needs as flat arrays."""

    ids: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    shared: npt.NDArray[np.bool_]
    owners: npt.NDArray[np.int32]
    owner_codes: dict[str, int]
    tenant_slices: dict[str, tuple[int, int]]


class LocalIndex:
    """A `VectorIndex` stored in one SQLite file (WAL mode), safe to share between threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._writer = self._connect()
        self._writer.execute("PRAGMA journal_mode=WAL")
        self._writer.executescript(_SCHEMA + _KEYWORD_SCHEMA)
        self._write_lock = threading.Lock()
        self._readers: list[sqlite3.Connection] = []
        self._local = threading.local()
        # A connection of its own to watch `data_version`, which changes on every commit by any other
        # connection: our writer's and other processes' alike.
        self._watch = self._connect()
        self._matrix_lock = threading.Lock()
        self._matrix: _Matrix | None = None
        self._matrix_version: int | None = None
        self._dimension: int | None = None
        self._sources_cache: dict[tuple[int, str, str], list[str]] = {}

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
            with self._write_lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection this index opened."""
        for conn in [self._writer, self._watch, *self._readers]:
            conn.close()

    # --- writes ----------------------------------------------------------------------------------

    def ensure(self, embedder_name: str, dimension: int) -> None:
        wanted = {"embedder": embedder_name, "dimension": str(dimension), "schema": SCHEMA_VERSION}
        if dict(self._reader().execute("SELECT key, value FROM index_meta").fetchall()) == wanted:
            # The usual case, checked without the write lock: a process starting beside one that is
            # writing (`citewise serve` starts execution environments while ingestion runs) need not wait.
            self._dimension = dimension
            return
        with self._write_lock, transaction(self._writer):
            stored = dict(self._writer.execute("SELECT key, value FROM index_meta").fetchall())
            if not stored:
                self._writer.executemany("INSERT INTO index_meta (key, value) VALUES (?, ?)", wanted.items())
            elif stored == wanted | {"schema": "2"}:
                self._rebuild_keywords()
            elif stored != wanted:
                raise SearchBackendError(
                    f"the local index at {self._path} holds vectors of embedder '{stored.get('embedder')}' "
                    f"({stored.get('dimension')} dimensions, schema {stored.get('schema')}) but "
                    f"'{embedder_name}' ({dimension}, schema {SCHEMA_VERSION}) is configured; use the same "
                    "CITEWISE_EMBEDDER, or a new CITEWISE_HOME and re-ingest",
                    details={"indexed_embedder": stored.get("embedder"), "embedder": embedder_name},
                )
            self._dimension = dimension

    def replace_document(self, tenant_id: str, doc_id: str, chunks: Sequence[Chunk], vectors: Sequence[Vector]) -> None:
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk is required")
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1 if vectors else self._dimension or 0)
        if chunks and self._dimension is not None and matrix.shape[1] != self._dimension:
            raise SearchBackendError(f"vectors have {matrix.shape[1]} dimensions, the index {self._dimension}")
        prefix = _term_prefix(tenant_id)
        with self._write_lock, transaction(self._writer):
            self._delete(tenant_id, doc_id, keep_staged=False)
            for chunk, row in zip(chunks, matrix, strict=True):
                if chunk.document.tenant_id != tenant_id or chunk.document.doc_id != doc_id:
                    raise ValueError("every chunk must belong to the document being replaced")
                cursor = self._writer.execute(
                    "INSERT INTO chunks (chunk_id, tenant_id, doc_id, owner, visibility, content_hash,"
                    " body, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        chunk.chunk_id,
                        tenant_id,
                        doc_id,
                        chunk.document.owner,
                        chunk.document.visibility.value,
                        chunk.content_hash,
                        chunk.model_dump_json(),
                        row.tobytes(),
                    ),
                )
                self._index_terms(prefix, cursor.lastrowid, chunk)

    def _index_terms(self, prefix: str, rowid: int | None, chunk: Chunk) -> None:
        """The chunk's keyword row: the tenant-prefixed terms of its `keyword_text`."""
        terms = keyword_terms(keyword_text(chunk.document.title, chunk.heading_path, chunk.text))
        self._writer.execute(
            "INSERT INTO chunks_fts (rowid, terms) VALUES (?, ?)", (rowid, " ".join(prefix + term for term in terms))
        )

    def _rebuild_keywords(self) -> None:
        """Migrate a schema-2 index in place (inside the caller's transaction): the keyword table is
        derived data, rebuilt from the stored chunks, so no document needs ingesting again."""
        self._writer.execute("DROP TABLE chunks_vocab")
        self._writer.execute("DROP TABLE chunks_fts")
        for statement in _KEYWORD_SCHEMA.strip().splitlines():
            self._writer.execute(statement)
        for rowid, tenant_id, body in self._writer.execute("SELECT id, tenant_id, body FROM chunks").fetchall():
            self._index_terms(_term_prefix(tenant_id), rowid, Chunk.model_validate_json(body))
        self._writer.execute("UPDATE index_meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))

    def delete_document(self, tenant_id: str, doc_id: str, *, keep_staged: bool = False) -> int:
        with self._write_lock, transaction(self._writer):
            return self._delete(tenant_id, doc_id, keep_staged=keep_staged)

    def stage_vectors(self, tenant_id: str, doc_id: str, vectors: Mapping[str, Vector]) -> None:
        """Keep the vectors in `staged_vectors`, a table no search reads, committed before returning."""
        for vector in vectors.values():
            if self._dimension is not None and len(vector) != self._dimension:
                raise SearchBackendError(f"a staged vector has {len(vector)} dimensions, the index {self._dimension}")
        rows = [
            (tenant_id, doc_id, content_hash, np.asarray(vector, dtype=np.float32).tobytes())
            for content_hash, vector in vectors.items()
        ]
        with self._write_lock, transaction(self._writer):
            self._writer.executemany("INSERT OR REPLACE INTO staged_vectors VALUES (?, ?, ?, ?)", rows)

    def _delete(self, tenant_id: str, doc_id: str, *, keep_staged: bool) -> int:
        if not keep_staged:
            self._writer.execute("DELETE FROM staged_vectors WHERE tenant_id = ? AND doc_id = ?", (tenant_id, doc_id))
        ids = [
            row[0]
            for row in self._writer.execute(
                "SELECT id FROM chunks WHERE tenant_id = ? AND doc_id = ?", (tenant_id, doc_id)
            )
        ]
        for batch in batched(ids, _SQL_PARAMS):
            marks = ",".join("?" * len(batch))
            self._writer.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", batch)  # noqa: S608
            self._writer.execute(f"DELETE FROM chunks WHERE id IN ({marks})", batch)  # noqa: S608
        return len(ids)

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete up to `limit` of the tenant's chunks (with their keyword rows), then its staged vectors."""
        with self._write_lock, transaction(self._writer):
            ids = [
                row[0]
                for row in self._writer.execute("SELECT id FROM chunks WHERE tenant_id = ? LIMIT ?", (tenant_id, limit))
            ]
            for batch in batched(ids, _SQL_PARAMS):
                marks = ",".join("?" * len(batch))
                self._writer.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", batch)  # noqa: S608
                self._writer.execute(f"DELETE FROM chunks WHERE id IN ({marks})", batch)  # noqa: S608
            staged = self._writer.execute(
                "DELETE FROM staged_vectors WHERE rowid IN"
                " (SELECT rowid FROM staged_vectors WHERE tenant_id = ? LIMIT ?)",
                (tenant_id, limit - len(ids)),
            ).rowcount
        return len(ids) + staged

    def count_tenant(self, tenant_id: str) -> int:
        reader = self._reader()
        (chunks,) = reader.execute("SELECT count(*) FROM chunks WHERE tenant_id = ?", (tenant_id,)).fetchone()
        (staged,) = reader.execute("SELECT count(*) FROM staged_vectors WHERE tenant_id = ?", (tenant_id,)).fetchone()
        return int(chunks) + int(staged)

    # --- reads -----------------------------------------------------------------------------------

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        found: dict[str, Vector] = {}
        for batch in batched(list(hashes), _SQL_PARAMS):
            marks = ",".join("?" * len(batch))
            for table in ("chunks", "staged_vectors"):
                sql = f"SELECT content_hash, vector FROM {table} WHERE tenant_id = ? AND content_hash IN ({marks})"  # noqa: S608
                for content_hash, blob in self._reader().execute(sql, [tenant_id, *batch]):
                    found[content_hash] = np.frombuffer(blob, dtype=np.float32).tolist()
        return found

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        conn = self._reader()
        prefix = _term_prefix(caller.tenant_id)
        tokens = self._selective_tokens(conn, [prefix + term for term in keyword_terms(query)])
        if not tokens:
            return []
        # The tenant's own terms match only its chunks; the access rule is checked on the in-memory
        # arrays (`_readable`) rather than by joining `chunks`, whose wide rows made one B-tree lookup per
        # match the larger part of a query; `_take` checks tenant and access again in SQL.
        sql = "SELECT rowid, -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts)"
        ranked = ((int(i), float(s)) for i, s in conn.execute(sql, [" OR ".join(f'"{token}"' for token in tokens)]))
        return self._take(conn, caller, self._readable(caller, ranked), filters, limit)

    def _readable(self, caller: Caller, ranked: Iterable[tuple[int, float]]) -> Iterator[tuple[int, float]]:
        """The ranked rows of the caller's tenant that the caller may read, in order (lazily: a search
        stops reading its ranking once it has its results)."""
        matrix = self._current_matrix()
        bounds = matrix.tenant_slices.get(caller.tenant_id)
        if bounds is None:
            return
        lo, hi = bounds
        ids, allowed = matrix.ids[lo:hi], _allowed(matrix, caller, lo, hi)
        for batch in batched(ranked, _FILTER_BATCH):
            wanted = np.fromiter((i for i, _ in batch), dtype=np.int64, count=len(batch))
            at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
            keep = (ids[at] == wanted) & allowed[at]  # a row newer than the arrays is left out
            yield from (pair for pair, readable in zip(batch, keep, strict=True) if readable)

    @staticmethod
    def _selective_tokens(conn: sqlite3.Connection, tokens: list[str]) -> list[str]:
        """The query's tokens, rarest in the tenant first, up to `MAX_POSTINGS` postings (at least one).

        A token missing from the vocabulary costs nothing to keep: it matches nothing, or matches what
        FTS folds it to.
        """
        frequency = dict.fromkeys(tokens, 0)
        for batch in batched(frequency, _SQL_PARAMS):
            marks = ",".join("?" * len(batch))
            sql = f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})"  # noqa: S608
            frequency.update(conn.execute(sql, batch))
        selected: list[str] = []
        postings = 0
        for token in sorted(frequency, key=frequency.__getitem__):
            if selected and postings + frequency[token] > MAX_POSTINGS:
                break
            selected.append(token)
            postings += frequency[token]
        return selected

    def vector_search(self, caller: Caller, vector: Vector, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        matrix = self._current_matrix()
        bounds = matrix.tenant_slices.get(caller.tenant_id)
        if bounds is None:
            return []
        lo, hi = bounds
        query = np.asarray(vector, dtype=np.float32)
        if query.shape != (matrix.vectors.shape[1],):
            raise SearchBackendError(f"query vector has {query.size} dimensions, the index {matrix.vectors.shape[1]}")
        # einsum runs a single-threaded SIMD loop: about twice as fast here as BLAS gemv, whose threads
        # fight the keyword search running beside it.
        scores = np.einsum("ij,j->i", matrix.vectors[lo:hi], query)
        allowed = _allowed(matrix, caller, lo, hi)
        scores[~allowed] = -np.inf
        visible = int(allowed.sum())
        if filters is None and limit < visible:
            top = np.argpartition(-scores, limit)[:limit]
            order = top[np.argsort(-scores[top], kind="stable")]
        else:
            order = np.argsort(-scores, kind="stable")[:visible]
        ranked = ((int(matrix.ids[lo + i]), float(scores[i])) for i in order)
        return self._take(self._reader(), caller, ranked, filters, limit)

    def sources(self, caller: Caller) -> list[str]:
        """One chunk body per readable document, read for its `source`: a scan of the tenant's documents
        (not chunks), which is cheap at laptop scale; the answer is kept until the index changes."""
        version = self._watch_version()
        key = (version, caller.tenant_id, caller.user_id)
        cached = self._sources_cache.get(key)
        if cached is not None:
            return cached
        sql = (
            "SELECT body FROM chunks WHERE id IN (SELECT MIN(id) FROM chunks WHERE tenant_id = ?"
            " AND (visibility = ? OR owner = ?) GROUP BY doc_id)"
        )
        params = (caller.tenant_id, Visibility.SHARED.value, caller.user_id)
        found = {Chunk.model_validate_json(body).document.source for (body,) in self._reader().execute(sql, params)}
        answer = sorted(source for source in found if source)
        self._sources_cache = {key: answer}  # one entry: the latest version, for the latest caller
        return answer

    def _watch_version(self) -> int:
        with self._matrix_lock:
            return int(self._watch.execute("PRAGMA data_version").fetchone()[0])

    def _take(
        self,
        conn: sqlite3.Connection,
        caller: Caller,
        ranked: Iterable[tuple[int, float]],
        filters: Filter | None,
        limit: int,
    ) -> list[ScoredChunk]:
        """The first `limit` ranked chunks the caller may read that pass `filters`, loaded in batches.

        `NOT INDEXED` keeps the lookup on the row ids: given a long `IN` list, SQLite's planner (without
        statistics) preferred the `(tenant_id, ...)` indexes and scanned every row of the tenant, 15-30 ms
        a list at 50,000 chunks where the id lookups take well under one (docs/benchmarks.md, 9c).
        Bodies are read here, in the statement that checks tenant and access, but parsed only when a
        filter needs the chunk or a caller asks for it (`ScoredChunk.stored`; 9e).
        """
        results: list[ScoredChunk] = []
        access = [caller.tenant_id, Visibility.SHARED.value, caller.user_id]
        for batch in batched(ranked, _FILTER_BATCH if filters else limit):
            marks = ",".join("?" * len(batch))
            sql = (
                f"SELECT id, chunk_id, doc_id, body FROM chunks NOT INDEXED WHERE id IN ({marks})"  # noqa: S608
                " AND tenant_id = ? AND (visibility = ? OR owner = ?)"
            )
            rows = {int(row[0]): row for row in conn.execute(sql, [*(i for i, _ in batch), *access])}
            for rowid, score in batch:
                if rowid not in rows:
                    continue  # deleted or replaced since the matrix was loaded
                _, chunk_id, doc_id, body = rows[rowid]
                scored = ScoredChunk.stored(chunk_id, doc_id, body, score)
                if filters is None or matches(filters, metadata_view(scored.chunk)):
                    results.append(scored)
                    if len(results) == limit:
                        return results
        return results

    def _current_matrix(self) -> _Matrix:
        """The in-memory matrix, reloaded when any connection or process has committed since."""
        with self._matrix_lock:
            version = self._watch.execute("PRAGMA data_version").fetchone()[0]
            if self._matrix is None or version != self._matrix_version:
                self._matrix = self._load_matrix()
                self._matrix_version = version
            return self._matrix

    def _load_matrix(self) -> _Matrix:
        rows = self._watch.execute(
            "SELECT id, tenant_id, owner, visibility, vector FROM chunks ORDER BY tenant_id, id"
        ).fetchall()
        dimension = self._dimension or (len(rows[0][4]) // 4 if rows else 0)
        owner_codes: dict[str, int] = {}
        tenant_slices: dict[str, tuple[int, int]] = {}
        for position, (_, tenant, owner, _, _) in enumerate(rows):
            owner_codes.setdefault(owner, len(owner_codes))
            lo, _ = tenant_slices.get(tenant, (position, position))
            tenant_slices[tenant] = (lo, position + 1)
        count = len(rows)
        return _Matrix(
            ids=np.fromiter((r[0] for r in rows), dtype=np.int64, count=count),
            vectors=np.frombuffer(b"".join(r[4] for r in rows), dtype=np.float32).reshape(count, dimension),
            shared=np.fromiter((r[3] == Visibility.SHARED.value for r in rows), dtype=np.bool_, count=count),
            owners=np.fromiter((owner_codes[r[2]] for r in rows), dtype=np.int32, count=count),
            owner_codes=owner_codes,
            tenant_slices=tenant_slices,
        )


def _allowed(matrix: _Matrix, caller: Caller, lo: int, hi: int) -> npt.NDArray[np.bool_]:
    """Which rows of the tenant slice `lo:hi` the caller may read: shared ones and the caller's own."""
    owned: npt.NDArray[np.bool_] = matrix.owners[lo:hi] == matrix.owner_codes.get(caller.user_id, -1)
    return matrix.shared[lo:hi] | owned


def _term_prefix(tenant_id: str) -> str:
    """`t<hex>z`: hex keeps `.`/`-` of tenant ids inside one FTS token and never contains the `z`."""
    return f"t{tenant_id.encode().hex()}z"
