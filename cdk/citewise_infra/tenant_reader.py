"""Search mode s3vectors: the tenant-reader role, through which the reading functions reach a tenant's index.

The reading functions (query and MCP) get no S3 Vectors permission on their own roles. They may only
assume this role (`sts:AssumeRole`, no session tags), and only with it can anything read an index: the
role allows `citewise.aws.tenant_sessions.READ_ACTIONS` on the tenant indexes of the bucket
(`<bucket ARN>/index/t-*`), and decryption with the bucket's key through S3 Vectors. The functions assume
it once per tenant with an inline session policy naming that tenant's index alone, and IAM grants a
session only what both the role's policy and the session policy allow: tenant A's session is refused
on tenant B's index, and any session is refused writes. tests/infrastructure/test_tenant_reader.py
evaluates the two policies of this template; docs/s3vectors-design.md, "Isolation by resource", says why.

The documents function is not a reader: its only index call is a document's delete, a write that keeps
its own role's grant, as the ingest and erasure functions' writes do.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from citewise.aws.s3vectors_requests import INDEX_PREFIX
from citewise.aws.tenant_sessions import READ_ACTIONS, SESSION_SECONDS
from citewise.runtime.settings import Settings
from citewise_infra.config import EnvironmentConfig
from citewise_infra.functions import CitewiseFunction, settings_environment
from citewise_infra.nag import acknowledge


class TenantReader(Construct):
    """The tenant-reader role over the vector bucket `bucket_arn` (encrypted with `key`, if a customer
    managed key), assumable by `readers` only, whose functions are told its ARN."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        bucket_arn: str,
        key: kms.IKey | None,
        readers: Sequence[CitewiseFunction],
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.CompositePrincipal(*(iam.ArnPrincipal(fn.role.role_arn) for fn in readers)),
            max_session_duration=Duration.seconds(SESSION_SECONDS),
            description=f"citewise {config.name}: reads of one tenant's S3 Vectors index, per session policy",
        )
        self.indexes = f"{bucket_arn}/index/{INDEX_PREFIX}*"
        self.role.add_to_policy(iam.PolicyStatement(actions=list(READ_ACTIONS), resources=[self.indexes]))
        if key is not None:
            region = Stack.of(self).region
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt"],
                    resources=[key.key_arn],
                    conditions={"StringEquals": {"kms:ViaService": f"s3vectors.{region}.amazonaws.com"}},
                )
            )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{_nag_name(Stack.of(self).resolve(self.indexes))}]",
            "One index per tenant, created on its first write: the role must reach every tenant index of this "
            "one bucket, and each session of it is limited to one tenant's index by its session policy.",
        )
        for fn in readers:
            fn.add(iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[self.role.role_arn]))
            for name, value in settings_environment(Settings, {"tenant_reader_role_arn": self.role.role_arn}).items():
                fn.function.add_environment(name, value)


def _nag_name(value: object) -> str:
    """A resolved ARN as cdk-nag names it in a finding: `Fn::Join` concatenated, a `Fn::GetAtt` as
    `<LogicalId.Attribute>`, a `Ref` as `<LogicalId>` (a bucket ARN of either kind works here)."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_nag_name(part) for part in parts)
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return f"<{logical_id}.{attribute}>"
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return str(value)
