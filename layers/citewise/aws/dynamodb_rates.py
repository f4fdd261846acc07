"""The RateLimiter on DynamoDB: one item per tenant in the registry table, shared by every Lambda instance.

Item: partition key `tenant_id`, sort key `doc_id` = `RATE_KEY` (`#rate`, never a document id), one Number
attribute `tat_us`: the bucket's "theoretical arrival time" in microseconds (`citewise.ports.quotas.admit`).
No `path` and no `body`: no listing and no registry read ever sees it.

Taking a token is one conditional UpdateItem, which DynamoDB applies atomically, so parallel instances
never admit more than the bucket holds. GCRA moves `tat` to `max(tat, now) + period`, which one update
expression cannot say, so there are two shapes, each guarded by the condition that makes it the right one:
- a bucket in use (`now < tat <= now + (burst - 1) * period`): `SET tat_us = tat_us + :period`;
- an idle bucket (`tat <= now`, or no item yet): `SET tat_us = :now + :period`.
The shape is chosen from the last `tat` this process saw of the tenant; when its condition fails (another
instance moved the bucket), one GetItem of `tat_us` says where the bucket is, and the request is admitted
with the other shape or refused with the time to wait. So a tenant's steady traffic costs one write per
request, a busy burst across instances a read and a second write now and then; no read happens before an
admitted request. (No `ReturnValuesOnConditionCheckFailure`: the role's grant allows `ReturnValues` NONE
only, docs/aws.md.)
"""

from __future__ import annotations

import threading
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import CitewiseError, ThrottledError
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.quotas import MINUTE_US, admit

RATE_KEY: Final = "#rate"
"""The sort key (`doc_id`) of a tenant's token bucket item."""
TAT_ATTRIBUTE: Final = "tat_us"
MAX_ATTEMPTS: Final = 4


class DynamoRates:
    """A `RateLimiter` in the registry table (see the module docstring for the design)."""

    def __init__(self, table_name: str, *, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")
        self._seen: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def take(self, tenant_id: str, *, per_minute: int, burst: int, now_us: int) -> int:
        period = max(1, MINUTE_US // per_minute)
        with self._lock:
            tat = self._seen.get(tenant_id)
        for _ in range(MAX_ATTEMPTS):
            new_tat, wait = admit(tat, now_us, period, burst)
            if new_tat is None:
                self._remember(tenant_id, tat)
                return wait
            try:
                self._client.update_item(**take_request(self.table_name, tenant_id, tat, now_us, period, burst))
                self._remember(tenant_id, new_tat)
                return 0
            except ClientError as exc:
                if aws.error_code(exc) != "ConditionalCheckFailedException":
                    raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
            except BotoCoreError as exc:
                raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
            tat = self._read(tenant_id)
        raise ThrottledError("the tenant's rate bucket kept changing under this request; retry")

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        try:
            response = self._client.delete_item(
                TableName=self.table_name, Key=rate_key(tenant_id), ReturnValues="ALL_OLD"
            )
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB DeleteItem") from exc
        self._remember(tenant_id, None)
        return 1 if response.get("Attributes") else 0

    def count_tenant(self, tenant_id: str) -> int:
        return 0 if self._read(tenant_id) is None else 1

    def _read(self, tenant_id: str) -> int | None:
        try:
            response = self._client.get_item(
                TableName=self.table_name,
                Key=rate_key(tenant_id),
                ConsistentRead=True,
                ProjectionExpression="#tat",
                ExpressionAttributeNames={"#tat": TAT_ATTRIBUTE},
            )
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB GetItem") from exc
        item = response.get("Item")
        return int(item[TAT_ATTRIBUTE]["N"]) if item and TAT_ATTRIBUTE in item else None

    def _remember(self, tenant_id: str, tat: int | None) -> None:
        with self._lock:
            self._seen[tenant_id] = tat


def rate_key(tenant_id: str) -> dict[str, Any]:
    """The key of the tenant's token bucket item."""
    return {"tenant_id": {"S": tenant_id}, "doc_id": {"S": RATE_KEY}}


def take_request(
    table_name: str, tenant_id: str, tat: int | None, now_us: int, period: int, burst: int
) -> dict[str, Any]:
    """The UpdateItem taking one token from a bucket believed to stand at `tat` (module docstring): the
    busy shape if `tat` is ahead of `now_us`, else the idle one; each is refused by DynamoDB if the bucket
    is not where its shape applies."""
    request: dict[str, Any] = {
        "TableName": table_name,
        "Key": rate_key(tenant_id),
        "ExpressionAttributeNames": {"#tat": TAT_ATTRIBUTE},
    }
    if tat is not None and tat > now_us:
        return request | {
            "UpdateExpression": "SET #tat = #tat + :period",
            "ConditionExpression": "#tat > :now AND #tat <= :full",
            "ExpressionAttributeValues": {
                ":period": {"N": str(period)},
                ":now": {"N": str(now_us)},
                ":full": {"N": str(now_us + (burst - 1) * period)},
            },
        }
    return request | {
        "UpdateExpression": "SET #tat = :next",
        "ConditionExpression": "attribute_not_exists(#tat) OR #tat <= :now",
        "ExpressionAttributeValues": {":next": {"N": str(now_us + period)}, ":now": {"N": str(now_us)}},
    }
