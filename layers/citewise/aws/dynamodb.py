"""The DocumentRegistry on DynamoDB: one item per document, listed in path order through a GSI.

Table design (`TABLE_SCHEMA`, shared by the tests and the CDK construct)
--------------------------------------------------------------------------
Base table, partition key `tenant_id` (S), sort key `doc_id` (S): every read and write names its tenant
in the key, so no request can reach another tenant's items, and `get` is a strongly consistent point
read (the pipeline's idempotency check must see its own last write).

Attributes of an item:
- `path` (S): the document path, the sort key of the `by_path` GSI.
- `owner`, `visibility`, `status`, `source` (S): what listings filter on. Items written before `source`
  became an attribute lack it until their next write; the source filter lets them through and the
  listing checks their body instead, so old items are neither lost nor wrongly listed.
- `version` (S): the object version the record describes; a terminal status must name the pending one.
- `updated_us` (N): `updated_at` in microseconds since the epoch, the ordering key of `put`.
- `body` (S): the whole Document as JSON. The pydantic model stays the one serialisation (shared with
  the local registry) instead of a second attribute-by-attribute mapping that could drift from it.
- `deleted_us` (N), `expires_at` (N): only on a delete's tombstone (below).

GSI `by_path`: partition key `tenant_id`, sort key `path`, projection ALL (filters need `status`,
`source`, `owner` and `visibility`; listings need `body`). A GSI rather than an LSI: an LSI would make
listings strongly consistent but caps a tenant's item collection at 10 GB and stops DynamoDB from
splitting a busy tenant's partition; listings may lag a write by a moment, `get` never does.

Listing pages through the GSI with `begins_with(path, prefix)` in the key condition and the status,
source and visibility filters in a FilterExpression. DynamoDB's `Limit` counts items before filtering, so
one page may take several queries; the cursor is built from the last item *returned* (not DynamoDB's
LastEvaluatedKey, which may lie beyond items read but not returned) as base64url JSON of that
ExclusiveStartKey, and is checked on input: it must decode, name the caller's tenant and lie inside
the requested prefix, else ValidationError.

Stored totals (`stored_totals`): one item per tenant, sort key `TOTALS_KEY` (`#totals`), with the Number
attributes `documents`, `chunks` and `bytes`. Each record carries what it adds (`stored_chunks`,
`stored_bytes`; a record without them, written before the totals existed or a tombstone, adds nothing). A
`put` or `delete` that changes what the record adds is one TransactWriteItems: the record's conditional
update, which also requires the record to still add what a consistent GetItem read a moment before, and
an `ADD` of the difference to the totals item. Both happen or neither, so no crash, retry or parallel
writer can lose or double a change; a writer whose read went stale (another writer changed the record in
between) is cancelled by that condition and tries again from a fresh read, and a transaction that
collides with another on the totals item (`TransactionConflict`) is retried with a short backoff. Reading
the totals is one GetItem. Why counters and not a count when asked: counting would read every record of
the tenant (a Query of the whole partition, billed by the size of the items, bodies included) on every
upload that checks a storage quota. The price: a write that changes the totals costs a GetItem and a
two-item transaction (DynamoDB bills a transactional write twice) instead of one UpdateItem, and writes
to one tenant's records serialise on its totals item (a few hundred a second at most, far above any
ingest rate). Records written before the totals existed count from their next write.

Ordering: the port's rules (`citewise.ports.registry`) as one conditional UpdateItem, so the check and
the write are atomic; when the condition fails, the stored item (returned with the failure) says which
rule refused it.

Tombstones: `delete` is an UpdateItem too (the functions are never granted DeleteItem). It removes the
record's attributes but keeps the key, `version` and `updated_us` (the deleted record's ordering key),
and sets `deleted_us` (the delete's time; a second, older delete leaves it as it is) and `expires_at`.
Without `path` the item drops out of the sparse `by_path` index, so listings never see it; without
`body`, `get` reads it as no record. A later `put` must be newer than `deleted_us` (its condition), and
removes both tombstone attributes. `expires_at` (epoch seconds, `TTL_ATTRIBUTE`, enabled on the table by
the CDK construct) lets DynamoDB's TTL remove the tombstone after the retention, which is far longer
than the queue keeps a message; until TTL gets to it an expired tombstone still refuses older writes.

A tenant's settings document (`citewise.domain.tenant_settings`) is one more item of the tenant's
partition, under the reserved sort key `SETTINGS_KEY` (`#settings`, never a document id: those are 32 hex
digits), its JSON in the attribute `settings`. It has no `path`, so the sparse `by_path` index never holds
it and no listing returns it. The query function may read exactly that attribute (an IAM condition on
`dynamodb:Attributes`), nothing of a document item.

The tenants' catalogue (the operator's listing, `list_tenants`) is one partition of its own,
`TENANTS_PARTITION` (`#tenants`, never a tenant id: those start with a letter or digit), with one item
per tenant whose sort key is the tenant id. A PENDING `put` (every record's first write) writes it
before the record, with `if_not_exists`, so no tenant has a record without its catalogue item, and
listing tenants is a Query of one partition in id order, never a Scan of every document. Its cost: one
more write of a few bytes per ingested version. Tenants whose records all predate the catalogue appear at
their next ingest.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.aws import dynamodb_erase as erasing
from citewise.aws.dynamodb_partition import partition_query
from citewise.aws.dynamodb_rates import RATE_KEY
from citewise.aws.dynamodb_usage import USAGE_PREFIX
from citewise.domain.errors import CitewiseError, ThrottledError, ValidationError
from citewise.domain.models import Document, DocumentStatus, Visibility
from citewise.domain.quotas import QuotaOverrides
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports import cursors
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.registry import (
    TERMINAL,
    TOMBSTONE_RETENTION,
    DocumentPage,
    StaleVersionError,
    StoredTotals,
    TenantPage,
    TenantSummary,
    Tombstone,
    contribution,
    microseconds,
    moment,
    refused_write,
)

PATH_INDEX: Final = "by_path"
TTL_ATTRIBUTE: Final = "expires_at"
"""The table's time-to-live attribute: set on tombstones only, never on a document's record."""
SETTINGS_KEY: Final = "#settings"
"""The sort key (`doc_id`) of a tenant's settings item."""
SETTINGS_ATTRIBUTE: Final = "settings"
TOTALS_KEY: Final = "#totals"
"""The sort key (`doc_id`) of a tenant's stored totals item."""
QUOTAS_KEY: Final = "#quotas"
"""The sort key (`doc_id`) of a tenant's quota overrides item (attribute `QUOTAS_ATTRIBUTE`)."""
QUOTAS_ATTRIBUTE: Final = "quotas"
MAX_COUNTED_ATTEMPTS: Final = 8
"""Tries of a write that changes the totals, against stale reads and transaction conflicts."""
TENANTS_PARTITION: Final = "#tenants"
"""The partition key of the tenants' catalogue: one item per tenant, its id as the sort key."""
TABLE_SCHEMA: Final[dict[str, Any]] = {
    "KeySchema": [
        {"AttributeName": "tenant_id", "KeyType": "HASH"},
        {"AttributeName": "doc_id", "KeyType": "RANGE"},
    ],
    "AttributeDefinitions": [
        {"AttributeName": "tenant_id", "AttributeType": "S"},
        {"AttributeName": "doc_id", "AttributeType": "S"},
        {"AttributeName": "path", "AttributeType": "S"},
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": PATH_INDEX,
            "KeySchema": [
                {"AttributeName": "tenant_id", "KeyType": "HASH"},
                {"AttributeName": "path", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "ALL"},
        }
    ],
    "BillingMode": "PAY_PER_REQUEST",
}
"""Keyword arguments of `CreateTable` (add `TableName`); the CDK construct mirrors them."""

