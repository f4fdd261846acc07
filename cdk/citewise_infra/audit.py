"""The audit trail's resources: a log group of its own and the key that hashes questions.

- The log group (`citewise.aws.cloudwatch_audit` says why CloudWatch Logs and why PutLogEvents): its
  retention is the environment's `audit.retention_days` in cdk.json, independent of the functions' logs;
  encrypted at rest by CloudWatch Logs. The API functions may only CreateLogStream and PutLogEvents on it
  (append); the documents function, which serves the operator's export, also FilterLogEvents. No role
  of the stack may delete a stream or change the retention.
- The questions' hashing key (`citewise.ports.audit.question_hash`): a Secrets Manager secret generated at
  deploy time, so no key is in the code or in cdk.json. It reaches the functions as the variable
  `CITEWISE_AUDIT_HASH_KEY` through a CloudFormation dynamic reference, resolved at deploy time: no
  GetSecretValue on the request path or at cold start. The cost: whoever may read a function's
  configuration reads the key (docs/security.md).
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from citewise_infra.config import EnvironmentConfig
from citewise_infra.nag import acknowledge

WRITE_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
READ_ACTIONS = ("logs:FilterLogEvents",)


class AuditTrail(Construct):
    """The trail's log group and the questions' hashing key, with the grants the functions need."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Trail", retention=config.audit.log_retention, removal_policy=config.removal
        )
        self.hash_key = secretsmanager.Secret(
            self,
            "QuestionHashKey",
            description=f"citewise {config.name}: the key of the audit trail's question hashes (HMAC-SHA256)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True, include_space=False
            ),
            removal_policy=config.removal,
        )
        acknowledge(
            self.hash_key,
            "AwsSolutions-SMG4",
            "Not rotated: a new key would make the hashes of the same question before and after differ, "
            "so the operator could no longer match a question across the trail; it is a pepper, not a credential.",
        )

    def values(self) -> dict[str, str]:
        """The settings of a function that writes the trail: where it is, and the hashing key."""
        return {
            "audit_log_group": self.log_group.log_group_name,
            "audit_hash_key": self.hash_key.secret_value.unsafe_unwrap(),
        }

    def grant_write(self, role: iam.IRole) -> None:
        """Append to the trail: create a stream and put events in it, nothing else."""
        self.log_group.grant(role, *WRITE_ACTIONS)

    def grant_read(self, role: iam.IRole) -> None:
        """Read the trail back (the operator's export): FilterLogEvents on this group only."""
        self.log_group.grant(role, *READ_ACTIONS)
