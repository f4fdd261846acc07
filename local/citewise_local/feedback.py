"""The local FeedbackStore: one SQLite file (`feedback.db` in the home).

Two tables: `feedback` (one row per user, response and citation, its JSON whole) and `tallies` (one row
per tenant and source). A feedback and the tallies it moves change in one `BEGIN IMMEDIATE` transaction,
checked against the feedback it replaces, as the DynamoDB store's transaction is.
"""

from __future__ import annotations

from pathlib import Path

from citewise.domain.errors import ConflictError
from citewise.ports.conversations import Owner
from citewise.ports.feedback import Feedback, SourceTally, moved
from citewise_local.sqlite import TenantTables

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS feedback (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        response_id TEXT NOT NULL,
        citation INTEGER NOT NULL,
        at TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant_id, user_id, response_id, citation)
    )""",
    """CREATE TABLE IF NOT EXISTS tallies (
        tenant_id TEXT NOT NULL,
        source TEXT NOT NULL,
        helpful INTEGER NOT NULL,
        not_helpful INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, source)
    )""",
)


class LocalFeedback(TenantTables):
    """A `FeedbackStore` in a SQLite file."""

    tenant_tables = ("feedback", "tallies")

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)

    def get(self, owner: Owner, response_id: str, citation: int | None) -> Feedback | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT body FROM feedback WHERE tenant_id = ? AND user_id = ? AND response_id = ? AND citation = ?",
                (*owner, response_id, citation or 0),
            ).fetchone()
        return Feedback.model_validate_json(row[0]) if row else None

    def put(self, owner: Owner, feedback: Feedback, *, previous: Feedback | None) -> None:
        key = (*owner, feedback.response_id, feedback.citation or 0)
        with self._write() as conn:
            row = conn.execute(
                "SELECT at FROM feedback WHERE tenant_id = ? AND user_id = ? AND response_id = ? AND citation = ?", key
            ).fetchone()
            if (row[0] if row else None) != (previous.at.isoformat() if previous else None):
                raise ConflictError(
                    "this feedback was changed by another request", details={"response_id": feedback.response_id}
                )
            conn.execute(
                "INSERT OR REPLACE INTO feedback VALUES (?, ?, ?, ?, ?, ?)",
                (*key, feedback.at.isoformat(), feedback.model_dump_json()),
            )
            for source, (helpful, not_helpful) in moved(previous, feedback).items():
                conn.execute(
                    "INSERT INTO tallies VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, source) DO UPDATE SET "
                    "helpful = helpful + excluded.helpful, not_helpful = not_helpful + excluded.not_helpful",
                    (owner.tenant_id, source, helpful, not_helpful),
                )

    def tally(self, tenant_id: str, source: str) -> SourceTally | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT helpful, not_helpful FROM tallies WHERE tenant_id = ? AND source = ?", (tenant_id, source)
            ).fetchone()
        return SourceTally(helpful=row[0], not_helpful=row[1]) if row else None

    def tallies(self, tenant_id: str) -> dict[str, SourceTally]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT source, helpful, not_helpful FROM tallies WHERE tenant_id = ?", (tenant_id,)
            ).fetchall()
        return {source: SourceTally(helpful=helpful, not_helpful=down) for source, helpful, down in rows}
