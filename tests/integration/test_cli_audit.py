"""`citewise audit` on a temporary home: it reads the trail `citewise serve` writes, filtered as asked."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from citewise.ports.audit import AuditRecord
from citewise_local.audit import AUDIT_FILE, LocalAudit

START = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def _record(minute: int, tenant: str, user: str, action: str, **fields: Any) -> AuditRecord:
    return AuditRecord.model_validate(
        {
            "time": START + timedelta(minutes=minute),
            "request_id": f"r-{minute}",
            "channel": "rest",
            "tenant_id": tenant,
            "user_id": user,
            "action": action,
            "outcome": "ok",
            **fields,
        }
    )


@pytest.fixture
def home_with_a_trail(cli: Any, tmp_path: Path) -> Path:
    """A home whose trail holds records of two tenants sharing a prefix, and the operator's."""
    assert cli("docs", "list", "--tenant", "acme", "--init")[0] == 0  # makes the home
    trail = LocalAudit(tmp_path / "home" / AUDIT_FILE)
    trail.write(_record(0, "acme", "alice", "query", resources=["a" * 32]))
    trail.write(_record(1, "acme-eu", "gina", "search"))
    trail.write(_record(2, "acme", "carol", "document.delete", resources=["b" * 32], outcome="FORBIDDEN"))
    trail.write(_record(3, "acme", "ops-1", "admin.audit.export", operator=True))
    trail.write(_record(4, "acme", "alice", "query", user_id="alice\x1b[2J"))  # a hostile user id
    return tmp_path / "home"


def test_audit_filters_by_tenant_user_action_and_time(cli: Any, home_with_a_trail: Path) -> None:
    def actions(*args: str) -> list[tuple[str, str]]:
        status, out, _ = cli("audit", "--json", *args)
        assert status == 0
        return [(r["request_id"], r["action"]) for r in map(json.loads, out.splitlines())]

    assert [request for request, _ in actions()] == ["r-0", "r-1", "r-2", "r-3", "r-4"]
    assert actions("--tenant", "acme-eu") == [("r-1", "search")]
    assert actions("--tenant", "acme", "--user", "alice") == [("r-0", "query")]
    assert actions("--action", "document.delete") == [("r-2", "document.delete")]
    assert [r for r, _ in actions("--from", "2026-11-27T09:01:00", "--to", "2026-11-27T09:03:00Z")] == ["r-1", "r-2"]
    assert [r for r, _ in actions("--from", "2026-11-28")] == []
    assert [r for r, _ in actions("--limit", "2")] == ["r-0", "r-1"]


def test_audit_text_is_one_line_a_record_without_terminal_controls(cli: Any, home_with_a_trail: Path) -> None:
    status, out, _ = cli("audit", "--tenant", "acme")
    lines = out.splitlines()
    assert status == 0 and len(lines) == 4
    assert lines[0].startswith("2026-11-27T09:00:00Z  acme  alice  query  ok  [" + "a" * 32 + "]  rest:r-0")
    assert "operator:ops-1  admin.audit.export" in lines[2]
    assert "\x1b" not in out


def test_a_bad_time_is_a_usage_error(cli: Any, home_with_a_trail: Path) -> None:
    with pytest.raises(SystemExit) as refused:
        cli("audit", "--from", "yesterday")
    assert refused.value.code == 2
