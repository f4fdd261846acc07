"""The ConversationStore on DynamoDB: the registry table's `#conversations#{tenant}` partitions.

Item layout (partition key `tenant_id`, sort key `doc_id`, as every item of the table):
- a conversation: `tenant_id` = `#conversations#{tenant}`, `doc_id` = `{user}#c#{id}`, with `owner_user`,
  `title`, `created_at`, `updated_at`, `turns` (a number) and `expires_at`;
- a turn: `doc_id` = `{user}#t#{id}#{n:06}`, `body` (the turn's JSON, whole) and `expires_at`.
`{user}` is the SHA-256 of the user id (32 hex digits): a user id may hold any character, `#` included,
and a fixed-length hash keeps one user's prefix from being another's; `owner_user` holds the id itself
and every read checks it, so even a hash collision would read nothing of another user.

Why a partition per tenant, apart from its documents: a user's conversations are one Query of a key
prefix, the newest first (ids sort by time); a tenant's erasure empties one partition; and the functions
that answer questions are granted writes on these partitions only (`dynamodb:LeadingKeys` like
`#conversations#*`, cdk/citewise_infra/storage.py), never on a document's item.

A turn and its conversation change in one TransactWriteItems: the turn item is written only if it does
not exist, the conversation's `turns` moves from n-1 to n only if it is n-1; so a turn is there whole or
not at all, and of two requests racing on one conversation the second gets a ConflictError.

`expires_at` is the table's time-to-live attribute (`citewise.aws.dynamodb.TTL_ATTRIBUTE`): each write
sets it `ttl` past the write on the conversation and the new turn, so a conversation untouched for that
long disappears (a long one loses its oldest turns as each reaches its own expiry). DynamoDB deletes
expired items within days, not at once: reads leave out what has expired already.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.aws.dynamodb import TTL_ATTRIBUTE
from citewise.aws.dynamodb_erase import count, delete_keys, tenant_keys
from citewise.aws.dynamodb_partition import partition_query, query_items
from citewise.domain.errors import CitewiseError, ConflictError
from citewise.ports.conversations import PAGE_LIMIT, ConversationPage, ConversationSummary, Owner, Turn, not_found
from citewise.ports.cursors import decode_conversation, encode_conversation
from citewise.ports.erasure import ERASE_BATCH

CONVERSATIONS_PREFIX: Final = "#conversations#"
"""The partition key of a tenant's conversations is this prefix and the tenant id."""
OWNER_ATTRIBUTE: Final = "owner_user"
BODY_ATTRIBUTE: Final = "body"
TURNS_ATTRIBUTE: Final = "turns"


