"""One AuditLog contract, run against the local JSONL trail and CloudWatch Logs (under moto).

What every adapter must do: give back what was written, field for field; filter by tenant (ids sharing a
prefix kept apart), user, action and time; page oldest first with a cursor bound to the tenant; and lose
no record under parallel writers (threads on both, separate processes on the local file, which
`citewise serve` and the CLI share).

moto's FilterLogEvents ignores JSON filter patterns (it returns every event): the CloudWatch runs show
that the adapter's own matching keeps other tenants out whatever the pattern does; that the pattern
itself narrows on AWS is listed in docs/aws.md.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from citewise.aws.cloudwatch_audit import CloudWatchAudit
from citewise.domain.errors import ValidationError
from citewise.ports.audit import AuditLog, AuditQuery, AuditRecord
from citewise_local.audit import LocalAudit

GROUP = "citewise-audit"
START = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)

Factory = Callable[[], AuditLog]


@pytest.fixture(params=["local", "cloudwatch"])
def trails(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """Builds trails on one store: each call is another writer (an execution environment, a process)."""
    if request.param == "local":
        yield lambda: LocalAudit(tmp_path / "audit.jsonl")
        return
    request.getfixturevalue("aws_credentials")
    with mock_aws():
        boto3.client("logs").create_log_group(logGroupName=GROUP)
        yield lambda: CloudWatchAudit(GROUP, client=boto3.client("logs"))


@pytest.fixture
def trail(trails: Factory) -> AuditLog:
    return trails()


def record(
    minute: int, tenant: str = "acme", user: str = "alice", action: str = "query", **fields: object
) -> AuditRecord:
    return AuditRecord.model_validate(
        {
            "time": START + timedelta(minutes=minute),
            "request_id": f"r-{tenant}-{minute}",
            "channel": "rest",
            "tenant_id": tenant,
            "user_id": user,
            "action": action,
            "outcome": "ok",
            **fields,
        }
    )


def read_all(trail: AuditLog, query: AuditQuery, limit: int = 100) -> list[AuditRecord]:
    records, cursor = [], None
    while True:
        page = trail.read(query, limit=limit, cursor=cursor)
        assert len(page.records) <= limit
        records += page.records
        if page.next_cursor is None:
            return records
        cursor = page.next_cursor


def test_a_record_reads_back_field_for_field(trail: AuditLog) -> None:
    written = record(
        0,
        operator=False,
        resources=["0" * 32, "1" * 32],
        resources_omitted=3,
        outcome="NOT_FOUND",
        question_hash="hmac-sha256:" + "a" * 64,
        question="When does the vault open?",
        channel="mcp",
        action="mcp.rag_query",
    )
    trail.write(written)
    assert read_all(trail, AuditQuery(tenant_id="acme")) == [written]


def test_tenants_are_read_apart_even_when_their_ids_share_a_prefix(trail: AuditLog) -> None:
    for minute, tenant in enumerate(("acme", "acme-eu", "acme", "acme.labs", None)):
        trail.write(record(minute, tenant=tenant) if tenant else record(minute).model_copy(update={"tenant_id": None}))
    assert [r.time.minute for r in read_all(trail, AuditQuery(tenant_id="acme"))] == [0, 2]
    assert [r.tenant_id for r in read_all(trail, AuditQuery(tenant_id="acme-eu"))] == ["acme-eu"]
    assert read_all(trail, AuditQuery(tenant_id="other")) == []
    # and a reader of every tenant (the CLI) sees all, oldest first
    assert [r.tenant_id for r in read_all(trail, AuditQuery())] == ["acme", "acme-eu", "acme", "acme.labs", None]


def test_user_action_and_time_narrow_the_read(trail: AuditLog) -> None:
    trail.write(record(0, user="alice", action="query"))
    trail.write(record(1, user="bob", action="query"))
    trail.write(record(2, user="alice", action="document.delete"))
    trail.write(record(3, user="alice", action="query"))
    alice = read_all(trail, AuditQuery(tenant_id="acme", user_id="alice", action="query"))
    assert [r.time.minute for r in alice] == [0, 3]
    window = AuditQuery(tenant_id="acme", start=START + timedelta(minutes=1), end=START + timedelta(minutes=3))
    assert [r.time.minute for r in read_all(trail, window)] == [1, 2]  # the start included, the end not


def test_pages_give_every_record_once_oldest_first_and_a_cursor_stays_in_its_tenant(trail: AuditLog) -> None:
    for minute in range(7):
        trail.write(record(minute))
        trail.write(record(minute, tenant="acme-eu"))
    query = AuditQuery(tenant_id="acme")
    assert [r.time.minute for r in read_all(trail, query, limit=2)] == list(range(7))
    cursor = trail.read(query, limit=2).next_cursor
    assert cursor is not None
    with pytest.raises(ValidationError):
        trail.read(AuditQuery(tenant_id="acme-eu"), limit=2, cursor=cursor)


def test_parallel_writers_lose_no_record(trails: Factory) -> None:
    # Given 8 writers (execution environments), each writing 25 records at once
    writers = [trails() for _ in range(8)]

    def write(index: int) -> None:
        for n in range(25):
            writers[index].write(record(n, user=f"u{index}"))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write, range(8)))
    # Then all 200 read back, each whole
    records = read_all(trails(), AuditQuery(tenant_id="acme"), limit=1000)
    assert sorted((r.user_id or "", r.time.minute) for r in records) == sorted(
        (f"u{i}", n) for i in range(8) for n in range(25)
    )


def _write_in_a_process(path: str, index: int) -> None:
    trail = LocalAudit(Path(path))
    for n in range(100):
        trail.write(record(n % 60, user=f"p{index}", resources=[f"{n:032x}"] * 1, question="x" * 2000))


def test_processes_appending_to_one_local_file_never_interleave(tmp_path: Path) -> None:
    # Given 4 processes (the server and CLIs) appending long lines to the same home's trail at once
    path = tmp_path / "audit.jsonl"
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_in_a_process, args=(str(path), i)) for i in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    # Then every line is one whole record, and none is missing
    lines = path.read_bytes().splitlines()
    assert len(lines) == 400
    assert all(AuditRecord.model_validate_json(line) for line in lines)
    assert path.stat().st_mode & 0o777 == 0o600
