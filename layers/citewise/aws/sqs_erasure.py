"""The erasure job's queue: a tenant's erasure runs in the erasure function, one SQS message at a time.

Why a queue that the job re-queues itself through, rather than a Step Functions state machine: the job
is a loop of identical steps whose whole state is the tenant's `Erasure` record (`citewise.ports.erasure`),
so a run needs no more than "continue tenant T"; a message carries exactly that, the function runs until
its time budget is nearly spent and sends the message again. It needs one queue and one function (the
same pattern as the ingest queue's delayed sweeps), and a lost or repeated message is harmless: the
job is idempotent and a redelivery continues from the record. A state machine would add a second
service, its role and its definition to say the same loop; it would show progress in its console,
which the record and `GET /v1/admin/tenants/{id}/erasure` show already.

Delivery is at least once; a failing run is retried by SQS (visibility timeout) and, after the queue's
maximum receives, parked in the DLQ, where the alarm on DLQ depth shows it; the record stays ERASING,
its tenant refused, until the job is sent again (`citewise tenant erase T` on the operator's machine
resumes it too).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients
from citewise.domain.errors import CitewiseError, ValidationError
from citewise.domain.tenancy import validate_tenant_id

MESSAGE_TYPE = "citewise.erasure"
MAX_DELAY_SECONDS = 900  # SQS's DelaySeconds limit


class SqsErasureQueue:
    """An `ErasureQueue` that sends "continue the erasure of T" to the erasure function's queue."""

    def __init__(self, queue_url: str, *, client: Any) -> None:
        self._queue_url = queue_url
        self._client = client

    def send(self, tenant_id: str, *, delay_seconds: int = 0) -> None:
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=erasure_message(tenant_id),
                DelaySeconds=min(max(delay_seconds, 0), MAX_DELAY_SECONDS),
            )
        except (ClientError, BotoCoreError) as exc:
            raise clients.translate(exc, CitewiseError, "queue the tenant's erasure") from exc


def erasure_message(tenant_id: str) -> str:
    """The message body that runs (or continues) the tenant's erasure."""
    return json.dumps({"type": MESSAGE_TYPE, "tenant_id": validate_tenant_id(tenant_id)}, sort_keys=True)


def parse_erasure(body: str) -> str:
    """The tenant id of an erasure message; ValidationError for any other body (it can never succeed)."""
    try:
        message: Any = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValidationError("an erasure message is not JSON") from exc
    if not isinstance(message, dict) or message.get("type") != MESSAGE_TYPE or set(message) != {"type", "tenant_id"}:
        raise ValidationError("not an erasure message")
    return validate_tenant_id(str(message["tenant_id"]))
