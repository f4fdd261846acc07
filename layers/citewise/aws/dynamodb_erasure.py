"""The ErasureLog on DynamoDB: one item per erased tenant in the registry table, outside every tenant.

Item layout: partition key `tenant_id` = `ERASURES_PARTITION` (`#erasures`, never a tenant id: those
start with a letter or digit), sort key `doc_id` = the tenant id, `erasure_status` (S) and `body` (S:
the `Erasure` as JSON). A partition of its own, like the tenants' catalogue, so erasing the tenant's
partition never erases its receipt, and the operator reads it back whenever needed.

`start` is one conditional UpdateItem (refused while the status is ERASING), so two operators asking at
once start one erasure. `erasing` reads the status attribute alone, eventually consistent: half a read
request unit per tenant request; the API functions may read exactly that attribute (docs/aws.md).
"""

from __future__ import annotations

from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import CitewiseError
from citewise.ports.erasure import Erasure, ErasureInProgressError, ErasureStatus

ERASURES_PARTITION: Final = "#erasures"
STATUS_ATTRIBUTE: Final = "erasure_status"


class DynamoErasureLog:
    """An `ErasureLog` in the registry table (see the module docstring)."""

    def __init__(self, table_name: str, *, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client if client is not None else aws.client("dynamodb")

    def get(self, tenant_id: str) -> Erasure | None:
        response = aws.call(
            "DynamoDB GetItem",
            lambda: self._client.get_item(
                TableName=self.table_name,
                Key=erasure_key(tenant_id),
                ConsistentRead=True,
                ProjectionExpression="#body",
                ExpressionAttributeNames={"#body": "body"},
            ),
        )
        item = response.get("Item")
        return Erasure.model_validate_json(item["body"]["S"]) if item else None

    def erasing(self, tenant_id: str) -> bool:
        response = aws.call(
            "DynamoDB GetItem", lambda: self._client.get_item(**status_request(self.table_name, tenant_id))
        )
        status: object = response.get("Item", {}).get(STATUS_ATTRIBUTE, {}).get("S")
        return status == ErasureStatus.ERASING.value

    def start(self, erasure: Erasure) -> None:
        request = write_request(self.table_name, erasure)
        request["ConditionExpression"] = "attribute_not_exists(#status) OR #status <> :erasing"
        request["ExpressionAttributeValues"][":erasing"] = {"S": ErasureStatus.ERASING.value}
        try:
            self._client.update_item(**request)
        except ClientError as exc:
            if aws.error_code(exc) == "ConditionalCheckFailedException":
                raise ErasureInProgressError(
                    "an erasure of this tenant is already running", details={"tenant_id": erasure.tenant_id}
                ) from exc
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "DynamoDB UpdateItem") from exc

    def save(self, erasure: Erasure) -> None:
        aws.call("DynamoDB UpdateItem", lambda: self._client.update_item(**write_request(self.table_name, erasure)))


def erasure_key(tenant_id: str) -> dict[str, Any]:
    """The key of the tenant's erasure record."""
    return {"tenant_id": {"S": ERASURES_PARTITION}, "doc_id": {"S": tenant_id}}


def status_request(table_name: str, tenant_id: str) -> dict[str, Any]:
    """The GetItem of the record's status alone, eventually consistent: the per-request check."""
    return {
        "TableName": table_name,
        "Key": erasure_key(tenant_id),
        "ProjectionExpression": "#status",
        "ExpressionAttributeNames": {"#status": STATUS_ATTRIBUTE},
    }


def write_request(table_name: str, erasure: Erasure) -> dict[str, Any]:
    """The UpdateItem storing the record (UpdateItem, not PutItem: the roles may update items only)."""
    return {
        "TableName": table_name,
        "Key": erasure_key(erasure.tenant_id),
        "UpdateExpression": "SET #status = :status, #body = :body",
        "ExpressionAttributeNames": {"#status": STATUS_ATTRIBUTE, "#body": "body"},
        "ExpressionAttributeValues": {
            ":status": {"S": erasure.status.value},
            ":body": {"S": erasure.model_dump_json()},
        },
    }
