"""The local DocumentRegistry: SQLite tables beside the local index, one of records, one of tombstones.

`put` keeps the port's ordering rules (`citewise.ports.registry.refused_write`) with a check and a write
inside one `BEGIN IMMEDIATE` transaction: SQLite's write lock makes them atomic across threads and
processes alike (`citewise serve` and the CLI may share a home), as DynamoDB's condition does on AWS.
`delete` moves a record to `tombstones` in the same way. Tombstones live in their own table so that no
read of `documents` can ever return one; each delete purges those older than the retention.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from citewise.domain.errors import ValidationError
from citewise.domain.models import Document, DocumentStatus, Visibility
from citewise.domain.quotas import QuotaOverrides
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports import cursors
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.registry import (
    TOMBSTONE_RETENTION,
    DocumentPage,
    StoredTotals,
    TenantPage,
    TenantSummary,
    Tombstone,
    microseconds,
    moment,
    refused_write,
)
from citewise_local.sqlite import TenantTables

# Schema migrations, applied in order; `PRAGMA user_version` counts those a database has had. The first
# is the original schema, so a registry.db created before versioning (version 0, table present) takes
# only the later ones. Append, never edit: users' files already ran the earlier steps.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE IF NOT EXISTS documents (
            tenant_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            path TEXT NOT NULL,
            owner TEXT NOT NULL,
            visibility TEXT NOT NULL,
            status TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (tenant_id, doc_id)
        )""",
        "CREATE INDEX IF NOT EXISTS documents_by_path ON documents (tenant_id, path)",
    ),
    # `source` as a column so listings can filter on it; existing rows take it from their JSON body
    # (through a Python function, not json_extract: some SQLite builds lack the JSON functions).
    (
        "ALTER TABLE documents ADD COLUMN source TEXT NOT NULL DEFAULT ''",
        "UPDATE documents SET source = citewise_body_source(body)",
    ),
    # Delete tombstones (see `citewise.ports.registry`): the deleted record's version and ordering key
    # (NULL when nothing was registered) and the latest delete's time, in microseconds since the epoch.
    (
        """CREATE TABLE IF NOT EXISTS tombstones (
            tenant_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            version TEXT,
            updated_us INTEGER,
            deleted_us INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, doc_id)
        )""",
        "CREATE INDEX IF NOT EXISTS tombstones_by_age ON tombstones (deleted_us)",
    ),
    # A tenant's settings document (ranking signals, routing vocabulary), beside the records.
    ("CREATE TABLE IF NOT EXISTS tenant_settings (tenant_id TEXT PRIMARY KEY, body TEXT NOT NULL)",),
    # The tenants ever registered (the operator's listing): every tenant with a record today, then each
    # new one at its first write. Kept when its documents are deleted, as the DynamoDB catalogue is.
    (
        "CREATE TABLE IF NOT EXISTS tenants (tenant_id TEXT PRIMARY KEY)",
        "INSERT OR IGNORE INTO tenants (tenant_id) SELECT DISTINCT tenant_id FROM documents",
    ),
    # What each record stores (its chunks, the bytes of its original), as columns so a tenant's totals
    # are one aggregate over its rows; and the operator's quota overrides, beside the tenant settings.
    (
        "ALTER TABLE documents ADD COLUMN chunk_count INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE documents ADD COLUMN size_bytes INTEGER NOT NULL DEFAULT 0",
        "UPDATE documents SET chunk_count = citewise_body_int(body, 'chunk_count'),"
        " size_bytes = citewise_body_int(body, 'size_bytes')",
        "CREATE TABLE IF NOT EXISTS tenant_quotas (tenant_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)
BUSY_TIMEOUT_SECONDS = 5.0
"""sqlite3's own default, which the registry has always had (the other stores wait 30 s)."""


class LocalRegistry(TenantTables):
    """A `DocumentRegistry` in a SQLite file; paging cursors as in `registry.cursors`."""

    tenant_tables = ("documents", "tombstones", "tenant_settings", "tenant_quotas")
    """The tables holding a tenant's rows besides the catalogue (`tenants`), which `erase_tenant` empties
    first."""

    def __init__(self, path: Path, *, tombstone_retention: timedelta = TOMBSTONE_RETENTION) -> None:
        self._retention_us = tombstone_retention // timedelta(microseconds=1)
        super().__init__(path, busy_timeout=BUSY_TIMEOUT_SECONDS)
        self._migrate()

    def _migrate(self) -> None:
        """Bring the file up to `SCHEMA_VERSION` in one transaction: a user's existing registry.db keeps
        working, and two processes opening an old file at once migrate it once (the write lock is taken
        before the version is read)."""
        if self._schema_version() >= SCHEMA_VERSION:
            return  # the usual case: no write lock taken just to open the file
        self._conn.create_function("citewise_body_source", 1, _body_source, deterministic=True)
        self._conn.create_function("citewise_body_int", 2, _body_int, deterministic=True)
        with self._write() as conn:
            version = self._schema_version()
            for statements in _MIGRATIONS[version:]:
                for statement in statements:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {max(version, SCHEMA_VERSION)}")

    def _schema_version(self) -> int:
        (version,) = self._conn.execute("PRAGMA user_version").fetchone()
        return int(version)

    def get(self, tenant_id: str, doc_id: str) -> Document | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT body FROM documents WHERE tenant_id = ? AND doc_id = ?", (tenant_id, doc_id)
            ).fetchone()
        return Document.model_validate_json(row[0]) if row else None

    def put(self, document: Document) -> None:
        with self._write() as conn:
            row = conn.execute(
                "SELECT body FROM documents WHERE tenant_id = ? AND doc_id = ?",
                (document.tenant_id, document.doc_id),
            ).fetchone()
            stored = Document.model_validate_json(row[0]) if row else self._tombstone(document)
            refusal = refused_write(stored, document)
            if refusal is not None:
                raise refusal
            conn.execute(
                "INSERT INTO documents (tenant_id, doc_id, path, owner, visibility, status, source, body,"
                " chunk_count, size_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, doc_id)"
                " DO UPDATE SET path = excluded.path, owner = excluded.owner, visibility = excluded.visibility,"
                " status = excluded.status, source = excluded.source, body = excluded.body,"
                " chunk_count = excluded.chunk_count, size_bytes = excluded.size_bytes",
                (
                    document.tenant_id,
                    document.doc_id,
                    document.path,
                    document.owner,
                    document.visibility.value,
                    document.status.value,
                    document.source,
                    document.model_dump_json(),
                    document.chunk_count,
                    document.size_bytes or 0,
                ),
            )
            conn.execute(
                "DELETE FROM tombstones WHERE tenant_id = ? AND doc_id = ?", (document.tenant_id, document.doc_id)
            )
            conn.execute("INSERT OR IGNORE INTO tenants (tenant_id) VALUES (?)", (document.tenant_id,))

    def delete(self, tenant_id: str, doc_id: str, *, deleted_at: datetime) -> None:
        deleted_us = microseconds(deleted_at)
        with self._write() as conn:
            row = conn.execute(
                "SELECT body FROM documents WHERE tenant_id = ? AND doc_id = ?", (tenant_id, doc_id)
            ).fetchone()
            if row is not None:
                conn.execute("DELETE FROM documents WHERE tenant_id = ? AND doc_id = ?", (tenant_id, doc_id))
                deleted = Document.model_validate_json(row[0])
                conn.execute(
                    "INSERT OR REPLACE INTO tombstones (tenant_id, doc_id, version, updated_us, deleted_us)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (tenant_id, doc_id, deleted.version, microseconds(deleted.updated_at), deleted_us),
                )
            else:  # deleted again, or never registered: keep what the tombstone knows, at the latest time
                conn.execute(
                    "INSERT INTO tombstones (tenant_id, doc_id, deleted_us) VALUES (?, ?, ?)"
                    " ON CONFLICT (tenant_id, doc_id) DO UPDATE SET deleted_us = max(deleted_us, excluded.deleted_us)",
                    (tenant_id, doc_id, deleted_us),
                )
            conn.execute("DELETE FROM tombstones WHERE deleted_us < ?", (deleted_us - self._retention_us,))

    def _tombstone(self, document: Document) -> Tombstone | None:
        """The tombstone `document` would replace, if its last record was deleted (and not purged)."""
        row = self._conn.execute(
            "SELECT version, updated_us, deleted_us FROM tombstones WHERE tenant_id = ? AND doc_id = ?",
            (document.tenant_id, document.doc_id),
        ).fetchone()
        if row is None:
            return None
        version, updated_us, deleted_us = row
        return Tombstone(
            tenant_id=document.tenant_id,
            doc_id=document.doc_id,
            version=version,
            updated_at=moment(updated_us) if updated_us is not None else None,
            deleted_at=moment(deleted_us),
        )

    def list(
        self,
        tenant_id: str,
        *,
        visible_to: str | None = None,
        status: DocumentStatus | None = None,
        source: str | None = None,
        path_prefix: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> DocumentPage:
        _check_limit(limit)
        sql = "SELECT body, path FROM documents WHERE tenant_id = ?"
        params: list[object] = [tenant_id]
        if visible_to is not None:
            sql += " AND (visibility = ? OR owner = ?)"
            params += [Visibility.SHARED.value, visible_to]
        if status is not None:
            sql += " AND status = ?"
            params.append(status.value)
        if source is not None:
            sql += " AND source = ?"
            params.append(source)
        if path_prefix:
            sql += " AND substr(path, 1, ?) = ?"
            params += [len(path_prefix), path_prefix]
        if cursor is not None:
            sql += " AND path > ?"
            params.append(cursors.decode(cursor, tenant_id, path_prefix).path)
        sql += " ORDER BY path LIMIT ?"
        params.append(limit + 1)
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        items = [Document.model_validate_json(body) for body, _ in rows[:limit]]
        next_cursor = cursors.encode(items[-1]) if len(rows) > limit else None
        return DocumentPage(items=items, next_cursor=next_cursor)

    def list_tenants(self, *, limit: int = 100, cursor: str | None = None) -> TenantPage:
        _check_limit(limit)
        after = cursors.decode_tenant(cursor) if cursor is not None else ""
        with self._lock:
            rows = self._conn.execute(
                "SELECT tenant_id FROM tenants WHERE tenant_id > ? ORDER BY tenant_id LIMIT ?", (after, limit + 1)
            ).fetchall()
        items = [TenantSummary(tenant_id=tenant_id) for (tenant_id,) in rows[:limit]]
        next_cursor = cursors.encode_tenant(items[-1].tenant_id) if len(rows) > limit else None
        return TenantPage(items=items, next_cursor=next_cursor)

    def tenant_settings(self, tenant_id: str) -> TenantSettings | None:
        with self._lock:
            row = self._conn.execute("SELECT body FROM tenant_settings WHERE tenant_id = ?", (tenant_id,)).fetchone()
        return TenantSettings.model_validate_json(row[0]) if row else None

    def put_tenant_settings(self, tenant_id: str, settings: TenantSettings) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO tenant_settings (tenant_id, body) VALUES (?, ?)",
                (tenant_id, settings.model_dump_json(exclude_none=True)),
            )

    def has_tenant(self, tenant_id: str) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM tenants WHERE tenant_id = ?", (tenant_id,)).fetchone() is not None

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete up to `limit` rows of the tenant, table by table; the catalogue row goes last, once the
        tenant has nothing else left (`DocumentRegistry.erase_tenant`)."""
        with self._write() as conn:
            deleted = self._erase_rows(conn, tenant_id, limit)
            if deleted == 0:
                deleted = conn.execute("DELETE FROM tenants WHERE tenant_id = ?", (tenant_id,)).rowcount
        return deleted

    def count_tenant(self, tenant_id: str) -> int:
        return self._count_rows(tenant_id, (*self.tenant_tables, "tenants"))

    def stored_totals(self, tenant_id: str) -> StoredTotals:
        """Counted when asked, one aggregate over the tenant's rows (the primary key's prefix): always
        exact, since it reads the records themselves, and free for every write. It costs a read of the
        tenant's rows, about a millisecond per ten thousand documents (docs/operations.md, "Quotas")."""
        with self._lock:
            documents, chunks, size = self._conn.execute(
                "SELECT count(*), coalesce(sum(chunk_count), 0), coalesce(sum(size_bytes), 0)"
                " FROM documents WHERE tenant_id = ?",
                (tenant_id,),
            ).fetchone()
        return StoredTotals(documents=documents, chunks=chunks, bytes=size)

    def tenant_quotas(self, tenant_id: str) -> QuotaOverrides | None:
        with self._lock:
            row = self._conn.execute("SELECT body FROM tenant_quotas WHERE tenant_id = ?", (tenant_id,)).fetchone()
        return QuotaOverrides.model_validate_json(row[0]) if row else None

    def put_tenant_quotas(self, tenant_id: str, overrides: QuotaOverrides) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO tenant_quotas (tenant_id, body) VALUES (?, ?)",
                (tenant_id, overrides.model_dump_json(exclude_none=True)),
            )

    def tenants(self) -> tuple[str, ...]:
        """The tenants that have records, in order: with `list`, a walk through every record, which the
        local server needs when it reconciles the registry with the blob store on start."""
        with self._lock:
            rows = self._conn.execute("SELECT DISTINCT tenant_id FROM documents ORDER BY tenant_id").fetchall()
        return tuple(tenant_id for (tenant_id,) in rows)


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= 1000:
        raise ValidationError("limit must be between 1 and 1000", details={"field": "limit"})


def _body_source(body: str) -> str:
    """The `source` of a stored Document's JSON, for the migration that gave `source` its own column."""
    return str(json.loads(body)["source"])


def _body_int(body: str, name: str) -> int:
    """An integer field of a stored Document's JSON (0 when absent or null), for the totals' migration."""
    return int(json.loads(body).get(name) or 0)
