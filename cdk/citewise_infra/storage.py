"""Storage: the KMS key, the documents bucket (and its access-log bucket) and the document registry table.

One customer managed key encrypts the documents, the registry, the queues, the alarm topic and the
search data, so access to the data can be audited and revoked in one place (CloudTrail records every
use of the key). The registry table is built from `citewise.aws.dynamodb.TABLE_SCHEMA`, the same
definition the adapter and its tests use, so the deployed keys and index cannot drift from the code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from citewise.aws.dynamodb import QUOTAS_ATTRIBUTE, SETTINGS_ATTRIBUTE, TABLE_SCHEMA, TTL_ATTRIBUTE
from citewise.aws.dynamodb_conversations import CONVERSATIONS_PREFIX
from citewise.aws.dynamodb_credentials import CREDENTIALS_PARTITION
from citewise.aws.dynamodb_erasure import STATUS_ATTRIBUTE
from citewise.aws.dynamodb_feedback import FEEDBACK_PREFIX
from citewise.aws.dynamodb_rates import TAT_ATTRIBUTE
from citewise.aws.dynamodb_sources import DUE_PARTITION, SOURCES_PREFIX
from citewise.domain.sources import DOCUMENT_PREFIX as SOURCE_DOCUMENTS
from citewise.ports.usage import COUNTERS
from citewise_infra.config import EnvironmentConfig
from citewise_infra.constants import DOCUMENTS_PREFIX
from citewise_infra.nag import acknowledge

_OWN_PARTITION_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
)
"""What a function may do in partitions that hold nothing but its own kind of item (conversations, web
sources), deleting included: the exceptions to "only the erasure function deletes items"."""
_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def _keys(
    schema: Mapping[str, Any], key_schema: Sequence[Mapping[str, str]]
) -> tuple[dynamodb.Attribute, dynamodb.Attribute | None]:
    """(partition key, sort key or None) of a `KeySchema` of `schema` (a CreateTable request)."""
    types = {d["AttributeName"]: d["AttributeType"] for d in schema["AttributeDefinitions"]}
    keys = {
        key["KeyType"]: dynamodb.Attribute(
            name=key["AttributeName"], type=_ATTRIBUTE_TYPES[types[key["AttributeName"]]]
        )
        for key in key_schema
    }
    return keys["HASH"], keys.get("RANGE")


class Storage(Construct):
    """The key, the buckets and the registry table of one environment."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._removal = config.removal
        self.key = self._build_key()
        self.access_logs = self._build_access_log_bucket()
        self.bucket = self._build_documents_bucket()
        if config.api.cors_allow_origins:
            self.allow_browsers(config.api.cors_allow_origins)
        self.table = self._build_registry_table()

    # --- resources -----------------------------------------------------------------------------------------

    def _build_key(self) -> kms.Key:
        return kms.Key(
            self,
            "Key",
            description=f"citewise {self._config.name}: documents, registry, queues, alarms and search data",
            enable_key_rotation=True,
            removal_policy=self._removal,
            pending_window=Duration.days(7 if self._config.destroy_on_delete else 30),
        )

    def _build_access_log_bucket(self) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            "AccessLogs",
            # S3 server access logging can only deliver to a bucket encrypted with S3-managed keys.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(self._config.data.access_log_days))
            ],
            removal_policy=self._removal,
            auto_delete_objects=self._config.destroy_on_delete,
        )
        return bucket

    def _build_documents_bucket(self) -> s3.Bucket:
        config = self._config
        return s3.Bucket(
            self,
            "Documents",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,  # one data key per bucket and period, not a KMS call per object
            versioned=True,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="documents/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="old-versions-and-uploads",
                    noncurrent_version_expiration=Duration.days(config.data.noncurrent_version_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                    expired_object_delete_marker=True,
                )
            ],
            removal_policy=self._removal,
            auto_delete_objects=config.destroy_on_delete,
        )

    def allow_browsers(self, origins: Sequence[str]) -> None:
        """Let pages on `origins` use the documents bucket's presigned URLs: PUT (uploads, POST /v1/uploads),
        and GET (the original behind a citation, which pdf.js may read in byte ranges)."""
        self.bucket.add_cors_rule(
            allowed_methods=[s3.HttpMethods.PUT, s3.HttpMethods.GET],
            allowed_origins=list(origins),
            allowed_headers=["*"],
            # What pdf.js reads to fetch a PDF in ranges; without them it reads the whole file.
            exposed_headers=["Accept-Ranges", "Content-Length", "Content-Range", "ETag"],
            max_age=3000,
        )

    def _build_registry_table(self) -> dynamodb.Table:
        schema = TABLE_SCHEMA
        if schema["BillingMode"] != "PAY_PER_REQUEST":
            raise ValueError("the registry schema changed billing mode: update the table construct")
        partition_key, sort_key = _keys(schema, schema["KeySchema"])
        table = dynamodb.Table(
            self,
            "Registry",
            partition_key=partition_key,
            sort_key=sort_key,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=self.key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=not self._config.destroy_on_delete,
            removal_policy=self._removal,
            time_to_live_attribute=TTL_ATTRIBUTE,  # delete tombstones expire; records never carry it
        )
        for index in schema.get("GlobalSecondaryIndexes", []):
            index_partition, index_sort = _keys(schema, index["KeySchema"])
            table.add_global_secondary_index(
                index_name=index["IndexName"],
                partition_key=index_partition,
                sort_key=index_sort,
                projection_type=dynamodb.ProjectionType(index["Projection"]["ProjectionType"]),
            )
        return table

    # --- grants --------------------------------------------------------------------------------------------

    def _object_arn(self) -> str:
        return self.bucket.arn_for_objects(f"{DOCUMENTS_PREFIX}*")

    def _list_bucket(self) -> iam.PolicyStatement:
        # Unconditional: S3 answers a HEAD of a missing key 404 only to a caller allowed to list the
        # bucket (403 otherwise), and `s3:prefix` is not set on a HEAD, so a prefix condition would hide it.
        return iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn])

    def grant_read_documents(self, role: iam.IRole) -> None:
        """HeadObject/GetObject of any version under `tenants/`, and decryption of what it reads."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject", "s3:GetObjectVersion"], resources=[self._object_arn()])
        )
        role.add_to_principal_policy(self._list_bucket())
        self._grant_key(role, "s3", "kms:Decrypt")
        self._acknowledge_prefix(role)

    def grant_restore_documents(self, role: iam.IRole) -> None:
        """Copy an earlier version of an object back over it, to undo a write that ingestion refused: list
        an object's versions, and PutObject only as a copy from under `tenants/` (never new content)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucketVersions"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{DOCUMENTS_PREFIX}*"]}},
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                resources=[self._object_arn()],
                conditions={"StringLike": {"s3:x-amz-copy-source": [f"{self.bucket.bucket_name}/{DOCUMENTS_PREFIX}*"]}},
            )
        )
        self._grant_key(role, "s3", "kms:GenerateDataKey")

    def grant_manage_documents(self, role: iam.IRole) -> None:
        """Put (presigned uploads), head, get (any version: presigned downloads of the indexed one) and delete
        objects under `tenants/`; encrypt and decrypt."""
        actions = ["s3:PutObject", "s3:GetObject", "s3:GetObjectVersion", "s3:DeleteObject"]
        role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=[self._object_arn()]))
        role.add_to_principal_policy(self._list_bucket())
        self._grant_key(role, "s3", "kms:Decrypt", "kms:GenerateDataKey")
        self._acknowledge_prefix(role)

    def grant_registry(self, role: iam.IRole, actions: Iterable[str]) -> None:
        """`actions` on the registry table and its indexes (and the key that encrypts them)."""
        self.table.grant(role, *actions)
        self._grant_key(role, "dynamodb", "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")
        self._acknowledge_indexes(role)

    def grant_read_registry(self, role: iam.IRole) -> None:
        """GetItem and Query on the registry table and its indexes, and decryption only: a reader."""
        self.table.grant(role, "dynamodb:GetItem", "dynamodb:Query")
        self._grant_key(role, "dynamodb", "kms:Decrypt", "kms:DescribeKey")
        self._acknowledge_indexes(role)

    def _acknowledge_indexes(self, role: iam.IRole) -> None:
        table_id = Stack.of(self).get_logical_id(self.table.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{table_id}.Arn>/index/*]",
            "The registry lists documents through its by_path GSI; the grant covers the table's own "
            "indexes only, with item-level actions (no scan, no table management).",
        )

    def grant_erase_tenants(self, role: iam.IRole) -> None:
        """What erasing a tenant needs (`citewise.ports.erasure`), for the erasure function alone: the
        registry table (its items and erasure records: GetItem, Query, UpdateItem; and deleting items,
        which no other role may), every version and delete marker under `tenants/` (list versions with
        that prefix, delete versions), and the storage key through S3 and DynamoDB."""
        self.table.grant(
            role,
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
        )
        self._grant_key(role, "dynamodb", "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")
        self._acknowledge_indexes(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucketVersions"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{DOCUMENTS_PREFIX}*"]}},
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:DeleteObject", "s3:DeleteObjectVersion"], resources=[self._object_arn()])
        )
        self._grant_key(role, "s3", "kms:Decrypt")
        self._acknowledge_prefix(role)

    def grant_read_tenant_settings(self, role: iam.IRole) -> None:
        """GetItem of the registry table returning only the tenants' settings attribute, the status of an
        erasure record (`citewise.aws.dynamodb_erasure`: every request checks it) and the keys: a document
        item's attributes stay unreadable (`dynamodb:Attributes`, `dynamodb:Select`)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem"],
                resources=[self.table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {
                        "dynamodb:Attributes": [*_key_names(), SETTINGS_ATTRIBUTE, STATUS_ATTRIBUTE]
                    },
                    "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
                },
            )
        )
        self._grant_key(role, "dynamodb", "kms:Decrypt", "kms:DescribeKey")

    def grant_read_credentials(self, role: iam.IRole) -> None:
        """GetItem of the registry table's credential items only (`citewise.aws.dynamodb_credentials`, the
        partition `#credentials`, by `dynamodb:LeadingKeys`): a function that answers a program's request
        reads its credential's record, and nothing of any tenant's partition by this grant."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem"],
                resources=[self.table.table_arn],
                conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CREDENTIALS_PARTITION]}},
            )
        )
        self._grant_key(role, "dynamodb", "kms:Decrypt", "kms:DescribeKey")

    def grant_conversations(self, role: iam.IRole) -> None:
        """Read, write and delete the items of the tenants' conversation partitions only
        (`citewise.aws.dynamodb_conversations`, partition keys `#conversations#<tenant>`, by
        `dynamodb:LeadingKeys`): the functions that answer record each turn and serve a user's
        conversations, and reach no document, settings or credential item by this grant. The one
        exception to "only the erasure function deletes items": deleting a conversation is its user's
        right, and these partitions hold nothing else."""
        self._grant_partitions(role, _OWN_PARTITION_ACTIONS, [f"{CONVERSATIONS_PREFIX}*"], writes=True)

    def grant_sources(self, role: iam.IRole) -> None:
        """Read, write and delete the items of the tenants' source partitions and of the schedule's
        (`citewise.aws.dynamodb_sources`, partition keys `#sources#<tenant>` and `#sources-due`, by
        `dynamodb:LeadingKeys`): the documents function registers and removes sources, the refresh function
        keeps their pages' states; neither reaches a document, settings or credential item by this grant.
        Deleting is the second exception to "only the erasure function deletes items": removing a source is
        its admin's right, and these partitions hold nothing else."""
        self._grant_partitions(role, _OWN_PARTITION_ACTIONS, [f"{SOURCES_PREFIX}*", DUE_PARTITION], writes=True)

    def grant_write_source_pages(self, role: iam.IRole) -> None:
        """Put and delete the objects of web sources' pages only (`tenants/<tenant>/sources/...`,
        `citewise.domain.sources.page_path`): the refresh function writes no upload, reads no object."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:DeleteObject"],
                resources=[self.bucket.arn_for_objects(f"{DOCUMENTS_PREFIX}*/{SOURCE_DOCUMENTS}*")],
            )
        )
        self._grant_key(role, "s3", "kms:GenerateDataKey")
        bucket_id = Stack.of(self).get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{DOCUMENTS_PREFIX}*/{SOURCE_DOCUMENTS}*]",
            "Web pages are stored under tenants/{tenant}/sources/: the function refreshes every tenant's "
            "sources, so it needs that folder of each tenant, and nothing else of the bucket.",
        )

    def grant_feedback(self, role: iam.IRole, *, write: bool) -> None:
        """Read the items of the tenants' feedback partitions only (`citewise.aws.dynamodb_feedback`,
        partition keys `#feedback#<tenant>`, by `dynamodb:LeadingKeys`): the ranking signal's tallies and a
        source's stats; with `write`, give feedback too (UpdateItem in a transaction). Never a delete:
        feedback is erased with its tenant only."""
        actions = ["dynamodb:GetItem", "dynamodb:Query", *(["dynamodb:UpdateItem"] if write else [])]
        self._grant_partitions(role, actions, [f"{FEEDBACK_PREFIX}*"], writes=write)

    def grant_count_usage(self, role: iam.IRole) -> None:
        """UpdateItem of the registry table touching only the key and the usage counters
        (`citewise.aws.dynamodb_usage`), returning nothing: the query and MCP functions count a tenant's
        queries without being able to change, or read, any attribute of a document or settings item."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:UpdateItem"],
                resources=[self.table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:Attributes": [*_key_names(), *COUNTERS]},
                    "StringEqualsIfExists": {"dynamodb:ReturnValues": "NONE"},
                },
            )
        )
        self._grant_key(role, "dynamodb", "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")

    def grant_check_quotas(self, role: iam.IRole) -> None:
        """What the quota checks of a query need (`citewise.ports.quotas`), attribute by attribute: read the
        tenant's quota overrides, its token bucket and today's usage counters (GetItem, Query), and take a
        token from the bucket (UpdateItem of `tat_us` only, returning nothing). No document or settings
        attribute is readable or writable through these."""
        readable = [*_key_names(), QUOTAS_ATTRIBUTE, TAT_ATTRIBUTE, *COUNTERS]
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:Query"],
                resources=[self.table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:Attributes": readable},
                    "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
                },
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:UpdateItem"],
                resources=[self.table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:Attributes": [*_key_names(), TAT_ATTRIBUTE]},
                    "StringEqualsIfExists": {"dynamodb:ReturnValues": "NONE"},
                },
            )
        )
        self._grant_key(role, "dynamodb", "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")

    def _grant_partitions(
        self, role: iam.IRole, actions: Sequence[str], partitions: Sequence[str], *, writes: bool
    ) -> None:
        """`actions` on the registry table's items whose partition key matches one of `partitions`
        (`dynamodb:LeadingKeys`, `*` as a wildcard), and the storage key for them: to decrypt, and with
        `writes` to encrypt too."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions),
                resources=[self.table.table_arn],
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(partitions)}},
            )
        )
        kms = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey") if writes else ("kms:Decrypt",)
        self._grant_key(role, "dynamodb", *kms, "kms:DescribeKey")

    def _grant_key(self, role: iam.IRole, service: str, *actions: str) -> None:
        """`actions` on the storage key, only in requests that `service` (s3, dynamodb) makes for the role."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions),
                resources=[self.key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"{service}.{Stack.of(self).region}.amazonaws.com"}},
            )
        )

    def _acknowledge_prefix(self, role: iam.IRole) -> None:
        bucket_id = Stack.of(self).get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{DOCUMENTS_PREFIX}*]",
            "Objects live under tenants/{tenant}/: the function serves every tenant and derives the tenant "
            "from the key or the caller, so it needs the whole tenants/ prefix of this one bucket.",
        )


def _key_names() -> list[str]:
    """The registry table's key attributes (partition, sort)."""
    return [key["AttributeName"] for key in TABLE_SCHEMA["KeySchema"]]
