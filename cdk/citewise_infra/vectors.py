"""Search mode `s3vectors`: one Amazon S3 Vectors bucket, an index per tenant (docs/s3vectors-design.md).

Nothing runs while nobody asks: no domain, no collection, no bootstrap. The ingest function creates a
tenant's index on the tenant's first document (`citewise.aws.s3vectors`), so the stack declares the
bucket alone, encrypted with the stack's key (SSE-KMS), with a bucket policy refusing any request not
sent over TLS.

Each function's role is granted the S3 Vectors actions its code calls (`VectorAccess`), on the indexes
of tenants only (`<bucket ARN>/index/t-*`, the names `s3vectors_requests.index_name` makes), plus the
bucket itself for the bucket-level calls of `ensure` (the embedder's tags, which the pipeline checks
before its first write or delete):

- WRITE (ingest): PutVectors, DeleteVectors, CreateIndex, GetIndex, QueryVectors + GetVectors (the
  replace loop, the vectors reused by content hash);
- DELETE (documents): DeleteVectors, GetIndex, QueryVectors + GetVectors (a document's vectors are found
  by a filtered query);
- ERASE (erasure): ListVectors, DeleteVectors, DeleteIndex, GetIndex;
- VECTOR_SPACE (ingest, documents): GetVectorBucket, ListTagsForResource on the bucket (`ensure` reads
  the embedder's tags); TAG_SPACE (ingest): TagResource on the bucket (`ensure` tags a bucket without
  them, at the first document).

With `search.key_per_tenant` each tenant's index is created under a KMS key of its own
(`citewise.aws.tenant_keys`), and the roles get exactly the KMS calls of that code, on keys carrying the
stack's tag (`aws:ResourceTag/citewise:stack`) and aliases under `alias/<scope>/t-*`:
- KEY_CREATE (ingest): CreateKey and TagResource only with the stack's tag and the tenant tag
  (`aws:RequestTag`, `aws:TagKeys`: CreateKey with tags needs both actions); CreateAlias on the tenant
  aliases and on stack-tagged keys; DescribeKey (the alias lookup); ScheduleKeyDeletion (a key that lost
  the alias race is discarded);
- KEY_DESTROY (erasure): DescribeKey, ScheduleKeyDeletion, DeleteAlias on stack-tagged keys and tenant
  aliases;
- the tenant-reader role (`grant_tenant_key_reads`): Decrypt on stack-tagged keys through S3 Vectors only.

A QueryVectors with a filter or metadata also needs GetVectors (the S3 Vectors permissions reference),
so both go together. The functions that read (query, MCP) get nothing here: their reads are fenced per
tenant by the tenant-reader role (issue 28, section 3), not by their own roles.
"""

from __future__ import annotations

import enum

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3vectors as s3vectors
from constructs import Construct

from citewise.aws.s3vectors_requests import INDEX_PREFIX
from citewise.aws.tenant_keys import STACK_TAG, TENANT_TAG
from citewise_infra.config import EnvironmentConfig
from citewise_infra.nag import acknowledge


class VectorAccess(enum.Enum):
    """What a function may do with the tenants' vector indexes (see the module's table)."""

    WRITE = "write"
    DELETE = "delete"
    ERASE = "erase"
    VECTOR_SPACE = "vector-space"
    TAG_SPACE = "tag-space"
    KEY_CREATE = "key-create"
    KEY_DESTROY = "key-destroy"


_INDEX_ACTIONS: dict[VectorAccess, tuple[str, ...]] = {
    VectorAccess.WRITE: (
        "s3vectors:PutVectors",
        "s3vectors:DeleteVectors",
        "s3vectors:CreateIndex",
        "s3vectors:GetIndex",
        "s3vectors:QueryVectors",
        "s3vectors:GetVectors",
    ),
    VectorAccess.DELETE: (
        "s3vectors:DeleteVectors",
        "s3vectors:GetIndex",
        "s3vectors:QueryVectors",
        "s3vectors:GetVectors",
    ),
    VectorAccess.ERASE: (
        "s3vectors:ListVectors",
        "s3vectors:DeleteVectors",
        "s3vectors:DeleteIndex",
        "s3vectors:GetIndex",
    ),
}
_BUCKET_ACTIONS: dict[VectorAccess, tuple[str, ...]] = {
    VectorAccess.VECTOR_SPACE: ("s3vectors:GetVectorBucket", "s3vectors:ListTagsForResource"),
    VectorAccess.TAG_SPACE: ("s3vectors:TagResource",),
}