class DynamoConversations:
    """A `ConversationStore` in the registry table (see the module docstring for the design)."""

    def __init__(self, table_name: str, *, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")

    def create(self, owner: Owner, conversation_id: str, title: str, at: datetime, expires_at: datetime) -> None:
        stamp = at.isoformat()
        request = {
            "TableName": self.table_name,
            "Key": _key(owner, _head(owner, conversation_id)),
            "UpdateExpression": "SET #owner = :owner, title = :title, created_at = :at, updated_at = :at, "
            "#turns = :zero, #expires = :expires",
            "ConditionExpression": "attribute_not_exists(doc_id)",
            "ExpressionAttributeNames": {
                "#owner": OWNER_ATTRIBUTE,
                "#turns": TURNS_ATTRIBUTE,
                "#expires": TTL_ATTRIBUTE,
            },
            "ExpressionAttributeValues": {
                ":owner": {"S": owner.user_id},
                ":title": {"S": title},
                ":at": {"S": stamp},
                ":zero": {"N": "0"},
                ":expires": {"N": _epoch(expires_at)},
            },
        }
        try:
            self._client.update_item(**request)
        except ClientError as exc:
            if aws.error_code(exc) == "ConditionalCheckFailedException":
                raise ConflictError("a conversation with this id exists", details={"id": conversation_id}) from exc
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc

    def summary(self, owner: Owner, conversation_id: str) -> ConversationSummary | None:
        response = aws.call(
            "DynamoDB GetItem",
            lambda: self._client.get_item(
                TableName=self.table_name, Key=_key(owner, _head(owner, conversation_id)), ConsistentRead=True
            ),
        )
        item = response.get("Item")
        return _summary(item) if item and _owned(item, owner) else None

    def turns(self, owner: Owner, conversation_id: str, *, last: int | None = None) -> list[Turn]:
        request = {**self._query(owner, f"{_user(owner)}#t#{conversation_id}#"), "ScanIndexForward": False}
        if last is not None:
            request["Limit"] = last
        found: list[Turn] = []
        now = int(_epoch(datetime.now(UTC)))
        for item in query_items(self._client, request):
            if int(item[TTL_ATTRIBUTE]["N"]) > now:
                found.append(Turn.model_validate_json(item[BODY_ATTRIBUTE]["S"]))
                if last is not None and len(found) >= last:
                    break
        found.reverse()
        return found

    def append(self, owner: Owner, conversation_id: str, turn: Turn, expires_at: datetime) -> None:
        expires = {":expires": {"N": _epoch(expires_at)}}
        head = {
            "TableName": self.table_name,
            "Key": _key(owner, _head(owner, conversation_id)),
            "UpdateExpression": "SET #turns = :turn, updated_at = :at, #expires = :expires",
            "ConditionExpression": "#owner = :owner AND #turns = :previous AND #expires > :now",
            "ExpressionAttributeNames": {
                "#owner": OWNER_ATTRIBUTE,
                "#turns": TURNS_ATTRIBUTE,
                "#expires": TTL_ATTRIBUTE,
            },
            "ExpressionAttributeValues": {
                ":owner": {"S": owner.user_id},
                ":turn": {"N": str(turn.index)},
                ":previous": {"N": str(turn.index - 1)},
                ":at": {"S": turn.at.isoformat()},
                ":now": {"N": _epoch(datetime.now(UTC))},
                **expires,
            },
        }
        item = {
            "TableName": self.table_name,
            "Key": _key(owner, _turn(owner, conversation_id, turn.index)),
            "UpdateExpression": "SET #body = :body, #expires = :expires",
            "ConditionExpression": "attribute_not_exists(doc_id)",
            "ExpressionAttributeNames": {"#body": BODY_ATTRIBUTE, "#expires": TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":body": {"S": turn.model_dump_json()}, **expires},
        }
        try:
            self._client.transact_write_items(TransactItems=[{"Update": head}, {"Update": item}])
        except ClientError as exc:
            if aws.error_code(exc) != "TransactionCanceledException" or not _conditions_failed(exc):
                raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc
            if self.summary(owner, conversation_id) is None:
                raise not_found(conversation_id) from exc
            raise ConflictError(
                "the conversation has another turn of this number", details={"turn": turn.index}
            ) from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc

    def page(self, owner: Owner, *, limit: int = PAGE_LIMIT, cursor: str | None = None) -> ConversationPage:
        # ids sort by creation time: newest first
        request = {**self._query(owner, f"{_user(owner)}#c#"), "ScanIndexForward": False}
        if cursor:
            request["ExclusiveStartKey"] = _key(owner, _head(owner, decode_conversation(cursor, *owner)))
        found: list[ConversationSummary] = []
        now = int(_epoch(datetime.now(UTC)))
        for item in query_items(self._client, request):
            if _owned(item, owner) and int(item[TTL_ATTRIBUTE]["N"]) > now:
                found.append(_summary(item))
                if len(found) > limit:
                    break
        more = len(found) > limit
        found = found[:limit]
        return ConversationPage(
            conversations=found, next_cursor=encode_conversation(*owner, found[-1].conversation_id) if more else None
        )

    def delete(self, owner: Owner, conversation_id: str) -> bool:
        if self.summary(owner, conversation_id) is None:
            return False
        turns = partition_query(self.table_name, _partition(owner.tenant_id), f"{_user(owner)}#t#{conversation_id}#")
        while keys := tenant_keys(self._client, turns, limit=ERASE_BATCH):
            delete_keys(self._client, self.table_name, keys)
        request = {
            "TableName": self.table_name,
            "Key": _key(owner, _head(owner, conversation_id)),
            "ConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": OWNER_ATTRIBUTE},
            "ExpressionAttributeValues": {":owner": {"S": owner.user_id}},
        }
        try:
            self._client.delete_item(**request)
        except ClientError as exc:
            if aws.error_code(exc) == "ConditionalCheckFailedException":
                return False  # deleted meanwhile by another request
            raise aws.translate(exc, CitewiseError, "DynamoDB DeleteItem") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB DeleteItem") from exc
        return True

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        everything = partition_query(self.table_name, _partition(tenant_id), consistent=True)
        return delete_keys(self._client, self.table_name, tenant_keys(self._client, everything, limit=limit))

    def count_tenant(self, tenant_id: str) -> int:
        return count(self._client, partition_query(self.table_name, _partition(tenant_id), consistent=True))

    def _query(self, owner: Owner, prefix: str) -> dict[str, Any]:
        """The strongly consistent Query of `owner`'s tenant partition under `prefix`: a turn just appended
        or a conversation just created is read back at once."""
        return partition_query(self.table_name, _partition(owner.tenant_id), prefix, consistent=True)


def _partition(tenant_id: str) -> str:
    return f"{CONVERSATIONS_PREFIX}{tenant_id}"


def _user(owner: Owner) -> str:
    return hashlib.sha256(owner.user_id.encode()).hexdigest()[:32]


def _head(owner: Owner, conversation_id: str) -> str:
    return f"{_user(owner)}#c#{conversation_id}"


def _turn(owner: Owner, conversation_id: str, index: int) -> str:
    return f"{_user(owner)}#t#{conversation_id}#{index:06d}"


def _key(owner: Owner, sort_key: str) -> dict[str, Any]:
    return {"tenant_id": {"S": _partition(owner.tenant_id)}, "doc_id": {"S": sort_key}}


def _owned(item: dict[str, Any], owner: Owner) -> bool:
    return bool(item.get(OWNER_ATTRIBUTE, {}).get("S") == owner.user_id) and int(item[TTL_ATTRIBUTE]["N"]) > int(
        _epoch(datetime.now(UTC))
    )


def _summary(item: dict[str, Any]) -> ConversationSummary:
    return ConversationSummary(
        conversation_id=item["doc_id"]["S"].rsplit("#", 1)[1],
        title=item["title"]["S"],
        created_at=datetime.fromisoformat(item["created_at"]["S"]),
        updated_at=datetime.fromisoformat(item["updated_at"]["S"]),
        turns=int(item[TURNS_ATTRIBUTE]["N"]),
    )


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


def _conditions_failed(exc: ClientError) -> bool:
    reasons = exc.response.get("CancellationReasons", [])
    return any(reason.get("Code") == "ConditionalCheckFailed" for reason in reasons) or not reasons
