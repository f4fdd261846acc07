"""The local AuditLog: one JSON line per record, appended to `audit.jsonl` in the home.

Append-safe under the server's threads and a CLI beside it: the file is opened with `O_APPEND` (the
kernel moves to the end and writes in one step, so two writers never overwrite each other), and each
record is one `write` of one whole line under an exclusive `flock` (and a thread lock), so lines of
parallel writers never interleave even where a large write could be split. The file is created 0600:
the trail names users and documents.

Not fsynced per record: a crash of the process loses nothing (the line is in the kernel once `write`
returns), a power cut may lose the last lines; an fsync would cost every request a disk flush.

Reading scans the file from a byte offset (the cursor) and filters in memory: a local trail is one
machine's, and the operator reads it rarely. A line that does not parse (the torn end of a line cut by
a power cut) is skipped with a warning, never fatal.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path

import pydantic

from citewise.domain.errors import ValidationError
from citewise.ports.audit import AuditPage, AuditQuery, AuditRecord
from citewise.ports.cursors import decode_audit, encode_audit

logger = logging.getLogger(__name__)

AUDIT_FILE = "audit.jsonl"


class LocalAudit:
    """An `AuditLog` in a JSONL file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: AuditRecord) -> None:
        line = record.model_dump_json().encode() + b"\n"
        with self._lock:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)  # released when the descriptor closes
                written = os.write(descriptor, line)
            finally:
                os.close(descriptor)
        if written != len(line):
            raise OSError(f"the audit line was written in part ({written} of {len(line)} bytes)")

    def read(self, query: AuditQuery, *, limit: int, cursor: str | None = None) -> AuditPage:
        offset = _offset(decode_audit(cursor, query.tenant_id)) if cursor else 0
        records: list[AuditRecord] = []
        if not self.path.exists():
            return AuditPage(records=records)
        with self.path.open("rb") as stream:
            stream.seek(offset)
            for line in iter(stream.readline, b""):
                if not line.endswith(b"\n"):
                    break  # a line being written now: the next read gets it whole
                offset += len(line)
                record = _parse(line)
                if record is not None and query.matches(record):
                    records.append(record)
                    if len(records) == limit:
                        more = bool(stream.read(1))
                        return AuditPage(records=records, next_cursor=_next(query, offset) if more else None)
        return AuditPage(records=records)


def _next(query: AuditQuery, offset: int) -> str:
    return encode_audit(query.tenant_id, str(offset))


def _offset(position: str) -> int:
    if not position.isdigit():
        raise ValidationError("invalid cursor", details={"field": "cursor"})
    return int(position)


def _parse(line: bytes) -> AuditRecord | None:
    try:
        return AuditRecord.model_validate_json(line)
    except pydantic.ValidationError:
        logger.warning("skipped an unreadable line of the audit trail")
        return None
