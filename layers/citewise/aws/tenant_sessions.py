"""Per-tenant read credentials for search mode s3vectors: a tenant's reads can reach its own index only.

In this mode each tenant has an index of its own (`s3vectors_requests.index_name`), so the tenant boundary
is a resource IAM can fence, not only a filter code must remember. The functions that read (query, MCP)
hold no S3 Vectors permission of their own: for each tenant they assume the tenant-reader role
(`cdk/citewise_infra/tenant_reader.py`, allowed `READ_ACTIONS` on every tenant index of the bucket) with
an inline session policy allowing those actions on that tenant's index alone. A session's permissions
are the intersection of the role's policy and the session policy, so credentials obtained for tenant A
are refused on tenant B's index by IAM, whatever the code that holds them asks (docs/s3vectors-design.md,
"Isolation by resource").

`TenantSessions.client(tenant_id)` answers an `s3vectors` client on that tenant's credentials. Each is
kept, per tenant, until `REFRESH_MARGIN` before its credentials expire, so a warm process calls
`sts:AssumeRole` once per tenant per `SESSION_SECONDS` (less the margin); at most `capacity` tenants are
kept (least recently used first out). One lock guards the cache and the call: the retriever's two
concurrent searches of a cold tenant make one AssumeRole, not two (a Lambda execution environment serves
one request at a time, so holding the lock across the call delays no other tenant there). A failed
AssumeRole is the search backend's error (throttling: ThrottledError, a 429), never a 500.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws.clients import translate
from citewise.aws.s3vectors_requests import index_name
from citewise.aws.tenant_keys import TENANT_TAG
from citewise.domain.errors import SearchBackendError

# What the read path of `S3VectorsIndex` calls (GetIndex, QueryVectors: searches and the sources markers)
# and what it needs besides: QueryVectors with a filter or metadata also needs GetVectors (the QueryVectors
# page of the S3 API reference, "Permissions"). No listing: only the erasure lists an index.
READ_ACTIONS = ("s3vectors:GetIndex", "s3vectors:GetVectors", "s3vectors:QueryVectors")
SESSION_SECONDS = 3600
"""The credentials' lifetime: the most a role session may last when it is assumed from a role session, as
a Lambda function's credentials are (role chaining), and the reader role's maximum."""
REFRESH_MARGIN = timedelta(minutes=5)
"""Credentials this close to their expiry are renewed first: far more than a request's 24 s budget."""
MAX_SESSION_POLICY = 2048
"""The plaintext limit of an inline session policy (the AssumeRole API reference, `Policy`)."""

Credentials = Mapping[str, Any]
"""What AssumeRole answers as `Credentials`: AccessKeyId, SecretAccessKey, SessionToken, Expiration."""


def bucket_arn(partition: str, region: str, account: str, bucket: str) -> str:
    """A vector bucket's ARN (the Service Authorization Reference, Amazon S3 Vectors, resource types)."""
    return f"arn:{partition}:s3vectors:{region}:{account}:bucket/{bucket}"


def session_policy(index_arn: str, region: str, *, tenant_key: str | None = None) -> str:
    """The inline session policy of one tenant's reads: `READ_ACTIONS` on its index, and the decryption
    S3 Vectors asks on the caller's behalf for an index under a customer managed key (the role's policy
    names the keys), compact JSON. With a key per tenant, `tenant_key` (the index's name, which its key
    carries as `TENANT_TAG`) narrows the decryption to that tenant's key."""
    condition: dict[str, dict[str, str]] = {"StringEquals": {"kms:ViaService": f"s3vectors.{region}.amazonaws.com"}}
    if tenant_key is not None:
        condition["StringEquals"][f"aws:ResourceTag/{TENANT_TAG}"] = tenant_key
    statements = [
        {"Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": index_arn},
        {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*", "Condition": condition},
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, separators=(",", ":"))


def session_name(tenant_id: str) -> str:
    """The RoleSessionName of a tenant's session: its index name (3-63 characters of `[a-z0-9-]`, within
    STS's 2-64 of `[\\w+=,.@-]`), so CloudTrail names the tenant whose index a read touched."""
    return index_name(tenant_id)


@dataclass(frozen=True)
class _Session:
    client: Any
    expires: datetime


class TenantSessions:
    """`s3vectors` clients on per-tenant session credentials of the tenant-reader role, cached.

    `sts` is a boto3 STS client (on the function's own credentials); `role_arn` the tenant-reader role;
    `bucket` the vector bucket's name (its ARN's partition and account are the role's, its region
    `region`); `make_client(credentials)` builds an `s3vectors` client on AssumeRole's `Credentials`;
    `key_per_tenant` narrows each session's decryption to its tenant's own key (`session_policy`)."""

    def __init__(
        self,
        sts: Any,
        role_arn: str,
        bucket: str,
        *,
        region: str,
        make_client: Callable[[Credentials], Any],
        capacity: int = 64,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        key_per_tenant: bool = False,
    ) -> None:
        partition, account = _role_partition_and_account(role_arn)
        self._sts = sts
        self._role_arn = role_arn
        self._bucket_arn = bucket_arn(partition, region, account, bucket)
        self._region = region
        self._key_per_tenant = key_per_tenant
        self._make_client = make_client
        self._capacity = capacity
        self._now = now
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    def index_arn(self, tenant_id: str) -> str:
        """The ARN of the tenant's index: the one resource its session may read."""
        return f"{self._bucket_arn}/index/{index_name(tenant_id)}"

    def client(self, tenant_id: str) -> Any:
        """An `s3vectors` client that IAM lets read `tenant_id`'s index and nothing else."""
        with self._lock:
            session = self._sessions.get(tenant_id)
            if session is None or session.expires - REFRESH_MARGIN <= self._now():
                session = self._assume(tenant_id)
                self._sessions[tenant_id] = session
            self._sessions.move_to_end(tenant_id)
            while len(self._sessions) > self._capacity:
                self._sessions.popitem(last=False)
            return session.client

    def _assume(self, tenant_id: str) -> _Session:
        try:
            answer = self._sts.assume_role(
                RoleArn=self._role_arn,
                RoleSessionName=session_name(tenant_id),
                Policy=session_policy(
                    self.index_arn(tenant_id),
                    self._region,
                    tenant_key=index_name(tenant_id) if self._key_per_tenant else None,
                ),
                DurationSeconds=SESSION_SECONDS,
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, SearchBackendError, "obtain the tenant's read credentials (sts:AssumeRole)") from exc
        credentials = answer["Credentials"]
        return _Session(self._make_client(credentials), credentials["Expiration"])


def _role_partition_and_account(role_arn: str) -> tuple[str, str]:
    """`arn:<partition>:iam::<account>:role/<name>`'s partition and account."""
    parts = role_arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "iam" or not parts[5].startswith("role/"):
        raise ValueError(f"not an IAM role ARN: {role_arn!r}")
    return parts[1], parts[4]
