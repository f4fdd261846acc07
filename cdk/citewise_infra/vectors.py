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
from citewise_infra.config import EnvironmentConfig
from citewise_infra.nag import acknowledge


class VectorAccess(enum.Enum):
    """What a function may do with the tenants' vector indexes (see the module's table)."""

    WRITE = "write"
    DELETE = "delete"
    ERASE = "erase"
    VECTOR_SPACE = "vector-space"
    TAG_SPACE = "tag-space"


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
        # Named, so that a policy can name the bucket and its indexes without a reference to the resource
        # (3-63 characters of [a-z0-9-]; environment names are at most 16).
        self.bucket_name = f"citewise-{config.name}-vectors"
        self.bucket_arn = stack.format_arn(service="s3vectors", resource="bucket", resource_name=self.bucket_name)
        self.index_arns = f"{self.bucket_arn}/index/{INDEX_PREFIX}*"
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


def _as_nag_renders(value: object) -> str:
    """A resolved ARN as cdk-nag names it in a finding: `Fn::Join` concatenated, a `Ref` as `<Name>`."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_as_nag_renders(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return str(value)