class VectorStore(Construct):
    """The vector bucket of an environment in search mode `s3vectors`.

    `bucket_name`, `bucket_arn` and `index_arns` (the pattern of every tenant's index) are what other
    constructs need: the functions' settings and grants, and the tenant-reader role.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self._deletion_days = config.search.key_deletion_days
        # Named, so that a policy can name the bucket and its indexes without a reference to the resource
        # (3-63 characters of [a-z0-9-]; environment names are at most 16).
        self.bucket_name = f"citewise-{config.name}-vectors"
        self.bucket_arn = stack.format_arn(service="s3vectors", resource="bucket", resource_name=self.bucket_name)
        self.index_arns = f"{self.bucket_arn}/index/{INDEX_PREFIX}*"
        # A key per tenant: the keys' tag value and alias prefix (`alias/<scope>/t-...`), and their ARNs.
        self.key_per_tenant = config.search.key_per_tenant
        self.key_scope = f"citewise-{config.name}"
        self.tenant_keys_arn = stack.format_arn(service="kms", resource="key", resource_name="*")
        self.tenant_aliases_arn = stack.format_arn(
            service="kms", resource="alias", resource_name=f"{self.key_scope}/{INDEX_PREFIX}*"
        )
        self.bucket = s3vectors.CfnVectorBucket(
            self,
            "Bucket",
            vector_bucket_name=self.bucket_name,
            encryption_configuration=s3vectors.CfnVectorBucket.EncryptionConfigurationProperty(
                sse_type="aws:kms", kms_key_arn=key.key_arn
            ),
        )
        self.bucket.apply_removal_policy(config.removal)
        self._allow_indexing(key)
        self.policy = s3vectors.CfnVectorBucketPolicy(
            self,
            "Policy",
            vector_bucket_name=self.bucket_name,
            policy={
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "DenyWithoutTls",
                        "Effect": "Deny",
                        "Principal": "*",
                        "Action": "s3vectors:*",
                        "Resource": [self.bucket_arn, f"{self.bucket_arn}/*"],
                        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                    }
                ],
            },
        )
        self.policy.node.add_dependency(self.bucket)  # it names the bucket, not a reference to it

    def _allow_indexing(self, key: kms.IKey) -> None:
        """S3 Vectors' background indexing reads the vectors with the bucket's key as its own service
        principal (the S3 Vectors encryption page), for this bucket only."""
        stack = Stack.of(self)
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("indexing.s3vectors.amazonaws.com")],
                actions=["kms:Decrypt"],
                resources=["*"],  # in a key policy, `*` is this key
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": f"{self.bucket_arn}*"},
                },
            )
        )

    def grant(self, role: iam.IRole, *access: VectorAccess) -> None:
        """Allow `role` `access` to the tenants' indexes (and the bucket, for its tags)."""
        index_actions = sorted({action for capability in access for action in _INDEX_ACTIONS.get(capability, ())})
        bucket_actions = sorted({action for capability in access for action in _BUCKET_ACTIONS.get(capability, ())})
        if index_actions:
            role.add_to_principal_policy(iam.PolicyStatement(actions=index_actions, resources=[self.index_arns]))
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{_as_nag_renders(Stack.of(self).resolve(self.index_arns))}]",
                "Every tenant has its own index, created by its first document, so the stack cannot name them: "
                f"the grant covers the tenants' indexes ({INDEX_PREFIX}*) of this one vector bucket, nothing else.",
            )
        if bucket_actions:
            role.add_to_principal_policy(iam.PolicyStatement(actions=bucket_actions, resources=[self.bucket_arn]))
        if self.key_per_tenant and VectorAccess.KEY_CREATE in access:
            self._grant_key_creation(role)
        if self.key_per_tenant and VectorAccess.KEY_DESTROY in access:
            self._grant_tenant_keys(role, "kms:DeleteAlias", "kms:DescribeKey", "kms:ScheduleKeyDeletion")

    def environment(self) -> dict[str, str]:
        """The functions' settings of this store: the bucket, and with a key per tenant what its keys need."""
        values = {"vector_bucket": self.bucket_name}
        if self.key_per_tenant:
            values.update(
                vector_bucket_arn=self.bucket_arn,
                tenant_key_scope=self.key_scope,
                tenant_key_deletion_days=str(self._deletion_days),
            )
        return values

    def grant_tenant_key_reads(self, role: iam.IRole) -> None:
        """With a key per tenant, let `role` (the tenant-reader role) decrypt with the tenants' keys, only
        through S3 Vectors: the stack's tag names them (a session narrows it to its tenant's tag)."""
        if not self.key_per_tenant:
            return
        region = Stack.of(self).region
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt"],
                resources=[self.tenant_keys_arn],
                conditions={
                    "StringEquals": {
                        "kms:ViaService": f"s3vectors.{region}.amazonaws.com",
                        f"aws:ResourceTag/{STACK_TAG}": self.key_scope,
                    }
                },
            )
        )
        self._acknowledge_keys(role)

    def _grant_key_creation(self, role: iam.IRole) -> None:
        """CreateKey (and the TagResource its tags need) only with the stack's tag and a tenant's; then the
        alias, the lookup, and the discard of a key that lost the alias race."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kms:CreateKey", "kms:TagResource"],
                resources=["*"],
                conditions={
                    "StringEquals": {f"aws:RequestTag/{STACK_TAG}": self.key_scope},
                    "StringLike": {f"aws:RequestTag/{TENANT_TAG}": f"{INDEX_PREFIX}*"},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [STACK_TAG, TENANT_TAG]},
                },
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "kms:CreateKey names no resource (the key does not exist yet), nor does the TagResource that CreateKey "
            "with tags needs: both are allowed only with this stack's tag and a tenant index's tag (aws:RequestTag, "
            "aws:TagKeys), so every key the role makes is one the stack's other grants name.",
        )
        self._grant_tenant_keys(role, "kms:CreateAlias", "kms:DescribeKey", "kms:ScheduleKeyDeletion")

    def _grant_tenant_keys(self, role: iam.IRole, *actions: str) -> None:
        """`actions` on the stack's tenant keys (by tag), the alias ones also on the tenant aliases."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=sorted(actions),
                resources=[self.tenant_keys_arn],
                conditions={"StringEquals": {f"aws:ResourceTag/{STACK_TAG}": self.key_scope}},
            )
        )
        if on_alias := sorted(a for a in actions if a in ("kms:CreateAlias", "kms:DeleteAlias")):
            role.add_to_principal_policy(iam.PolicyStatement(actions=on_alias, resources=[self.tenant_aliases_arn]))
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{_as_nag_renders(Stack.of(self).resolve(self.tenant_aliases_arn))}]",
                "Each tenant's key alias is made with its first index, so the stack cannot name them: the grant "
                f"covers this stack's tenant aliases (alias/{self.key_scope}/{INDEX_PREFIX}*) only.",
            )
        self._acknowledge_keys(role)

    def _acknowledge_keys(self, role: iam.IRole) -> None:
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{_as_nag_renders(Stack.of(self).resolve(self.tenant_keys_arn))}]",
            "Each tenant's key is created with its first index, so the stack cannot name them: the grant is "
            f"conditioned on the tag every tenant key of this stack carries (aws:ResourceTag/{STACK_TAG}).",
        )


def _as_nag_renders(value: object) -> str:
    """A resolved ARN as cdk-nag names it in a finding: `Fn::Join` concatenated, a `Ref` as `<Name>`."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_as_nag_renders(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return str(value)
