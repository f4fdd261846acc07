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

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.aws import dynamodb_erase as erasing
from citewise.aws.dynamodb_usage import USAGE_PREFIX
from citewise.domain.errors import CitewiseError, ValidationError
from citewise.domain.models import Document, DocumentStatus, Visibility
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports import cursors
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.registry import (
    TERMINAL,
    TOMBSTONE_RETENTION,
    DocumentPage,
    StaleVersionError,
    TenantPage,
    TenantSummary,
    Tombstone,
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
}
_RECORD_ONLY: Final = ("#path", "#owner", "#visibility", "#status", "#source", "#body")
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
        try:
            self._client.update_item(**update_request(self.table_name, document))
        except ClientError as exc:
            if aws.error_code(exc) == "ConditionalCheckFailedException":
                raise _conflict(document, exc.response.get("Item")) from exc
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc

    def delete(self, tenant_id: str, doc_id: str, *, deleted_at: datetime) -> None:
        try:
            self._client.update_item(**delete_request(self.table_name, tenant_id, doc_id, deleted_at, self._retention))
        except ClientError as exc:
            if aws.error_code(exc) == "ConditionalCheckFailedException":
                return  # a later delete's tombstone is there already: this one has nothing to add
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc

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
        request = partition_request(self.table_name, tenant_id)
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
        request = partition_request(self.table_name, tenant_id)
        request["FilterExpression"] = "NOT begins_with(#key, :usage)"
        request["ExpressionAttributeNames"] = request["ExpressionAttributeNames"] | {"#key": "doc_id"}
        request["ExpressionAttributeValues"] = request["ExpressionAttributeValues"] | {":usage": {"S": USAGE_PREFIX}}
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
    }
    assignments = ["#path", "#owner", "#visibility", "#status", "#source", "#version", "#updated", "#body"]
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


def partition_request(table_name: str, tenant_id: str) -> dict[str, Any]:
    """The Query of every item of the tenant's partition, strongly consistent (an erasure's proof must
    see its own deletes)."""
    return {
        "TableName": table_name,
        "KeyConditionExpression": "#tenant = :tenant",
        "ExpressionAttributeNames": {"#tenant": "tenant_id"},
        "ExpressionAttributeValues": {":tenant": {"S": tenant_id}},
        "ConsistentRead": True,
    }


def _erasable(sort_key: str) -> bool:
    """Whether the registry erases the item of this sort key: all but the usage counters'."""
    return not sort_key.startswith(USAGE_PREFIX)


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
