"""Erasing a tenant's items of the registry table: bounded pages of keys, deleted in batches.

Shared by the registry (`citewise.aws.dynamodb`) and the usage meter (`citewise.aws.dynamodb_usage`),
which keep their items in the same partition, each erasing its own. Only the erasure function's role
may delete items of the table (`BatchWriteItem`, `DeleteItem`); every other role writes by UpdateItem.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import CitewiseError, ThrottledError

BATCH_WRITE_ITEMS = 25
"""DynamoDB's limit on the requests of one BatchWriteItem."""
_UNPROCESSED_ROUNDS = 8


def tenant_keys(
    client: Any,
    request: dict[str, Any],
    *,
    limit: int,
    keep: Callable[[str], bool] = lambda _: True,
) -> list[dict[str, Any]]:
    """Up to `limit` keys returned by the Query `request` (keys only) whose sort key `keep` accepts."""
    request = dict(request, ProjectionExpression="#tenant, #key", Limit=limit)
    request["ExpressionAttributeNames"] = request.get("ExpressionAttributeNames", {}) | {
        "#tenant": "tenant_id",
        "#key": "doc_id",
    }
    keys: list[dict[str, Any]] = []
    while len(keys) < limit:
        response = call("Query", lambda: client.query(**request))
        keys.extend(item for item in response.get("Items", []) if keep(item["doc_id"]["S"]))
        if "LastEvaluatedKey" not in response:
            break
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    return keys[:limit]


def count(client: Any, request: dict[str, Any]) -> int:
    """The number of items the Query `request` matches (`Select=COUNT`, paged)."""
    request = dict(request, Select="COUNT")
    total = 0
    while True:
        response = call("Query", lambda: client.query(**request))
        total += int(response.get("Count", 0))
        if "LastEvaluatedKey" not in response:
            return total
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def delete_keys(client: Any, table_name: str, keys: Sequence[dict[str, Any]]) -> int:
    """Delete the items of `keys` in BatchWriteItem calls, retrying what DynamoDB leaves unprocessed
    (with a growing pause); ThrottledError if some is still left after that. The number of keys."""
    for start in range(0, len(keys), BATCH_WRITE_ITEMS):
        pending: dict[str, Any] = {
            table_name: [{"DeleteRequest": {"Key": key}} for key in keys[start : start + BATCH_WRITE_ITEMS]]
        }
        for attempt in range(_UNPROCESSED_ROUNDS):
            response = call("BatchWriteItem", partial(client.batch_write_item, RequestItems=pending))
            pending = response.get("UnprocessedItems") or {}
            if not pending:
                break
            time.sleep(min(1.0, 0.05 * 2**attempt))
        else:
            raise ThrottledError("DynamoDB left deletes unprocessed; retry later", details={"table": table_name})
    return len(keys)


def call(action: str, operation: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`operation()`, its failures as CitewiseError (throttling as ThrottledError)."""
    try:
        return operation()
    except (ClientError, BotoCoreError) as exc:
        raise aws.translate(exc, CitewiseError, f"DynamoDB {action}") from exc
