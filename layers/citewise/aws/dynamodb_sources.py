"""The SourceRegistry on DynamoDB: a tenant's `#sources#{tenant}` partition of the registry table, and
one `#sources-due` partition the schedule reads.

Item layout (partition key `tenant_id`, sort key `doc_id`, as every item of the table):
- a source: `tenant_id` = `#sources#{tenant}`, `doc_id` = `s#{source_id}`, `body` (the Source as
  registered, JSON), and as the refreshes go `last_run` (JSON), `next_refresh` (ISO time), and while one
  runs `run_id`, `lease_until` (epoch seconds) and `run` (the RefreshLock, JSON, with its progress);
- a page: `doc_id` = `p#{source_id}#{sha256(url)[:32]}`, `body` (the PageState, JSON);
- the schedule's entry: `tenant_id` = `#sources-due`, `doc_id` = `{tenant}#{source_id}`, `due_at` (epoch
  seconds). A tenant id holds no `#`, so `acme#` never begins another tenant's entries.

Why a partition per tenant: a tenant's sources are one Query; its erasure empties one partition (and its
entries of the schedule's); the documents function is granted writes on `#sources#*` partitions only
(`dynamodb:LeadingKeys`), never on a document's item. Why one partition for the schedule: finding what is
due across every tenant is one Query of a few thousand small items at worst, never a Scan of the table.

Taking the refresh lock is one conditional UpdateItem (no run, or its lease ended), as are saving
progress and finishing (the run must still hold the source); a finish moves the schedule's entry in the
same TransactWriteItems, so a source is never left due with its last run recorded, nor the reverse.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import partial
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.aws.dynamodb_erase import count, delete_keys, tenant_keys
from citewise.aws.dynamodb_partition import partition_query, query_items
from citewise.domain.errors import CitewiseError, ConflictError, NotFoundError
from citewise.domain.sources import PageState, RefreshLock, RefreshRun, RefreshRunningError, Source, url_key
from citewise.ports.erasure import ERASE_BATCH

SOURCES_PREFIX: Final = "#sources#"
"""The partition key of a tenant's sources and pages is this prefix and the tenant id."""
DUE_PARTITION: Final = "#sources-due"
"""The partition of the schedule's entries, one per source of any tenant."""


