"""A KMS key per tenant in search mode s3vectors: erasing a tenant destroys the key its index was encrypted with.

With `search.key_per_tenant` (cdk.json) each tenant's index is created with `encryptionConfiguration`
naming a customer managed key of that tenant's own, instead of inheriting the bucket's key. The ingest
function creates the key just before the index (`TenantKeys.key_for`); the erasure function schedules
its deletion once the index is dropped (`schedule_deletion`, then `release`). docs/s3vectors-design.md
("A key per tenant") says why each step is as it is; in short:

- **Names.** The key's alias is `alias/<scope>/<index name>` (`scope` is the stack's, e.g.
  `citewise-dev`; the index name is `s3vectors_requests.index_name`, `[a-z0-9-]`, so the alias keeps to
  KMS's `alias/[a-zA-Z0-9/_-]`, at most 256 characters, never `alias/aws/`). The key carries two tags
  set by CreateKey itself: `STACK_TAG` = scope (what every role's KMS grant is conditioned on) and
  `TENANT_TAG` = the index name (what a tenant's read session is narrowed to).
- **The alias is the lock.** Two ingest runs creating the same tenant's first index may both create a
  key; only one CreateAlias succeeds. The other schedules the deletion of its own, never-used key and
  takes the winner's. A run that fails after CreateAlias (CreateIndex refused, the function timed out)
  leaves the key under its alias, and the retry reuses it: one key per tenant, whatever is retried. A
  crash between CreateKey and CreateAlias leaves a key with the tags and no alias (never used to
  encrypt anything): docs/operations.md says how to find and delete such keys.
- **The key policy** (`key_policy`): the account's root may do anything with it, which is what lets the
  roles' IAM policies grant its use (KMS's default key policy statement); and the S3 Vectors indexing
  service may decrypt with it for this bucket only, as the bucket key's policy allows. CreateKey bypasses
  the policy lockout safety check on purpose: the creating role must not be able to change the policy
  (it has no `kms:PutKeyPolicy`), and the root statement keeps the key manageable by the account.
- **Erasure** (`schedule_deletion`, `release`): both idempotent. A key already pending deletion answers
  its date; the alias is deleted only after the erasure record names the key, so a run interrupted
  anywhere finds the key again, and a tenant that comes back later gets a new key.

Every failure is the search backend's error (`translate`: throttling is ThrottledError, which the ingest
queue retries), never a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws.clients import error_code, translate
from citewise.aws.s3vectors_requests import index_name
from citewise.domain.errors import SearchBackendError
from citewise.ports.erasure import KeyDeletion

logger = logging.getLogger(__name__)

STACK_TAG = "citewise:stack"
"""The tag every tenant key carries with the stack's scope: every role's KMS grant on tenant keys names it."""
TENANT_TAG = "citewise:tenant-index"
"""The tag naming the tenant's index: a tenant's read session may decrypt with its own key only."""
INDEXING_PRINCIPAL = "indexing.s3vectors.amazonaws.com"
MIN_DELETION_DAYS = 7
MAX_DELETION_DAYS = 30
"""ScheduleKeyDeletion's waiting period: 7 to 30 days (the KMS API reference, `PendingWindowInDays`)."""


def alias_name(scope: str, tenant_id: str) -> str:
    """The alias of the tenant's key: `alias/<scope>/<the tenant's index name>`."""
    return f"alias/{scope}/{index_name(tenant_id)}"


def key_policy(bucket_arn: str) -> str:
    """The key policy of a tenant key, for the vector bucket `bucket_arn` (its partition and account are
    the key's): the account's root (so IAM policies grant its use), and S3 Vectors' indexing for this
    bucket only, as the bucket key's policy (`cdk/citewise_infra/vectors.py`)."""
    partition, account = _partition_and_account(bucket_arn)
    statements = [
        {
            "Sid": "AccountAdministersTheKeyThroughIam",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
            "Action": "kms:*",
            "Resource": "*",
        },
        {
            "Sid": "S3VectorsIndexingDecryptsForThisBucket",
            "Effect": "Allow",
            "Principal": {"Service": INDEXING_PRINCIPAL},
            "Action": "kms:Decrypt",
            "Resource": "*",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": account},
                "ArnLike": {"aws:SourceArn": f"{bucket_arn}*"},
            },
        },
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, separators=(",", ":"))