MAX_LIMIT = 1000
MAX_PATH_BYTES = 1024  # DynamoDB's limit on a sort key value, here the `by_path` index key
# Placeholders of the attributes a write sets; the value placeholder is the same name with ':'.
_NAMES: Final = {
    "#path": "path",
    "#owner": "owner",
    "#visibility": "visibility",
    "#status": "status",
    "#source": "source",
    "#version": "version",
    "#updated": "updated_us",
    "#body": "body",
    "#deleted": "deleted_us",
    "#expires": TTL_ATTRIBUTE,
    "#stored_chunks": "stored_chunks",
    "#stored_bytes": "stored_bytes",
}
_RECORD_ONLY: Final = (
    "#path",
    "#owner",
    "#visibility",
    "#status",
    "#source",
    "#body",
    "#stored_chunks",
    "#stored_bytes",
)
"""What a delete removes: the item keeps its key, `version` and `updated_us` as the tombstone."""


class DynamoRegistry:
    """A `DocumentRegistry` in one DynamoDB table (see the module docstring for the design)."""

    def __init__(
        self, table_name: str, *, client: Any | None = None, tombstone_retention: timedelta = TOMBSTONE_RETENTION
    ) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")
        self._retention = tombstone_retention

    def get(self, tenant_id: str, doc_id: str) -> Document | None:
        response = self._call(
            "GetItem",
            self._client.get_item,
            TableName=self.table_name,
            Key=_key(tenant_id, doc_id),
            ConsistentRead=True,
            ProjectionExpression="#body",
            ExpressionAttributeNames={"#body": "body"},
        )
        item = response.get("Item")
        return _document(item) if item else None  # a tombstone has no body: an empty projection

    def put(self, document: Document) -> None:
        """Create or replace the record unless the stored one is newer (by `updated_at`) or the status
        change is not allowed; raises StaleVersionError then."""
        if len(document.path.encode()) > MAX_PATH_BYTES:
            raise ValidationError(
                f"path is longer than {MAX_PATH_BYTES} UTF-8 bytes, the limit of an index sort key",
                details={"field": "path"},
            )
        if document.status is DocumentStatus.PENDING:
            self._call(
                "UpdateItem",
                self._client.update_item,
                **catalogue_request(self.table_name, document.tenant_id, document.updated_at),
            )
        refusal = self._counted_write(
            document.tenant_id,
            document.doc_id,
            update_request(self.table_name, document),
            contribution(document),
            lambda item: _conflict(document, item),
        )
        if refusal is not None:
            raise refusal

    def delete(self, tenant_id: str, doc_id: str, *, deleted_at: datetime) -> None:
        # A refusal means a later delete's tombstone is there already: this one has nothing to add.
        self._counted_write(
            tenant_id,
            doc_id,
            delete_request(self.table_name, tenant_id, doc_id, deleted_at, self._retention),
            StoredTotals(),
            lambda _: None,
        )

    def _counted_write(
        self,
        tenant_id: str,
        doc_id: str,
        update: dict[str, Any],
        added: StoredTotals,
        refusal_of: Callable[[dict[str, Any] | None], StaleVersionError | None],
    ) -> StaleVersionError | None:
        """Apply `update` (a record's conditional write, which leaves the record adding `added` to the
        totals) and the change of the totals together (module docstring). Returns the refusal its own
        condition gave, as `refusal_of` reads the stored item (None: nothing to report)."""
        for attempt in range(MAX_COUNTED_ATTEMPTS):
            adds = self._contribution(tenant_id, doc_id)
            request = counted_request(self.table_name, tenant_id, update, adds, added)
            try:
                if "TransactItems" in request:
                    self._client.transact_write_items(**request)
                else:
                    self._client.update_item(**request)
                return None
            except ClientError as exc:
                code = aws.error_code(exc)
                if code == "ConditionalCheckFailedException":
                    item = exc.response.get("Item")
                elif code == "TransactionCanceledException":
                    reasons = exc.response.get("CancellationReasons") or [{}]
                    if reasons[0].get("Code") != "ConditionalCheckFailed":  # a conflict on the totals item
                        time.sleep(random.uniform(0, 0.01 * 2**attempt))  # noqa: S311 - jitter, not secrecy
                        continue
                    item = reasons[0].get("Item")
                else:
                    raise aws.translate(exc, CitewiseError, "DynamoDB write") from exc
                if _adds(item) == adds:  # the record's own rule refused it, not a stale read
                    return refusal_of(item)
            except BotoCoreError as exc:
                raise aws.translate(exc, CitewiseError, "DynamoDB write") from exc
        raise ThrottledError(
            "the registry record kept changing under this write; retry", details={"doc_id": doc_id, "reason": "busy"}
        )

    def _contribution(self, tenant_id: str, doc_id: str) -> StoredTotals:
        """What the stored item adds to the totals now (a consistent read of two attributes)."""
        response = self._call(
            "GetItem",
            self._client.get_item,
            TableName=self.table_name,
            Key=_key(tenant_id, doc_id),
            ConsistentRead=True,
            ProjectionExpression="#stored_chunks, #stored_bytes",
            ExpressionAttributeNames={name: _NAMES[name] for name in ("#stored_chunks", "#stored_bytes")},
        )
        return _adds(response.get("Item"))

    def stored_totals(self, tenant_id: str) -> StoredTotals:
        response = self._call(
            "GetItem",
            self._client.get_item,
            TableName=self.table_name,
            Key=_key(tenant_id, TOTALS_KEY),
            ConsistentRead=True,
        )
        item = response.get("Item") or {}
        return StoredTotals.model_validate({name: int(item[name]["N"]) for name in _TOTALS if name in item})

    def tenant_quotas(self, tenant_id: str) -> QuotaOverrides | None:
        response = self._call(
            "GetItem",
            self._client.get_item,
            TableName=self.table_name,
            Key=_key(tenant_id, QUOTAS_KEY),
            ProjectionExpression="#quotas",
            ExpressionAttributeNames={"#quotas": QUOTAS_ATTRIBUTE},
        )
        item = response.get("Item")
        return QuotaOverrides.model_validate_json(item[QUOTAS_ATTRIBUTE]["S"]) if item else None

    def put_tenant_quotas(self, tenant_id: str, overrides: QuotaOverrides) -> None:
        self._call(
            "UpdateItem",
            self._client.update_item,
            TableName=self.table_name,
            Key=_key(tenant_id, QUOTAS_KEY),
            UpdateExpression="SET #quotas = :quotas",
            ExpressionAttributeNames={"#quotas": QUOTAS_ATTRIBUTE},
            ExpressionAttributeValues={":quotas": {"S": overrides.model_dump_json(exclude_none=True)}},
        )

    def list(
        self,
        tenant_id: str,
        *,
        visible_to: str | None = None,
        status: DocumentStatus | None = None,
        source: str | None = None,
        path_prefix: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> DocumentPage:
        if not 1 <= limit <= MAX_LIMIT:
            raise ValidationError(f"limit must be between 1 and {MAX_LIMIT}", details={"field": "limit"})
        request = query_request(
            self.table_name,
            tenant_id,
            visible_to=visible_to,
            status=status,
            source=source,
            path_prefix=path_prefix or None,
            limit=limit,
        )
        if cursor is not None:
            request["ExclusiveStartKey"] = decode_cursor(cursor, tenant_id, path_prefix or None)
        documents: list[Document] = []
        # Filters apply after `Limit`, so keep reading until one item beyond the page shows there is more.
        while True:
            response = self._call("Query", self._client.query, **request)
            found = (_document(item) for item in response.get("Items", []))
            # Items written before `source` was an attribute pass the filter; their body decides.
            documents.extend(d for d in found if source is None or d.source == source)
            last_key = response.get("LastEvaluatedKey")
            if len(documents) > limit or last_key is None:
                break
            request["ExclusiveStartKey"] = last_key
        next_cursor = cursors.encode(documents[limit - 1]) if len(documents) > limit else None
        return DocumentPage(items=documents[:limit], next_cursor=next_cursor)

    def list_tenants(self, *, limit: int = 100, cursor: str | None = None) -> TenantPage:
        if not 1 <= limit <= MAX_LIMIT:
            raise ValidationError(f"limit must be between 1 and {MAX_LIMIT}", details={"field": "limit"})
        request = tenants_request(self.table_name, limit=limit, after=cursors.decode_tenant(cursor) if cursor else None)
        tenant_ids: list[str] = []
        # `Limit` bounds one response by size too (1 MB): read on until a page and one more, or the end.
        while True:
            response = self._call("Query", self._client.query, **request)
            tenant_ids.extend(item["doc_id"]["S"] for item in response.get("Items", []))
            last_key = response.get("LastEvaluatedKey")
            if len(tenant_ids) > limit or last_key is None:
                break
            request["ExclusiveStartKey"] = last_key
        items = [TenantSummary(tenant_id=tenant_id) for tenant_id in tenant_ids[:limit]]
        next_cursor = cursors.encode_tenant(items[-1].tenant_id) if len(tenant_ids) > limit else None
        return TenantPage(items=items, next_cursor=next_cursor)

    # --- the tenant's settings document (module docstring) ---------------------------------------

    def tenant_settings(self, tenant_id: str) -> TenantSettings | None:
        response = self._call("GetItem", self._client.get_item, **settings_get_request(self.table_name, tenant_id))
        item = response.get("Item")
        return TenantSettings.model_validate_json(item[SETTINGS_ATTRIBUTE]["S"]) if item else None

    def put_tenant_settings(self, tenant_id: str, settings: TenantSettings) -> None:
        self._call("UpdateItem", self._client.update_item, **settings_put_request(self.table_name, tenant_id, settings))

    # --- erasing a tenant (`citewise.ports.erasure`): only the erasure function may delete items ---------

    def has_tenant(self, tenant_id: str) -> bool:
        response = self._call(
            "GetItem",
            self._client.get_item,
            TableName=self.table_name,
            Key=_key(TENANTS_PARTITION, tenant_id),
            ConsistentRead=True,  # an erasure's count must see its own delete of the item
            ProjectionExpression="#key",
            ExpressionAttributeNames={"#key": "doc_id"},
        )
        return "Item" in response

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete up to `limit` items of the tenant's partition, its usage counters left to `DynamoUsage`;
        the catalogue item once the partition holds nothing else."""
        # strongly consistent: an erasure's proof must see its own deletes
        request = partition_query(self.table_name, tenant_id, consistent=True)
        keys = erasing.tenant_keys(self._client, request, limit=limit, keep=_erasable)
        if keys:
            return erasing.delete_keys(self._client, self.table_name, keys)
        response = self._call(
            "DeleteItem",
            self._client.delete_item,
            TableName=self.table_name,
            Key=_key(TENANTS_PARTITION, tenant_id),
            ReturnValues="ALL_OLD",
        )
        return 1 if "Attributes" in response else 0

    def count_tenant(self, tenant_id: str) -> int:
        request = partition_query(self.table_name, tenant_id, consistent=True)
        # What `_erasable` keeps is not the registry's to count
        request["FilterExpression"] = "NOT begins_with(#key, :usage) AND #key <> :rate"
        request["ExpressionAttributeNames"]["#key"] = "doc_id"
        request["ExpressionAttributeValues"] |= {":usage": {"S": USAGE_PREFIX}, ":rate": {"S": RATE_KEY}}
        return erasing.count(self._client, request) + int(self.has_tenant(tenant_id))

    @staticmethod
    def _call(action: str, operation: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        # No REGISTRY error code exists and none is needed: a failing registry is an internal fault
        # (INTERNAL_ERROR, retried by the queue); throttling still becomes ThrottledError.
        try:
            return operation(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, CitewiseError, f"DynamoDB {action}") from exc


# --- request builders: pure functions, checked as plain dicts by the tests ----------------------------


def update_request(table_name: str, document: Document) -> dict[str, Any]:
    """The conditional UpdateItem that writes `document` (see the module docstring for the rules)."""
    values: dict[str, Any] = {
        ":path": {"S": document.path},
        ":owner": {"S": document.owner},
        ":visibility": {"S": document.visibility.value},
        ":status": {"S": document.status.value},
        ":source": {"S": document.source},
        ":version": {"S": document.version},
        ":updated": {"N": str(microseconds(document.updated_at))},
        ":body": {"S": document.model_dump_json()},
        ":stored_chunks": {"N": str(document.chunk_count)},
        ":stored_bytes": {"N": str(document.size_bytes or 0)},
    }
    assignments = [
        "#path",
        "#owner",
        "#visibility",
        "#status",
        "#source",
        "#version",
        "#updated",
        "#body",
        "#stored_chunks",
        "#stored_bytes",
    ]
    conditions = [
        "(attribute_not_exists(#updated) OR #updated <= :updated)",
        "(attribute_not_exists(#deleted) OR #deleted < :updated)",
    ]
    if document.status in TERMINAL:
        # A comparison with a missing attribute is false, so this also refuses a record that is gone.
        values[":pending"] = {"S": DocumentStatus.PENDING.value}
        conditions.append("#version = :version AND #status IN (:pending, :status)")
    names = {name: _NAMES[name] for name in [*assignments, "#deleted", "#expires"]}
    return {
        "TableName": table_name,
        "Key": _key(document.tenant_id, document.doc_id),
        "UpdateExpression": "SET "
        + ", ".join(f"{name} = :{name[1:]}" for name in assignments)
        + " REMOVE #deleted, #expires",
        "ConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def delete_request(
    table_name: str, tenant_id: str, doc_id: str, deleted_at: datetime, retention: timedelta
) -> dict[str, Any]:
    """The UpdateItem that turns the item (a record, a tombstone or nothing) into a tombstone of
    `deleted_at`, expiring after `retention`; conditional so a tombstone's time never goes back."""
    expires = int((deleted_at + retention).timestamp())
    return {
        "TableName": table_name,
        "Key": _key(tenant_id, doc_id),
        "UpdateExpression": "SET #deleted = :deleted, #expires = :expires REMOVE " + ", ".join(_RECORD_ONLY),
        "ConditionExpression": "attribute_not_exists(#deleted) OR #deleted < :deleted",
        "ExpressionAttributeNames": {name: _NAMES[name] for name in ["#deleted", "#expires", *_RECORD_ONLY]},
        "ExpressionAttributeValues": {
            ":deleted": {"N": str(microseconds(deleted_at))},
            ":expires": {"N": str(expires)},
        },
    }


def query_request(
    table_name: str,
    tenant_id: str,
    *,
    visible_to: str | None,
    status: DocumentStatus | None,
    source: str | None,
    path_prefix: str | None,
    limit: int,
) -> dict[str, Any]:
    """The first Query of a listing: the tenant (and prefix) in the key condition, the rest filtered."""
    names = {"#tenant": "tenant_id", "#body": "body"}
    values: dict[str, Any] = {":tenant": {"S": tenant_id}}
    key_condition = "#tenant = :tenant"
    if path_prefix is not None:
        names["#path"] = "path"
        values[":prefix"] = {"S": path_prefix}
        key_condition += " AND begins_with(#path, :prefix)"
    filters = []
    if visible_to is not None:
        names |= {"#visibility": "visibility", "#owner": "owner"}
        values |= {":shared": {"S": Visibility.SHARED.value}, ":user": {"S": visible_to}}
        filters.append("(#visibility = :shared OR #owner = :user)")
    if status is not None:
        names["#status"] = "status"
        values[":status"] = {"S": status.value}
        filters.append("#status = :status")
    if source is not None:
        # attribute_not_exists: items written before `source` was stored; `list` checks their body.
        names["#source"] = "source"
        values[":source"] = {"S": source}
        filters.append("(#source = :source OR attribute_not_exists(#source))")
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": PATH_INDEX,
        "KeyConditionExpression": key_condition,
        "ProjectionExpression": "#body",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ScanIndexForward": True,
        "Limit": limit + 1,
    }
    if filters:
        request["FilterExpression"] = " AND ".join(filters)
    return request


