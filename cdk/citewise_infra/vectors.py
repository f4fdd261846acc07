"""Search mode s3vectors: the vector bucket, encrypted with the stack's key; S3 Vectors indexes are per
tenant, created by the functions that write (docs/s3vectors-design.md).

A minimal bucket for the tenant reader (`citewise_infra.tenant_reader`) to fence: the mode itself (the
key policy for S3 Vectors' indexing, the writing functions' grants, the factory) is built elsewhere.
"""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3vectors as s3vectors
from constructs import Construct

from citewise_infra.config import EnvironmentConfig


class VectorBucket(Construct):
    """One vector bucket per stack, under the stack's key."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3vectors.CfnVectorBucket(
            self,
            "Bucket",
            encryption_configuration=s3vectors.CfnVectorBucket.EncryptionConfigurationProperty(
                sse_type="aws:kms", kms_key_arn=key.key_arn
            ),
        )
        self.bucket.apply_removal_policy(config.removal)
        self.bucket_arn = self.bucket.attr_vector_bucket_arn