class DynamoSources:
    """A `SourceRegistry` in the registry table (see the module docstring for the design)."""

    def __init__(self, table_name: str, *, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")

    def put_source(self, source: Source) -> None:
        item = {
            "Update": {
                "TableName": self.table_name,
                "Key": _source_key(source.tenant_id, source.source_id),
                "UpdateExpression": "SET #body = :body",
                "ConditionExpression": "attribute_not_exists(doc_id)",
                "ExpressionAttributeNames": {"#body": "body"},
                "ExpressionAttributeValues": {":body": {"S": source.model_dump_json()}},
            }
        }
        try:
            self._client.transact_write_items(
                TransactItems=[item, self._due_update(source.tenant_id, source.source_id, source.next_refresh_at)]
            )
        except ClientError as exc:
            if aws.error_code(exc) == "TransactionCanceledException":
                raise ConflictError("a source with this id exists", details={"id": source.source_id}) from exc
            raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc

    def source(self, tenant_id: str, source_id: str) -> Source | None:
        response = aws.call(
            "DynamoDB GetItem",
            partial(
                self._client.get_item,
                TableName=self.table_name,
                Key=_source_key(tenant_id, source_id),
                ConsistentRead=True,
            ),
        )
        item = response.get("Item")
        return _source(item) if item else None

    def tenant_sources(self, tenant_id: str) -> list[Source]:
        found = [_source(item) for item in self._items(_partition(tenant_id), "s#")]
        return sorted(found, key=lambda source: (source.created_at, source.source_id))

    def delete_source(self, tenant_id: str, source_id: str) -> bool:
        if self.source(tenant_id, source_id) is None:
            return False
        pages = partition_query(self.table_name, _partition(tenant_id), f"p#{source_id}#")
        while keys := tenant_keys(self._client, pages, limit=ERASE_BATCH):
            delete_keys(self._client, self.table_name, keys)
        delete_keys(self._client, self.table_name, [_due_key(tenant_id, source_id), _source_key(tenant_id, source_id)])
        return True

    def due(self, now: datetime, *, limit: int) -> list[tuple[str, str]]:
        request = partition_query(self.table_name, DUE_PARTITION, consistent=True)
        request["FilterExpression"] = "due_at <= :now"
        request["ExpressionAttributeValues"][":now"] = {"N": _epoch(now)}
        found: list[tuple[str, str]] = []
        for item in query_items(self._client, request):
            tenant_id, source_id = item["doc_id"]["S"].rsplit("#", 1)
            found.append((tenant_id, source_id))
            if len(found) >= limit:
                break
        return found

    def start_run(self, tenant_id: str, source_id: str, lock: RefreshLock, now: datetime) -> None:
        hold = {
            "TableName": self.table_name,
            "Key": _source_key(tenant_id, source_id),
            "UpdateExpression": "SET run_id = :run, lease_until = :lease, #run = :lock",
            "ConditionExpression": "attribute_exists(doc_id) AND (attribute_not_exists(run_id) OR lease_until <= :now)",
            "ExpressionAttributeNames": {"#run": "run"},
            "ExpressionAttributeValues": {
                ":run": {"S": lock.run.run_id},
                ":lease": {"N": _epoch(lock.lease_until)},
                ":lock": {"S": lock.model_dump_json()},
                ":now": {"N": _epoch(now)},
            },
        }
        # The schedule's entry moves to the lease's end in the same transaction: a running source is not
        # due (the schedule's ticks skip it), and one whose run crashed is due again when its lease ends.
        move = self._due_update(tenant_id, source_id, lock.lease_until)
        try:
            self._client.transact_write_items(TransactItems=[{"Update": hold}, move])
        except ClientError as exc:
            if aws.error_code(exc) != "TransactionCanceledException":
                raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc
            current = self.source(tenant_id, source_id)
            if current is None:
                raise NotFoundError("no such source", details={"id": source_id}) from exc
            holder = current.running.run.run_id if current.running else ""
            raise RefreshRunningError(source_id, holder) from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc

    def save_run(self, tenant_id: str, source_id: str, lock: RefreshLock) -> bool:
        return self._held_update(
            {
                "TableName": self.table_name,
                "Key": _source_key(tenant_id, source_id),
                "UpdateExpression": "SET lease_until = :lease, #run = :lock",
                "ConditionExpression": "run_id = :run",
                "ExpressionAttributeNames": {"#run": "run"},
                "ExpressionAttributeValues": {
                    ":run": {"S": lock.run.run_id},
                    ":lease": {"N": _epoch(lock.lease_until)},
                    ":lock": {"S": lock.model_dump_json()},
                },
            },
            transact=False,
        )

    def finish_run(self, tenant_id: str, source_id: str, run: RefreshRun, next_refresh_at: datetime) -> bool:
        finish = {
            "TableName": self.table_name,
            "Key": _source_key(tenant_id, source_id),
            "UpdateExpression": "SET last_run = :last, next_refresh = :next REMOVE run_id, lease_until, #run",
            "ConditionExpression": "run_id = :run",
            "ExpressionAttributeNames": {"#run": "run"},
            "ExpressionAttributeValues": {
                ":run": {"S": run.run_id},
                ":last": {"S": run.model_dump_json()},
                ":next": {"S": next_refresh_at.isoformat()},
            },
        }
        return self._held_update(
            {"TransactItems": [{"Update": finish}, self._due_update(tenant_id, source_id, next_refresh_at)]},
            transact=True,
        )

    def pages(self, tenant_id: str, source_id: str) -> list[PageState]:
        items = self._items(_partition(tenant_id), f"p#{source_id}#")
        return [PageState.model_validate_json(item["body"]["S"]) for item in items]

    def put_pages(self, tenant_id: str, source_id: str, pages: Iterable[PageState]) -> None:
        for page in pages:
            request = {
                "TableName": self.table_name,
                "Key": _page_key(tenant_id, source_id, page.url),
                "UpdateExpression": "SET #body = :body",
                "ExpressionAttributeNames": {"#body": "body"},
                "ExpressionAttributeValues": {":body": {"S": page.model_dump_json()}},
            }
            aws.call("DynamoDB UpdateItem", partial(self._client.update_item, **request))

    def delete_pages(self, tenant_id: str, source_id: str, urls: Iterable[str]) -> None:
        delete_keys(self._client, self.table_name, [_page_key(tenant_id, source_id, url) for url in urls])

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        keys = tenant_keys(self._client, self._due(tenant_id), limit=limit)
        keys += tenant_keys(self._client, self._everything(tenant_id), limit=limit - len(keys))
        return delete_keys(self._client, self.table_name, keys)

    def count_tenant(self, tenant_id: str) -> int:
        return count(self._client, self._everything(tenant_id)) + count(self._client, self._due(tenant_id))

    def _due_update(self, tenant_id: str, source_id: str, at: datetime) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table_name,
                "Key": _due_key(tenant_id, source_id),
                "UpdateExpression": "SET due_at = :due",
                "ExpressionAttributeValues": {":due": {"N": _epoch(at)}},
            }
        }

    def _held_update(self, request: dict[str, Any], *, transact: bool) -> bool:
        """Run a write conditioned on the run holding the source; False when it no longer does."""
        action = "TransactWriteItems" if transact else "UpdateItem"
        try:
            if transact:
                self._client.transact_write_items(**request)
            else:
                self._client.update_item(**request)
        except ClientError as exc:
            if aws.error_code(exc) in ("ConditionalCheckFailedException", "TransactionCanceledException"):
                return False
            raise aws.translate(exc, CitewiseError, f"DynamoDB {action}") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, f"DynamoDB {action}") from exc
        return True

    def _items(self, partition: str, prefix: str) -> Iterator[dict[str, Any]]:
        """The items of `partition` under `prefix`, strongly consistent: a refresh reads what the last one
        saved, an admin's listing what was just registered."""
        return query_items(self._client, partition_query(self.table_name, partition, prefix, consistent=True))

    def _everything(self, tenant_id: str) -> dict[str, Any]:
        """The Query of every item of the tenant's sources partition (sources and their pages)."""
        return partition_query(self.table_name, _partition(tenant_id), consistent=True)

    def _due(self, tenant_id: str) -> dict[str, Any]:
        """The Query of the tenant's entries in the due partition, which all tenants share."""
        return partition_query(self.table_name, DUE_PARTITION, f"{tenant_id}#", consistent=True)


