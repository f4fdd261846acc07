"""The audit trail's rules without a store: the Auditor (UTC time, the question's keyed hash, full
questions only when turned on, failures loud and counted, never raised), the CloudWatch Logs requests as
plain dicts and against botocore's model (Stubber), and the cursor's tenant binding."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from citewise.aws.cloudwatch_audit import CloudWatchAudit, parse_event, put_request, read_request
from citewise.domain.errors import CitewiseError, ValidationError
from citewise.ports.audit import MAX_RESOURCES, Auditor, AuditPage, AuditQuery, AuditRecord, question_hash
from citewise.ports.cursors import decode_audit, encode_audit
from citewise.runtime.settings import Settings, load_settings

KEY = b"k" * 32
MOMENT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


class Kept:
    """An AuditLog that keeps what it was given."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)

    def read(self, query: AuditQuery, *, limit: int, cursor: str | None = None) -> AuditPage:
        return AuditPage(records=[r for r in self.records if query.matches(r)][:limit])


def _record(auditor: Auditor, **fields: Any) -> None:
    auditor.record(
        **{
            "request_id": "r-1",
            "channel": "rest",
            "action": "query",
            "tenant_id": "acme",
            "user_id": "alice",
            **fields,
        }
    )


# --- the question's hash --------------------------------------------------------------------------------------


def test_the_hash_is_keyed_tenant_bound_and_ignores_case_and_spacing() -> None:
    digest = question_hash(KEY, "acme", "When does the vault open?")
    assert digest.startswith("hmac-sha256:") and len(digest) == len("hmac-sha256:") + 64
    assert question_hash(KEY, "acme", "  when DOES the vault\topen? ") == digest
    assert question_hash(b"another key", "acme", "When does the vault open?") != digest
    assert question_hash(KEY, "globex", "When does the vault open?") != digest
    assert question_hash(KEY, "acme", "When does the safe open?") != digest


def test_an_unkeyed_guess_does_not_find_the_question() -> None:
    import hashlib

    digest = question_hash(KEY, "acme", "merger")
    assert hashlib.sha256(b"merger").hexdigest() not in digest
    assert hashlib.sha256(b"acme\x00merger").hexdigest() not in digest


# --- the Auditor -------------------------------------------------------------------------------------------


def test_the_auditor_stamps_utc_and_keeps_only_the_questions_hash() -> None:
    kept = Kept()
    clock = datetime(2026, 11, 28, 1, 30, tzinfo=timezone(timedelta(hours=3)))
    auditor = Auditor(lambda: kept, key=lambda: KEY, clock=lambda: clock)
    _record(auditor, question="When does the vault open?", resources=["d1", "d2", "d1"])
    [record] = kept.records
    assert record.time == datetime(2026, 11, 27, 22, 30, tzinfo=UTC)
    assert record.question is None and record.question_hash == question_hash(KEY, "acme", "When does the vault open?")
    assert record.resources == ["d1", "d2"]  # each id once, in the order met
    assert (record.outcome, record.operator) == ("ok", False)


def test_full_questions_are_kept_only_when_turned_on() -> None:
    kept = Kept()
    _record(Auditor(lambda: kept, key=lambda: KEY, questions="full"), question="When does the vault open?")
    assert kept.records[0].question == "When does the vault open?" and kept.records[0].question_hash


def test_a_long_listing_is_cut_and_says_how_much() -> None:
    kept = Kept()
    _record(Auditor(lambda: kept), resources=[f"{i:032x}" for i in range(MAX_RESOURCES + 7)])
    assert len(kept.records[0].resources) == MAX_RESOURCES and kept.records[0].resources_omitted == 7


def test_a_disabled_auditor_builds_nothing() -> None:
    auditor = Auditor(None)
    _record(auditor)
    assert not auditor.enabled and auditor.failures == 0


@pytest.mark.parametrize("where", ["write", "build"])
def test_a_failed_write_is_loud_and_counted_never_raised(where: str, caplog: pytest.LogCaptureFixture) -> None:
    # Given a trail that fails to write, or to be built at all, and a failure counter
    class Broken(Kept):
        def write(self, record: AuditRecord) -> None:
            raise OSError("disk full")

    def build() -> Kept:
        if where == "build":
            raise OSError("cannot open the trail")
        return Broken()

    counted: list[int] = []
    auditor = Auditor(build, key=lambda: KEY, on_failure=lambda: counted.append(1))
    # When two accesses are recorded
    with caplog.at_level(logging.ERROR, logger="citewise.ports.audit"):
        _record(auditor, request_id="r-1")
        _record(auditor, request_id="r-2", action="document.delete")
    # Then nothing was raised, each failure is an ERROR line naming the record, and each is counted
    assert auditor.failures == 2 and counted == [1, 1]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [(r.getMessage(), r.audit_request_id, r.audit_action) for r in errors] == [  # type: ignore[attr-defined]
        ("AUDIT RECORD NOT WRITTEN", "r-1", "query"),
        ("AUDIT RECORD NOT WRITTEN", "r-2", "document.delete"),
    ]


def test_a_failing_counter_still_leaves_the_error_line(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Kept):
        def write(self, record: AuditRecord) -> None:
            raise OSError("disk full")

    def count() -> None:
        raise RuntimeError("no metrics")

    auditor = Auditor(Broken, on_failure=count)
    with caplog.at_level(logging.ERROR, logger="citewise.ports.audit"):
        _record(auditor)
    assert auditor.failures == 1
    assert [r.getMessage() for r in caplog.records] == ["AUDIT RECORD NOT WRITTEN", "could not count an audit failure"]


