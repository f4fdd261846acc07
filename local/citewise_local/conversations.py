"""The local ConversationStore: one SQLite file (`conversations.db` in the home).

Two tables: `conversations` (one row per conversation, keyed by tenant, user and id) and `turns` (one
row per turn, its JSON whole). A turn and its conversation's counters change in one `BEGIN IMMEDIATE`
transaction, so a turn is there whole or not at all, and the turn count it is checked against cannot
move under it. Expiry is as on DynamoDB: a conversation past its `expires_at` is not read, and the next
write of the home's store deletes what has expired (the TTL sweep DynamoDB runs by itself).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from citewise.domain.errors import ConflictError
from citewise.ports.conversations import (
    PAGE_LIMIT,
    ConversationPage,
    ConversationSummary,
    Owner,
    Turn,
    not_found,
)
from citewise.ports.cursors import decode_conversation, encode_conversation
from citewise_local.sqlite import TenantTables

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS conversations (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        title TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        turns INTEGER NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (tenant_id, user_id, conversation_id)
    )""",
    """CREATE TABLE IF NOT EXISTS turns (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant_id, user_id, conversation_id, turn)
    )""",
)


class LocalConversations(TenantTables):
    """A `ConversationStore` in a SQLite file."""

    tenant_tables = ("turns", "conversations")

    def __init__(self, path: Path) -> None:
        # A commit is not fsynced (as the usage counters): a power cut may lose the last turns, never
        # corrupt the file, and a query does not wait for a disk flush.
        super().__init__(path, _SCHEMA, synchronous_normal=True)

    def create(self, owner: Owner, conversation_id: str, title: str, at: datetime, expires_at: datetime) -> None:
        with self._write() as conn:
            try:
                conn.execute(
                    "INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
                    (*owner, conversation_id, title, at.isoformat(), at.isoformat(), expires_at.timestamp()),
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError("a conversation with this id exists", details={"id": conversation_id}) from exc

    def summary(self, owner: Owner, conversation_id: str) -> ConversationSummary | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT conversation_id, title, created_at, updated_at, turns FROM conversations "
                "WHERE tenant_id = ? AND user_id = ? AND conversation_id = ? AND expires_at > ?",
                (*owner, conversation_id, _now()),
            ).fetchone()
        return _summary(row) if row else None

    def turns(self, owner: Owner, conversation_id: str, *, last: int | None = None) -> list[Turn]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT body FROM turns WHERE tenant_id = ? AND user_id = ? AND conversation_id = ? "
                "AND EXISTS (SELECT 1 FROM conversations c WHERE "
                "c.tenant_id = turns.tenant_id AND c.user_id = turns.user_id AND "
                "c.conversation_id = turns.conversation_id AND c.expires_at > ?) ORDER BY turn DESC LIMIT ?",
                (*owner, conversation_id, _now(), last if last is not None else -1),
            ).fetchall()
        return [Turn.model_validate_json(body) for (body,) in reversed(rows)]

    def append(self, owner: Owner, conversation_id: str, turn: Turn, expires_at: datetime) -> None:
        with self._write() as conn:
            row = conn.execute(
                "SELECT turns FROM conversations "
                "WHERE tenant_id = ? AND user_id = ? AND conversation_id = ? AND expires_at > ?",
                (*owner, conversation_id, _now()),
            ).fetchone()
            if row is None:
                raise not_found(conversation_id)
            if row[0] != turn.index - 1:
                raise ConflictError(
                    "the conversation has another turn of this number", details={"turn": turn.index, "turns": row[0]}
                )
            conn.execute(
                "INSERT INTO turns VALUES (?, ?, ?, ?, ?)",
                (*owner, conversation_id, turn.index, turn.model_dump_json()),
            )
            conn.execute(
                "UPDATE conversations SET turns = ?, updated_at = ?, expires_at = ? "
                "WHERE tenant_id = ? AND user_id = ? AND conversation_id = ?",
                (turn.index, turn.at.isoformat(), expires_at.timestamp(), *owner, conversation_id),
            )

    def page(self, owner: Owner, *, limit: int = PAGE_LIMIT, cursor: str | None = None) -> ConversationPage:
        # Ids sort by creation time: the newest first is the id order, descending.
        after = decode_conversation(cursor, *owner) if cursor else "~"
        with self._lock:
            rows = self._conn.execute(
                "SELECT conversation_id, title, created_at, updated_at, turns FROM conversations "
                "WHERE tenant_id = ? AND user_id = ? AND conversation_id < ? AND expires_at > ? "
                "ORDER BY conversation_id DESC LIMIT ?",
                (*owner, after, _now(), limit + 1),
            ).fetchall()
        found = [_summary(row) for row in rows[:limit]]
        more = len(rows) > limit
        return ConversationPage(
            conversations=found, next_cursor=encode_conversation(*owner, found[-1].conversation_id) if more else None
        )

    def delete(self, owner: Owner, conversation_id: str) -> bool:
        with self._write() as conn:
            conn.execute(
                "DELETE FROM turns WHERE tenant_id = ? AND user_id = ? AND conversation_id = ?",
                (*owner, conversation_id),
            )
            deleted = conn.execute(
                "DELETE FROM conversations "
                "WHERE tenant_id = ? AND user_id = ? AND conversation_id = ? AND expires_at > ?",
                (*owner, conversation_id, _now()),
            ).rowcount
        return bool(deleted)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, which first sweeps expired conversations (DynamoDB's TTL, here)."""
        with super()._write() as conn:
            now = _now()
            conn.execute(
                "DELETE FROM turns WHERE (tenant_id, user_id, conversation_id) IN (SELECT tenant_id, user_id, "
                "conversation_id FROM conversations WHERE expires_at <= ?)",
                (now,),
            )
            conn.execute("DELETE FROM conversations WHERE expires_at <= ?", (now,))
            yield conn


def _now() -> float:
    return datetime.now(UTC).timestamp()


def _summary(row: tuple[str, str, str, str, int]) -> ConversationSummary:
    conversation_id, title, created_at, updated_at, turns = row
    return ConversationSummary(
        conversation_id=conversation_id,
        title=title,
        created_at=datetime.fromisoformat(created_at),
        updated_at=datetime.fromisoformat(updated_at),
        turns=turns,
    )