def _partition(tenant_id: str) -> str:
    return f"{SOURCES_PREFIX}{tenant_id}"


def _source_key(tenant_id: str, source_id: str) -> dict[str, Any]:
    return {"tenant_id": {"S": _partition(tenant_id)}, "doc_id": {"S": f"s#{source_id}"}}


def _page_key(tenant_id: str, source_id: str, url: str) -> dict[str, Any]:
    return {"tenant_id": {"S": _partition(tenant_id)}, "doc_id": {"S": f"p#{source_id}#{url_key(url)}"}}


def _due_key(tenant_id: str, source_id: str) -> dict[str, Any]:
    return {"tenant_id": {"S": DUE_PARTITION}, "doc_id": {"S": f"{tenant_id}#{source_id}"}}


def _source(item: dict[str, Any]) -> Source:
    """The Source an item holds: as registered, with what its refreshes wrote since."""
    update: dict[str, Any] = {}
    if "last_run" in item:
        update["last_run"] = RefreshRun.model_validate_json(item["last_run"]["S"])
    if "next_refresh" in item:
        update["next_refresh_at"] = datetime.fromisoformat(item["next_refresh"]["S"])
    if "run" in item:
        update["running"] = RefreshLock.model_validate_json(item["run"]["S"])
    return Source.model_validate_json(item["body"]["S"]).model_copy(update=update)


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))