def test_a_trail_on_aws_needs_its_hashing_key() -> None:
    aws = {
        "backend": "aws",
        "opensearch_endpoint": "https://search.example.com",
        "registry_table": "t",
        "documents_bucket": "b",
        "audit_log_group": "trail",
    }
    with pytest.raises(ValidationError, match="CITEWISE_AUDIT_HASH_KEY"):
        load_settings(Settings, **aws)
    assert load_settings(Settings, **aws, audit_hash_key="k").audit_questions == "hash"


# --- cursors ---------------------------------------------------------------------------------------------


def test_an_audit_cursor_is_bound_to_its_tenant() -> None:
    cursor = encode_audit("acme", "1234")
    assert decode_audit(cursor, "acme") == "1234"
    for other in ("acme-eu", None):
        with pytest.raises(ValidationError):
            decode_audit(cursor, other)
    assert decode_audit(encode_audit(None, "token"), None) == "token"
    for forged in ("e30", "not-base64!", encode_audit("acme", "x")[:-3]):
        with pytest.raises(ValidationError):
            decode_audit(forged, "acme")


# --- the CloudWatch Logs requests ------------------------------------------------------------------------


def _a_record(**fields: Any) -> AuditRecord:
    values: dict[str, Any] = {
        "time": MOMENT,
        "request_id": "r-1",
        "channel": "rest",
        "tenant_id": "acme",
        "user_id": "alice",
        "action": "query",
        "outcome": "ok",
        **fields,
    }
    return AuditRecord(**values)


def test_put_request_is_one_event_stamped_with_the_records_time() -> None:
    record = _a_record()
    request = put_request("trail", "2026/11/27/abc", record)
    assert request == {
        "logGroupName": "trail",
        "logStreamName": "2026/11/27/abc",
        "logEvents": [{"timestamp": 1795780800000, "message": record.model_dump_json()}],
    }
    assert parse_event({"message": request["logEvents"][0]["message"]}) == record


def test_read_request_filters_the_tenant_server_side_and_the_range_in_milliseconds() -> None:
    query = AuditQuery(tenant_id="acme-eu", start=MOMENT, end=MOMENT + timedelta(hours=1))
    assert read_request("trail", query, 50_000) == {
        "logGroupName": "trail",
        "limit": 10_000,
        "interleaved": True,
        "filterPattern": '{ $.tenant_id = "acme-eu" }',
        "startTime": 1795780800000,
        "endTime": 1795784399999,  # the query's end is excluded, FilterLogEvents' included
    }
    assert "filterPattern" not in read_request("trail", AuditQuery(), 10)


def test_an_event_that_is_no_record_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    assert parse_event({"message": "START RequestId: x"}) is None
    assert parse_event({"message": '{"tenant_id": "acme"}'}) is None


@pytest.fixture
def logs(aws_credentials: None) -> Any:
    return boto3.client("logs", region_name="us-east-1")


def test_the_first_write_creates_the_stream_and_a_lost_stream_is_made_again(logs: Any) -> None:
    trail = CloudWatchAudit("trail", client=logs, clock=lambda: MOMENT)
    record = _a_record()
    stream = put_request("trail", trail.stream, record)["logStreamName"]
    assert stream.startswith("2026/11/27/")
    with Stubber(logs) as stub:
        stub.add_response("create_log_stream", {}, {"logGroupName": "trail", "logStreamName": stream})
        stub.add_response("put_log_events", {}, put_request("trail", stream, record))
        # the stream deleted by hand between two writes
        stub.add_client_error("put_log_events", "ResourceNotFoundException", expected_params=None)
        stub.add_client_error(
            "create_log_stream",
            "ResourceAlreadyExistsException",
            expected_params={"logGroupName": "trail", "logStreamName": stream},
        )
        stub.add_response("put_log_events", {}, put_request("trail", stream, record))
        trail.write(record)
        trail.write(record)
        stub.assert_no_pending_responses()


def test_a_rejected_event_or_a_missing_group_is_an_error(logs: Any) -> None:
    trail = CloudWatchAudit("trail", client=logs)
    with Stubber(logs) as stub:
        stub.add_client_error("create_log_stream", "ResourceNotFoundException")
        with pytest.raises(CitewiseError, match="CreateLogStream"):
            trail.write(_a_record())
        stub.add_response("create_log_stream", {})
        stub.add_response("put_log_events", {"rejectedLogEventsInfo": {"tooOldLogEventEndIndex": 0}})
        with pytest.raises(CitewiseError, match="rejected"):
            trail.write(_a_record())


def test_a_read_keeps_only_the_querys_records_and_wraps_the_token(logs: Any) -> None:
    # Given a page of events where the pattern matched more than the query asks (as a faulty pattern might)
    ours, theirs = _a_record(), _a_record(tenant_id="acme-eu")
    events = [
        {"message": record.model_dump_json(), "timestamp": 1, "logStreamName": "s", "eventId": str(i)}
        for i, record in enumerate((ours, theirs))
    ]
    query = AuditQuery(tenant_id="acme")
    trail = CloudWatchAudit("trail", client=logs)
    with Stubber(logs) as stub:
        stub.add_response("filter_log_events", {"events": events, "nextToken": "t-2"}, read_request("trail", query, 2))
        page = trail.read(query, limit=2)
        stub.add_response("filter_log_events", {"events": []}, {**read_request("trail", query, 2), "nextToken": "t-2"})
        last = trail.read(query, limit=2, cursor=page.next_cursor)
    # Then only the tenant's record is returned, and the token resumes (bound to the tenant)
    assert page.records == [ours] and page.next_cursor and decode_audit(page.next_cursor, "acme") == "t-2"
    assert last == AuditPage(records=[])
