"""The FeedbackStore on DynamoDB: the registry table's `#feedback#{tenant}` partitions.

Item layout (partition key `tenant_id`, sort key `doc_id`, as every item of the table):
- a feedback: `tenant_id` = `#feedback#{tenant}`, `doc_id` = `f#{user}#{response_id}#{citation:03}` (0 for
  the answer as a whole), with `owner_user`, `body` (the feedback's JSON, whole) and `at`;
- a source's tally: `doc_id` = `s#{source}`, with the numbers `helpful` and `not_helpful`.
`{user}` is the SHA-256 of the user id (32 hex digits), `owner_user` the id itself, which every read
checks, as for conversations (`citewise.aws.dynamodb_conversations`).

Why a partition per tenant, apart from its documents and conversations: every tally of a tenant is one
Query of the `s#` prefix (what the ranking signal reads, cached per function), a tenant's erasure empties
one partition, and the functions that take feedback are granted writes on these partitions only
(`dynamodb:LeadingKeys` like `#feedback#*`, cdk/citewise_infra/storage.py).

A feedback and the tallies it moves change in one TransactWriteItems, every write an UpdateItem: the
feedback is written only if the stored one is still the one it replaces (`at` unchanged, or absent for a
first one), and each tally moves by `ADD`, so concurrent feedback of many users on one source all count,
and a tally is always the sum of the feedback it counts.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.aws.dynamodb_erase import count, delete_keys, tenant_keys
from citewise.aws.dynamodb_partition import partition_query, query_items
from citewise.domain.errors import CitewiseError, ConflictError
from citewise.ports.conversations import Owner
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.feedback import Feedback, SourceTally, moved

FEEDBACK_PREFIX: Final = "#feedback#"
"""The partition key of a tenant's feedback is this prefix and the tenant id."""
OWNER_ATTRIBUTE: Final = "owner_user"
BODY_ATTRIBUTE: Final = "body"
TALLY_PREFIX: Final = "s#"


class DynamoFeedback:
    """A `FeedbackStore` in the registry table (see the module docstring for the design)."""

    def __init__(self, table_name: str, *, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")

    def get(self, owner: Owner, response_id: str, citation: int | None) -> Feedback | None:
        response = aws.call(
            "DynamoDB GetItem",
            lambda: self._client.get_item(
                TableName=self.table_name,
                Key=_key(owner.tenant_id, _feedback(owner, response_id, citation)),
                ConsistentRead=True,
            ),
        )
        item = response.get("Item")
        if not item or item.get(OWNER_ATTRIBUTE, {}).get("S") != owner.user_id:
            return None
        return Feedback.model_validate_json(item[BODY_ATTRIBUTE]["S"])

    def put(self, owner: Owner, feedback: Feedback, *, previous: Feedback | None) -> None:
        write: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": _key(owner.tenant_id, _feedback(owner, feedback.response_id, feedback.citation)),
            "UpdateExpression": "SET #owner = :owner, #body = :body, #at = :at",
            "ExpressionAttributeNames": {"#owner": OWNER_ATTRIBUTE, "#body": BODY_ATTRIBUTE, "#at": "at"},
            "ExpressionAttributeValues": {
                ":owner": {"S": owner.user_id},
                ":body": {"S": feedback.model_dump_json()},
                ":at": {"S": feedback.at.isoformat()},
            },
        }
        if previous is None:
            write["ConditionExpression"] = "attribute_not_exists(doc_id)"
        else:
            write["ConditionExpression"] = "#owner = :owner AND #at = :previous"
            write["ExpressionAttributeValues"][":previous"] = {"S": previous.at.isoformat()}
        tallies = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": _key(owner.tenant_id, TALLY_PREFIX + source),
                    "UpdateExpression": "ADD helpful :helpful, not_helpful :not_helpful",
                    "ExpressionAttributeValues": {":helpful": {"N": str(helpful)}, ":not_helpful": {"N": str(down)}},
                }
            }
            for source, (helpful, down) in sorted(moved(previous, feedback).items())
        ]
        try:
            self._client.transact_write_items(TransactItems=[{"Update": write}, *tallies])
        except ClientError as exc:
            if aws.error_code(exc) == "TransactionCanceledException" and _conflicted(exc):
                raise ConflictError(
                    "this feedback was changed by another request", details={"response_id": feedback.response_id}
                ) from exc
            raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB TransactWriteItems") from exc

    def tally(self, tenant_id: str, source: str) -> SourceTally | None:
        response = aws.call(
            "DynamoDB GetItem",
            lambda: self._client.get_item(
                TableName=self.table_name, Key=_key(tenant_id, TALLY_PREFIX + source), ConsistentRead=True
            ),
        )
        item = response.get("Item")
        return _tally(item) if item else None

    def tallies(self, tenant_id: str) -> dict[str, SourceTally]:
        request = partition_query(self.table_name, _partition(tenant_id), TALLY_PREFIX)
        return {
            item["doc_id"]["S"].removeprefix(TALLY_PREFIX): _tally(item) for item in query_items(self._client, request)
        }

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        everything = partition_query(self.table_name, _partition(tenant_id), consistent=True)
        return delete_keys(self._client, self.table_name, tenant_keys(self._client, everything, limit=limit))

    def count_tenant(self, tenant_id: str) -> int:
        return count(self._client, partition_query(self.table_name, _partition(tenant_id), consistent=True))


def _partition(tenant_id: str) -> str:
    return f"{FEEDBACK_PREFIX}{tenant_id}"


def _feedback(owner: Owner, response_id: str, citation: int | None) -> str:
    user = hashlib.sha256(owner.user_id.encode()).hexdigest()[:32]
    return f"f#{user}#{response_id}#{citation or 0:03d}"


def _key(tenant_id: str, sort_key: str) -> dict[str, Any]:
    return {"tenant_id": {"S": _partition(tenant_id)}, "doc_id": {"S": sort_key}}


def _tally(item: dict[str, Any]) -> SourceTally:
    # A tally only moves by the feedback it counts, so it never goes below 0; max() guards the model anyway.
    return SourceTally(
        helpful=max(0, int(item.get("helpful", {}).get("N", "0"))),
        not_helpful=max(0, int(item.get("not_helpful", {}).get("N", "0"))),
    )


def _conflicted(exc: ClientError) -> bool:
    """Whether the transaction was cancelled by the feedback's own condition (the tallies have none), or by
    another transaction in flight on one of its items (many users rating one source at once): either way
    the write is worth trying again from a fresh read (`FeedbackService.give` does)."""
    reasons = exc.response.get("CancellationReasons", [])
    codes = [reason.get("Code") for reason in reasons]
    return not reasons or codes[0] == "ConditionalCheckFailed" or "TransactionConflict" in codes