def _erasable(sort_key: str) -> bool:
    """Whether the registry erases the item of this sort key: all but the usage counters' (the UsageMeter
    owns them, and erasure keeps them) and the query-rate bucket's (the RateLimiter erases it)."""
    return not sort_key.startswith(USAGE_PREFIX) and sort_key != RATE_KEY


def catalogue_request(table_name: str, tenant_id: str, seen_at: datetime) -> dict[str, Any]:
    """UpdateItem that enters a tenant in the catalogue (module docstring), keeping its first time."""
    return {
        "TableName": table_name,
        "Key": _key(TENANTS_PARTITION, tenant_id),
        "UpdateExpression": "SET #first = if_not_exists(#first, :first)",
        "ExpressionAttributeNames": {"#first": "first_us"},
        "ExpressionAttributeValues": {":first": {"N": str(microseconds(seen_at))}},
    }


def tenants_request(table_name: str, *, limit: int, after: str | None) -> dict[str, Any]:
    """The first Query of a listing of the tenants' catalogue, in id order, after the tenant `after`."""
    request: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": "#tenant = :catalogue",
        "ProjectionExpression": "#doc",
        "ExpressionAttributeNames": {"#tenant": "tenant_id", "#doc": "doc_id"},
        "ExpressionAttributeValues": {":catalogue": {"S": TENANTS_PARTITION}},
        "ScanIndexForward": True,
        "Limit": limit + 1,
    }
    if after is not None:
        request["ExclusiveStartKey"] = _key(TENANTS_PARTITION, after)
    return request


