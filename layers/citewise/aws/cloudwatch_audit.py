"""The AuditLog on CloudWatch Logs: a dedicated log group, written directly with PutLogEvents.

Why a log group of its own, and written this way (docs/operations.md, "Audit trail", has the comparison):
- its own retention (cdk.json `audit.retention_days` per environment), independent of the functions'
  logs, and its own readers: an engineer who may read the function logs need not read the trail;
- append-only for the functions: their roles may only CreateLogStream and PutLogEvents on this group.
  CloudWatch Logs has no API that edits or deletes one event; only DeleteLogStream / DeleteLogGroup /
  a shorter retention remove events, and no function role holds those;
- written synchronously from the request (about one HTTPS round trip to a regional endpoint), so a
  record exists when the response leaves, with nothing in between to lose it. The function's own log
  and a subscription filter would cost the request nothing, but would mix the trail into the function's
  log (and its readers), and deliver it late through a second function; S3 Object Lock via Firehose
  gives WORM storage, but buffers records for a minute or more and needs a query engine to read one
  tenant's records back. The trail's cost is CloudWatch Logs' ingestion per GB (a record is about 400
  bytes) and storage for the retention.

Streams: one per execution environment (`YYYY/MM/DD/<random>`), created on its first record. Each
record is one JSON event, timestamped with the record's time.

Reading: FilterLogEvents with the JSON filter pattern `{ $.tenant_id = "<tenant>" }`, paged with its
`nextToken` (wrapped in a cursor bound to the tenant), rather than Logs Insights: FilterLogEvents answers
synchronously and pages, which an API route needs; Insights queries are asynchronous (start, then
poll) and capped at 10,000 rows. Every record read is also matched against the whole query in memory,
so a pattern that matched too much could never put another tenant's record in an export.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import CitewiseError
from citewise.ports.audit import AuditPage, AuditQuery, AuditRecord
from citewise.ports.cursors import decode_audit, encode_audit

logger = logging.getLogger(__name__)

MAX_READ_EVENTS: Final = 10_000
"""FilterLogEvents' own maximum `limit`."""


class CloudWatchAudit:
    """An `AuditLog` in one CloudWatch Logs group (see the module docstring)."""

    def __init__(
        self,
        log_group: str,
        *,
        client: Any | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.log_group = log_group
        self._client = client if client is not None else aws.client("logs")
        self.stream = f"{clock():%Y/%m/%d}/{uuid.uuid4().hex}"
        self._stream_ready = False

    def write(self, record: AuditRecord) -> None:
        request = put_request(self.log_group, self.stream, record)
        if not self._stream_ready:
            self._create_stream()
        try:
            response = self._client.put_log_events(**request)
        except ClientError as exc:
            if aws.error_code(exc) != "ResourceNotFoundException":
                raise aws.translate(exc, CitewiseError, "CloudWatch Logs PutLogEvents") from exc
            self._create_stream()  # the stream is gone (deleted by hand): make it again, once
            response = self._call("PutLogEvents", lambda: self._client.put_log_events(**request))
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "CloudWatch Logs PutLogEvents") from exc
        rejected = response.get("rejectedLogEventsInfo")
        if rejected:
            raise CitewiseError("CloudWatch Logs rejected the audit record", details={"rejected": rejected})

    def read(self, query: AuditQuery, *, limit: int, cursor: str | None = None) -> AuditPage:
        request = read_request(self.log_group, query, limit)
        if cursor:
            request["nextToken"] = decode_audit(cursor, query.tenant_id)
        response = self._call("FilterLogEvents", lambda: self._client.filter_log_events(**request))
        parsed = (parse_event(event) for event in response.get("events", []))
        records = [record for record in parsed if record is not None and query.matches(record)]
        token = response.get("nextToken")
        return AuditPage(records=records, next_cursor=encode_audit(query.tenant_id, token) if token else None)

    def _create_stream(self) -> None:
        try:
            self._client.create_log_stream(logGroupName=self.log_group, logStreamName=self.stream)
        except ClientError as exc:
            if aws.error_code(exc) != "ResourceAlreadyExistsException":
                raise aws.translate(exc, CitewiseError, "CloudWatch Logs CreateLogStream") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "CloudWatch Logs CreateLogStream") from exc
        self._stream_ready = True

    @staticmethod
    def _call(action: str, operation: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return operation()
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, CitewiseError, f"CloudWatch Logs {action}") from exc


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def put_request(log_group: str, stream: str, record: AuditRecord) -> dict[str, Any]:
    """The PutLogEvents of one record: one JSON event stamped with the record's time."""
    return {
        "logGroupName": log_group,
        "logStreamName": stream,
        "logEvents": [{"timestamp": _millis(record.time), "message": record.model_dump_json()}],
    }


def read_request(log_group: str, query: AuditQuery, limit: int) -> dict[str, Any]:
    """The FilterLogEvents of a query: its time range, and its tenant as a JSON filter pattern (a tenant
    id is letters, digits, `_`, `-` and `.`: nothing to escape in a quoted pattern value)."""
    # `interleaved`: events of every stream merged in time order. AWS has ignored the parameter since 2019
    # (always interleaved); moto merges only when asked, so it is asked.
    request: dict[str, Any] = {"logGroupName": log_group, "limit": min(limit, MAX_READ_EVENTS), "interleaved": True}
    if query.tenant_id is not None:
        request["filterPattern"] = f'{{ $.tenant_id = "{query.tenant_id}" }}'
    if query.start is not None:
        request["startTime"] = _millis(query.start)
    if query.end is not None:
        request["endTime"] = _millis(query.end) - 1  # FilterLogEvents' end is inclusive; the query's is not
    return request


def parse_event(event: dict[str, Any]) -> AuditRecord | None:
    """A FilterLogEvents event as the record it holds; None (and a warning) for an event that is none."""
    try:
        return AuditRecord.model_validate(json.loads(event["message"]))
    except (ValueError, KeyError):  # pydantic's ValidationError and JSONDecodeError are ValueErrors
        logger.warning("skipped an event of the audit log group that is no audit record")
        return None
