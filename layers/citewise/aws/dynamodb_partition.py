"""Reading one partition of the registry table: the Query every store that keeps items there builds.

The registry, conversations, feedback, sources, credentials and usage stores each keep their items in
partitions of the one registry table (partition key `tenant_id`, sort key `doc_id`, each store with a
partition prefix of its own). They read a partition, or the sort keys under a prefix in it, the same way
and page through it the same way: one request shape and one pager, so a change to how the table is read
(a projection, consistency) is made once.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from citewise.aws import clients as aws


def partition_query(
    table_name: str, partition: str, prefix: str | None = None, *, consistent: bool = False
) -> dict[str, Any]:
    """The Query of the partition `partition` (its sort keys starting with `prefix`, if given), strongly
    consistent with `consistent` (what a read-modify-write, a count or an erasure needs)."""
    names = {"#partition": "tenant_id"}
    values = {":partition": {"S": partition}}
    condition = "#partition = :partition"
    if prefix is not None:
        condition += " AND begins_with(#sort, :prefix)"
        names["#sort"] = "doc_id"
        values[":prefix"] = {"S": prefix}
    request: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if consistent:
        request["ConsistentRead"] = True
    return request


def query_items(client: Any, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every item the Query `request` returns, page after page (`request` itself is not changed)."""
    request = dict(request)
    while True:
        response = aws.call("DynamoDB Query", partial(client.query, **request))
        yield from response.get("Items", [])
        if "LastEvaluatedKey" not in response:
            return
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