_TOTALS: Final = ("documents", "chunks", "bytes")


def counted_request(
    table_name: str, tenant_id: str, update: dict[str, Any], adds: StoredTotals, added: StoredTotals
) -> dict[str, Any]:
    """The write of `update` (an UpdateItem of a record) that moves the record's part of the totals from
    `adds` to `added`: the UpdateItem, conditioned on the record still adding `adds` (so no write in
    between goes uncounted), alone when the totals do not change, else in a TransactWriteItems with the
    `ADD` of the difference to the tenant's totals item."""
    names = dict(update["ExpressionAttributeNames"])
    values = dict(update["ExpressionAttributeValues"])
    names |= {"#stored_chunks": "stored_chunks", "#stored_bytes": "stored_bytes"}
    if adds.documents:
        values |= {":was_chunks": {"N": str(adds.chunks)}, ":was_bytes": {"N": str(adds.bytes)}}
        still = "#stored_chunks = :was_chunks AND #stored_bytes = :was_bytes"
    else:
        still = "attribute_not_exists(#stored_chunks)"
    record = update | {
        "ConditionExpression": f"({update['ConditionExpression']}) AND ({still})",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if adds == added:
        return record
    change = {name: getattr(added, name) - getattr(adds, name) for name in _TOTALS}
    totals = {
        "TableName": table_name,
        "Key": _key(tenant_id, TOTALS_KEY),
        "UpdateExpression": "ADD " + ", ".join(f"#{name} :{name}" for name in _TOTALS),
        "ExpressionAttributeNames": {f"#{name}": name for name in _TOTALS},
        "ExpressionAttributeValues": {f":{name}": {"N": str(value)} for name, value in change.items()},
    }
    return {"TransactItems": [{"Update": record}, {"Update": totals}]}


def _adds(item: dict[str, Any] | None) -> StoredTotals:
    """What a stored item adds to its tenant's totals (module docstring)."""
    if not item or "stored_chunks" not in item:
        return StoredTotals()
    return StoredTotals(
        documents=1, chunks=int(item["stored_chunks"]["N"]), bytes=int(item.get("stored_bytes", {"N": "0"})["N"])
    )


# --- cursors, timestamps -------------------------------------------------------------------------


def settings_get_request(table_name: str, tenant_id: str) -> dict[str, Any]:
    """GetItem of a tenant's settings item, projecting only the attribute the query role may read."""
    return {
        "TableName": table_name,
        "Key": _key(tenant_id, SETTINGS_KEY),
        "ProjectionExpression": "#settings",
        "ExpressionAttributeNames": {"#settings": SETTINGS_ATTRIBUTE},
    }


def settings_put_request(table_name: str, tenant_id: str, settings: TenantSettings) -> dict[str, Any]:
    """UpdateItem that writes a tenant's settings item (creating it if absent). Not PutItem: the roles that
    write the registry are allowed UpdateItem only, so no grant lets them replace a whole item."""
    return {
        "TableName": table_name,
        "Key": _key(tenant_id, SETTINGS_KEY),
        "UpdateExpression": "SET #settings = :settings",
        "ExpressionAttributeNames": {"#settings": SETTINGS_ATTRIBUTE},
        "ExpressionAttributeValues": {":settings": {"S": settings.model_dump_json(exclude_none=True)}},
    }


def decode_cursor(cursor: str, tenant_id: str, path_prefix: str | None) -> dict[str, Any]:
    """The ExclusiveStartKey in the `by_path` index that a cursor from `cursors.encode` stands for."""
    position = cursors.decode(cursor, tenant_id, path_prefix)
    return {"tenant_id": {"S": tenant_id}, "doc_id": {"S": position.doc_id}, "path": {"S": position.path}}


def _key(tenant_id: str, doc_id: str) -> dict[str, Any]:
    return {"tenant_id": {"S": tenant_id}, "doc_id": {"S": doc_id}}


def _document(item: dict[str, Any]) -> Document:
    return Document.model_validate_json(item["body"]["S"])


def _stored(item: dict[str, Any] | None) -> Document | Tombstone | None:
    """What an item returned with a failed condition holds: a record, a tombstone, or nothing."""
    if item is None:
        return None
    if "body" in item:
        return _document(item)
    updated = item.get("updated_us")
    return Tombstone(
        tenant_id=item["tenant_id"]["S"],
        doc_id=item["doc_id"]["S"],
        version=item["version"]["S"] if "version" in item else None,
        updated_at=moment(int(updated["N"])) if updated is not None else None,
        deleted_at=moment(int(item["deleted_us"]["N"])),
    )


def _conflict(document: Document, stored_item: dict[str, Any] | None) -> StaleVersionError:
    stored = _stored(stored_item)
    refusal = refused_write(stored, document)
    # The item may have changed again since the condition failed; it did refuse the write then.
    return refusal or StaleVersionError(
        "a newer write of this document is already stored", details={"doc_id": document.doc_id, "reason": "stale"}
    )
