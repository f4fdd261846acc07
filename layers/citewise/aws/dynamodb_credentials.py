"""The CredentialStore on DynamoDB: one item per credential in the registry table's `#credentials` partition.

Item layout: partition key `tenant_id` = `CREDENTIALS_PARTITION` (never a tenant id: those start with a
letter or digit), sort key `doc_id` = the credential id (the Cognito app client id), `owner_tenant` the
tenant it belongs to, `body` the record as JSON, and `revoked_at` once revoked. No `path`, so the sparse
`by_path` index never holds it and no document listing returns it.

Why one partition, not the tenant's: every request made with a credential looks it up by the only thing
its token names, the client id, so the key must be found from the id alone; and the functions that only
answer questions (query, MCP) are granted GetItem on this one partition (`dynamodb:LeadingKeys`), nothing
of any tenant's. A tenant's listing is a Query of the partition filtered on `owner_tenant`: a user pool
holds at most a few thousand app clients, so the partition stays a few pages at worst.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.aws.dynamodb_partition import partition_query, query_items
from citewise.domain.credentials import Credential
from citewise.domain.errors import CitewiseError, ConflictError, NotFoundError

CREDENTIALS_PARTITION: Final = "#credentials"
"""The partition key (`tenant_id`) of every credential item."""
OWNER_ATTRIBUTE: Final = "owner_tenant"
BODY_ATTRIBUTE: Final = "body"


class DynamoCredentials:
    """A `CredentialStore` in the registry table (see the module docstring for the design)."""

    def __init__(self, table_name: str, *, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")

    def put_credential(self, credential: Credential) -> None:
        try:
            self._client.update_item(**_write(self.table_name, credential, "attribute_not_exists(doc_id)"))
        except ClientError as exc:
            if aws.error_code(exc) == "ConditionalCheckFailedException":
                raise ConflictError(
                    "a credential with this id exists", details={"id": credential.credential_id}
                ) from exc
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc

    def credential(self, credential_id: str) -> Credential | None:
        response = aws.call(
            "DynamoDB GetItem",
            lambda: self._client.get_item(TableName=self.table_name, Key=_key(credential_id), ConsistentRead=True),
        )
        item = response.get("Item")
        return Credential.model_validate_json(item[BODY_ATTRIBUTE]["S"]) if item else None

    def tenant_credentials(self, tenant_id: str) -> list[Credential]:
        found = [Credential.model_validate_json(item[BODY_ATTRIBUTE]["S"]) for item in self._items(tenant_id)]
        return sorted(found, key=lambda credential: (credential.created_at, credential.credential_id))

    def revoke_credential(self, tenant_id: str, credential_id: str, at: datetime, by: str) -> Credential:
        credential = self.credential(credential_id)
        if credential is None or credential.tenant_id != tenant_id:
            raise NotFoundError("no such credential", details={"id": credential_id})
        if credential.revoked:
            return credential
        revoked = credential.model_copy(update={"revoked_at": at, "revoked_by": by})
        try:
            self._client.update_item(
                **_write(self.table_name, revoked, "#owner = :owner AND attribute_not_exists(revoked_at)")
            )
        except ClientError as exc:
            if aws.error_code(exc) != "ConditionalCheckFailedException":
                raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
            # Revoked (or erased) meanwhile by another request: the first revocation stands.
            return self.revoke_credential(tenant_id, credential_id, at, by)
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
        return revoked

    def count_tenant(self, tenant_id: str) -> int:
        return sum(1 for _ in self._items(tenant_id))

    def erase_tenant(self, tenant_id: str) -> int:
        erased = 0
        for item in list(self._items(tenant_id)):
            delete = partial(self._client.delete_item, TableName=self.table_name, Key=_key(item["doc_id"]["S"]))
            aws.call("DynamoDB DeleteItem", delete)
            erased += 1
        return erased

    def _items(self, tenant_id: str) -> Iterator[dict[str, Any]]:
        """The tenant's credential items, page by page."""
        request = partition_query(self.table_name, CREDENTIALS_PARTITION, consistent=True)
        request["FilterExpression"] = "#owner = :tenant"
        request["ExpressionAttributeNames"]["#owner"] = OWNER_ATTRIBUTE
        request["ExpressionAttributeValues"][":tenant"] = {"S": tenant_id}
        return query_items(self._client, request)


def _key(credential_id: str) -> dict[str, Any]:
    return {"tenant_id": {"S": CREDENTIALS_PARTITION}, "doc_id": {"S": credential_id}}


def _write(table_name: str, credential: Credential, condition: str) -> dict[str, Any]:
    """The UpdateItem writing `credential`'s item if `condition` holds (UpdateItem rather than PutItem: the
    documents function, which writes these, is granted no PutItem on the table)."""
    values = {":owner": {"S": credential.tenant_id}, ":body": {"S": credential.model_dump_json()}}
    assignments = ["#owner = :owner", "#body = :body"]
    if credential.revoked_at is not None:
        values[":revoked"] = {"S": credential.revoked_at.isoformat()}
        assignments.append("revoked_at = :revoked")
    return {
        "TableName": table_name,
        "Key": _key(credential.credential_id),
        "UpdateExpression": "SET " + ", ".join(assignments),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#owner": OWNER_ATTRIBUTE, "#body": BODY_ATTRIBUTE},
        "ExpressionAttributeValues": values,
    }