class TenantKeys:
    """The tenants' keys of one stack (`scope`) and vector bucket (`bucket_arn`).

    `kms` builds the KMS client on first use (a function that never creates or destroys a key never
    makes one); `deletion_days` is the waiting period of a scheduled deletion."""

    def __init__(
        self, kms: Callable[[], Any], *, scope: str, bucket_arn: str, deletion_days: int = MIN_DELETION_DAYS
    ) -> None:
        if not MIN_DELETION_DAYS <= deletion_days <= MAX_DELETION_DAYS:
            raise ValueError(f"a key's deletion waits {MIN_DELETION_DAYS} to {MAX_DELETION_DAYS} days")
        self._make_client = kms
        self._client: Any = None
        self._scope = scope
        self._bucket_arn = bucket_arn
        self._deletion_days = deletion_days

    @property
    def _kms(self) -> Any:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def alias(self, tenant_id: str) -> str:
        return alias_name(self._scope, tenant_id)

    def key_for(self, tenant_id: str) -> str:
        """The ARN of the tenant's key, created (with its alias) if it has none."""
        alias = self.alias(tenant_id)
        existing = self._describe(alias)
        if existing is not None:
            return _usable(existing, alias)
        created = self._call("create a tenant's key", self._kms.create_key, **self._key_request(tenant_id))
        key_id, key_arn = str(created["KeyMetadata"]["KeyId"]), str(created["KeyMetadata"]["Arn"])
        try:
            self._kms.create_alias(AliasName=alias, TargetKeyId=key_arn)
        except ClientError as exc:
            # Lost the race (AlreadyExistsException), or could not name it: either way this key encrypts
            # nothing and must not linger at $1 a month.
            self._discard(key_id)
            if error_code(exc) != "AlreadyExistsException":
                raise translate(exc, SearchBackendError, "name a tenant's key (kms:CreateAlias)") from exc
            winner = self._describe(alias)
            if winner is None:
                raise SearchBackendError(
                    "a tenant's key alias was taken and is gone again; retry", details={"alias": alias}
                ) from exc
            return _usable(winner, alias)
        except BotoCoreError as exc:
            self._discard(key_id)
            raise translate(exc, SearchBackendError, "name a tenant's key (kms:CreateAlias)") from exc
        return key_arn

    def schedule_deletion(self, tenant_id: str) -> KeyDeletion | None:
        """Schedule the deletion of the tenant's key (its date, also when it was scheduled before); None
        when it has no key under its alias."""
        alias = self.alias(tenant_id)
        metadata = self._describe(alias)
        if metadata is None:
            return None
        key_arn = str(metadata["Arn"])
        if metadata.get("KeyState") != "PendingDeletion":
            try:
                answer = self._kms.schedule_key_deletion(
                    KeyId=str(metadata["KeyId"]), PendingWindowInDays=self._deletion_days
                )
            except ClientError as exc:
                if error_code(exc) != "KMSInvalidStateException":
                    raise translate(exc, SearchBackendError, "schedule a tenant key's deletion") from exc
                # Scheduled by a run that was interrupted before it recorded it: read the date.
                metadata = self._describe(alias) or metadata
            except BotoCoreError as exc:
                raise translate(exc, SearchBackendError, "schedule a tenant key's deletion") from exc
            else:
                metadata = {**metadata, "DeletionDate": answer["DeletionDate"]}
        deletion_date = metadata.get("DeletionDate")
        if not isinstance(deletion_date, datetime):
            raise SearchBackendError("KMS gave no deletion date for a tenant's key", details={"alias": alias})
        return KeyDeletion(key_arn=key_arn, alias=alias, deletion_date=deletion_date)

    def release(self, tenant_id: str) -> None:
        """Delete the tenant key's alias (none left: nothing to do)."""
        try:
            self._kms.delete_alias(AliasName=self.alias(tenant_id))
        except ClientError as exc:
            if error_code(exc) != "NotFoundException":
                raise translate(exc, SearchBackendError, "release a tenant key's alias") from exc
        except BotoCoreError as exc:
            raise translate(exc, SearchBackendError, "release a tenant key's alias") from exc

    def _key_request(self, tenant_id: str) -> dict[str, Any]:
        return {
            "Policy": key_policy(self._bucket_arn),
            "Description": f"citewise {self._scope}: the S3 Vectors index {index_name(tenant_id)} of one tenant",
            "KeyUsage": "ENCRYPT_DECRYPT",
            "KeySpec": "SYMMETRIC_DEFAULT",
            "Tags": [
                {"TagKey": STACK_TAG, "TagValue": self._scope},
                {"TagKey": TENANT_TAG, "TagValue": index_name(tenant_id)},
            ],
            # The creating role may not change the policy (no kms:PutKeyPolicy); the account root can.
            "BypassPolicyLockoutSafetyCheck": True,
        }

    def _describe(self, alias: str) -> dict[str, Any] | None:
        try:
            answer = self._kms.describe_key(KeyId=alias)
        except ClientError as exc:
            if error_code(exc) == "NotFoundException":
                return None
            raise translate(exc, SearchBackendError, "read a tenant's key (kms:DescribeKey)") from exc
        except BotoCoreError as exc:
            raise translate(exc, SearchBackendError, "read a tenant's key (kms:DescribeKey)") from exc
        metadata: dict[str, Any] = answer["KeyMetadata"]
        return metadata

    def _discard(self, key_id: str) -> None:
        """Schedule the deletion of a key this run created and will not use; a failure is logged (the key
        is tagged and aliasless: docs/operations.md says how to find such keys)."""
        try:
            self._kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=MIN_DELETION_DAYS)
        except (ClientError, BotoCoreError):
            logger.warning("could not schedule the deletion of an unused tenant key", extra={"key_id": key_id})

    @staticmethod
    def _call(action: str, operation: Callable[..., Any], **params: Any) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = operation(**params)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, SearchBackendError, action) from exc
        return answer


def _usable(metadata: dict[str, Any], alias: str) -> str:
    """The key's ARN if it can encrypt a new index; a key pending deletion is an erasure still running."""
    if metadata.get("KeyState") != "Enabled":
        raise SearchBackendError(
            f"the tenant's key is {metadata.get('KeyState')} (an erasure scheduled its deletion); retry once the "
            "erasure has ended",
            details={"alias": alias, "key_state": str(metadata.get("KeyState"))},
        )
    return str(metadata["Arn"])


def _partition_and_account(bucket_arn: str) -> tuple[str, str]:
    """`arn:<partition>:s3vectors:<region>:<account>:bucket/<name>`'s partition and account."""
    parts = bucket_arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "s3vectors" or not parts[5].startswith("bucket/"):
        raise ValueError(f"not a vector bucket ARN: {bucket_arn!r}")
    return parts[1], parts[4]
