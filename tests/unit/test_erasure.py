"""The erasure job's rules on plain doubles (`citewise.ports.erasure`), its queue messages
(`citewise.aws.sqs_erasure`) and the OpenSearch erasure bodies: what the contract suites cannot isolate."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from citewise.aws.opensearch_queries import tenant_count_query, tenant_entries_query
from citewise.aws.sqs_erasure import erasure_message, parse_erasure
from citewise.domain.errors import ValidationError
from citewise.ports.erasure import Erasure, ErasureStatus, KeyDeletion, run_erasure, start_erasure

T0 = datetime(2026, 11, 27, tzinfo=UTC)


class MemoryLog:
    def __init__(self) -> None:
        self.records: dict[str, Erasure] = {}
        self.saves = 0

    def get(self, tenant_id: str) -> Erasure | None:
        return self.records.get(tenant_id)

    def erasing(self, tenant_id: str) -> bool:
        record = self.records.get(tenant_id)
        return record is not None and record.status is ErasureStatus.ERASING

    def start(self, erasure: Erasure) -> None:
        self.records[erasure.tenant_id] = erasure

    def save(self, erasure: Erasure) -> None:
        self.saves += 1
        self.records[erasure.tenant_id] = erasure


class LaggingStore:
    """A store that still counts entries it can no longer find (a Serverless index's refresh window)."""

    def __init__(self, findable: int, lagging: int) -> None:
        self.findable, self.lagging = findable, lagging

    def erase_tenant(self, tenant_id: str, *, limit: int = 500) -> int:
        deleted = min(limit, self.findable)
        self.findable -= deleted
        return deleted

    def count_tenant(self, tenant_id: str) -> int:
        return self.findable + self.lagging


def test_a_store_that_counts_what_it_cannot_find_yet_leaves_the_erasure_running_not_spinning() -> None:
    # Given an erasure over a store whose deletes stay visible to its count for a while
    log, store = MemoryLog(), LaggingStore(findable=5, lagging=5)
    start_erasure(log, "acme", operator="ops", known=True, clock=lambda: T0)
    # When the job runs
    record = run_erasure(log, "acme", {"index": store}, {}, limit=2)
    # Then it deleted what it found, saw entries remain that it cannot find, and returned, still ERASING
    assert record.status is ErasureStatus.ERASING and record.store("index").deleted == 5
    # When the window has passed (the count agrees), the next run finishes with the receipt
    store.lagging = 0
    record = run_erasure(log, "acme", {"index": store}, {}, limit=2, clock=lambda: T0)
    assert record.status is ErasureStatus.ERASED and record.store("index").remaining == 0
    assert record.finished_at == T0 and record.steps == 3


def test_erasure_messages_round_trip_and_anything_else_is_refused() -> None:
    assert parse_erasure(erasure_message("acme-eu")) == "acme-eu"
    for body in (
        "not json",
        json.dumps({"type": "citewise.stale-sweep", "tenant_id": "acme"}),
        json.dumps({"type": "citewise.erasure", "tenant_id": "../acme"}),
        json.dumps({"type": "citewise.erasure", "tenant_id": "acme", "extra": 1}),
        json.dumps(["citewise.erasure", "acme"]),
    ):
        with pytest.raises(ValidationError):
            parse_erasure(body)


def test_the_opensearch_erasure_bodies_name_the_tenant_exactly() -> None:
    # A term on the keyword `tenant_id`: `acme` matches no entry of `acme-eu` or `acme2`
    page = tenant_entries_query("acme", 500, ["d", "c", "g"])
    assert page["query"] == {"bool": {"filter": [{"term": {"tenant_id": "acme"}}]}}
    assert (page["size"], page["sort"], page["search_after"], page["_source"]) == (
        500,
        ["doc_id", "chunk_id", "generation"],
        ["d", "c", "g"],
        False,
    )
    count = tenant_count_query("acme")
    assert (count["size"], count["track_total_hits"]) == (0, True)
    assert count["query"] == page["query"]


class KeyedStore(LaggingStore):
    """A store whose tenant has a key of its own (`TenantKeyHolder`), recording the order of events."""

    def __init__(self, findable: int, events: list[str], log: MemoryLog) -> None:
        super().__init__(findable, lagging=0)
        self.events, self.log = events, log
        self.aliased = True
        self.scheduled: KeyDeletion | None = None

    def erase_tenant(self, tenant_id: str, *, limit: int = 500) -> int:
        deleted = super().erase_tenant(tenant_id, limit=limit)
        self.events.append(f"erase {deleted}")
        return deleted

    def schedule_key_deletion(self, tenant_id: str) -> KeyDeletion | None:
        if not self.aliased:
            return None
        self.events.append("schedule")
        self.scheduled = self.scheduled or KeyDeletion(key_arn="arn:k", alias="alias/t", deletion_date=T0)
        return self.scheduled

    def release_key(self, tenant_id: str) -> None:
        recorded = self.log.records[tenant_id].store("index").key
        self.events.append(f"release (recorded: {recorded == self.scheduled})")
        self.aliased = False


def test_a_tenants_key_is_destroyed_after_every_store_is_empty_and_named_before_its_alias_goes() -> None:
    events: list[str] = []
    log = MemoryLog()
    index, registry = KeyedStore(findable=3, events=events, log=log), LaggingStore(findable=2, lagging=0)
    start_erasure(log, "acme", operator="ops", known=True, clock=lambda: T0)
    record = run_erasure(log, "acme", {"index": index, "registry": registry}, {}, limit=2)
    assert record.status is ErasureStatus.ERASED
    # the index emptied, then (the registry emptied too) the key scheduled, recorded, and only then released
    assert events == ["erase 2", "erase 1", "erase 0", "schedule", "release (recorded: True)"]
    assert registry.findable == 0 and record.store("index").key == index.scheduled
    # a run again changes nothing: the receipt keeps the key
    assert run_erasure(log, "acme", {"index": index, "registry": registry}, {}) == record
