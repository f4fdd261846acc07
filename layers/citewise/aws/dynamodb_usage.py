"""The UsageMeter on DynamoDB: one item per tenant and UTC day in the registry table.

Item layout: partition key `tenant_id` (the tenant, as for its documents), sort key `doc_id` =
`#usage#YYYY-MM-DD` (`USAGE_PREFIX` and the ISO day: never a document id, which is 32 hex digits, nor the
settings item `#settings`), one Number attribute per counter (`citewise.ports.usage.COUNTERS`). The item
has no `path`, so the sparse `by_path` index never holds it and no document listing returns it; no `body`,
so `DynamoRegistry.get` could not read it as a record.

`add` is one UpdateItem `ADD counter :n, ...`: DynamoDB applies an ADD atomically on the item, creating
the item and the attribute at 0 when missing, so parallel writers lose no increment and need no
condition or retry. `read` is one Query of the tenant's partition with the sort key BETWEEN the two
days' keys (ISO days sort as strings do), paged through LastEvaluatedKey.

Why the registry table rather than a table of its own: the issue asks for it, the tenant already keys
it, and erasing a tenant (or keeping its counters for billing) is then one partition's decision. The
cost: the query and MCP functions, which may only read the settings item there, are granted UpdateItem
on this table restricted (`dynamodb:Attributes`) to the key and the counter attributes, so they can
change no document record's attribute (docs/aws.md).
"""

from __future__ import annotations

from datetime import date
from typing import Any, Final

from citewise.aws import clients as aws
from citewise.aws import dynamodb_erase as erasing
from citewise.aws.dynamodb_partition import partition_query, query_items
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.usage import COUNTERS, DayUsage, UsageCounts

USAGE_PREFIX: Final = "#usage#"
"""The sort key (`doc_id`) of a tenant's usage item is this and the UTC day (`2026-11-27`)."""


class DynamoUsage:
    """A `UsageMeter` in the registry table (see the module docstring for the design)."""

    def __init__(self, table_name: str, *, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")

    def add(self, tenant_id: str, day: date, counts: UsageCounts) -> None:
        if counts.nonzero():
            aws.call(
                "DynamoDB UpdateItem",
                lambda: self._client.update_item(**add_request(self.table_name, tenant_id, day, counts)),
            )

    def read(self, tenant_id: str, from_day: date, to_day: date) -> list[DayUsage]:
        request = read_request(self.table_name, tenant_id, from_day, to_day)
        return [day_usage(item) for item in query_items(self._client, request)]

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        keys = erasing.tenant_keys(self._client, days_request(self.table_name, tenant_id), limit=limit)
        return erasing.delete_keys(self._client, self.table_name, keys)

    def count_tenant(self, tenant_id: str) -> int:
        return erasing.count(self._client, days_request(self.table_name, tenant_id))


def usage_key(tenant_id: str, day: date) -> dict[str, Any]:
    """The key of the tenant's usage item of `day`."""
    return {"tenant_id": {"S": tenant_id}, "doc_id": {"S": USAGE_PREFIX + day.isoformat()}}


def add_request(table_name: str, tenant_id: str, day: date, counts: UsageCounts) -> dict[str, Any]:
    """The UpdateItem adding each nonzero counter of `counts` to the day's item (created if absent)."""
    added = counts.nonzero()
    return {
        "TableName": table_name,
        "Key": usage_key(tenant_id, day),
        "UpdateExpression": "ADD " + ", ".join(f"#{name} :{name}" for name in added),
        "ExpressionAttributeNames": {f"#{name}": name for name in added},
        "ExpressionAttributeValues": {f":{name}": {"N": str(value)} for name, value in added.items()},
    }


def read_request(table_name: str, tenant_id: str, from_day: date, to_day: date) -> dict[str, Any]:
    """The Query of the tenant's usage items from `from_day` to `to_day`, both included, oldest first."""
    return {
        "TableName": table_name,
        "KeyConditionExpression": "#tenant = :tenant AND #key BETWEEN :from AND :to",
        "ExpressionAttributeNames": {"#tenant": "tenant_id", "#key": "doc_id"}
        | {f"#{name}": name for name in COUNTERS},
        "ExpressionAttributeValues": {
            ":tenant": {"S": tenant_id},
            ":from": {"S": USAGE_PREFIX + from_day.isoformat()},
            ":to": {"S": USAGE_PREFIX + to_day.isoformat()},
        },
        # Each counter named: the query functions' grant allows reading these attributes only (docs/aws.md).
        "ProjectionExpression": ", ".join(["#key", *(f"#{name}" for name in COUNTERS)]),
        "ConsistentRead": True,
        "ScanIndexForward": True,
    }


def days_request(table_name: str, tenant_id: str) -> dict[str, Any]:
    """The Query of every usage item of the tenant, strongly consistent."""
    return partition_query(table_name, tenant_id, USAGE_PREFIX, consistent=True)


def day_usage(item: dict[str, Any]) -> DayUsage:
    """A usage item as the port's `DayUsage`; attributes that are no counter (yet) are ignored."""
    counts = {name: int(item[name]["N"]) for name in COUNTERS if name in item}
    day = date.fromisoformat(item["doc_id"]["S"].removeprefix(USAGE_PREFIX))
    return DayUsage(day=day, counts=UsageCounts.model_validate(counts))
