"""IAM statements that let a function invoke exactly the configured Bedrock models, no others.

A model id is either a foundation model (`amazon.nova-lite-v1:0`), invoked in the stack's region, or a
cross-region inference profile (`us.amazon.nova-lite-v1:0`), which Bedrock routes to the same model in
any region of its geography. The profile needs two grants: the profile itself, and the foundation
model in every destination region, the latter only when the request comes through that profile
(`bedrock:InferenceProfileArn`). So the function can call the profile, but not the model directly in
another region, and no other model anywhere.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

# Prefixes of system-defined cross-region inference profiles (geography or global routing).
PROFILE_PREFIXES = frozenset({"us", "us-gov", "eu", "apac", "jp", "au", "ca", "global"})
# Converse is authorised by InvokeModel, ConverseStream by InvokeModelWithResponseStream.
INVOKE = "bedrock:InvokeModel"
INVOKE_STREAM = "bedrock:InvokeModelWithResponseStream"


def split_profile(model_id: str) -> tuple[str | None, str]:
    """`(profile prefix, foundation model id)`: `("us", "amazon.nova-lite-v1:0")` for a profile id,
    `(None, model_id)` for a foundation model id."""
    prefix, _, rest = model_id.partition(".")
    if prefix in PROFILE_PREFIXES and "." in rest:
        return prefix, rest
    return None, model_id


def foundation_model_arn(model_id: str, region: str = Aws.REGION) -> str:
    """The ARN of a foundation model in `region` (`*`: any region)."""
    return f"arn:{Aws.PARTITION}:bedrock:{region}::foundation-model/{model_id}"


def inference_profile_arn(profile_id: str) -> str:
    """The ARN of a system-defined inference profile as seen from this stack's account and region."""
    return f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:inference-profile/{profile_id}"


def invoke_statements(model_id: str, *, streamed: bool = False) -> list[iam.PolicyStatement]:
    """Statements allowing InvokeModel (and so Converse) on `model_id` only; `streamed`: also
    InvokeModelWithResponseStream (ConverseStream, a streamed answer)."""
    actions = [INVOKE, INVOKE_STREAM] if streamed else [INVOKE]
    prefix, foundation_id = split_profile(model_id)
    if prefix is None:
        return [iam.PolicyStatement(actions=actions, resources=[foundation_model_arn(model_id)])]
    profile = inference_profile_arn(model_id)
    return [
        iam.PolicyStatement(actions=actions, resources=[profile]),
        iam.PolicyStatement(
            actions=actions,
            resources=[foundation_model_arn(foundation_id, region="*")],
            conditions={"StringEquals": {"bedrock:InferenceProfileArn": profile}},
        ),
    ]


def guardrail_statement(guardrail_id: str) -> iam.PolicyStatement:
    """ApplyGuardrail on one guardrail: Converse applies a configured guardrail with the caller's rights."""
    arn = f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:guardrail/{guardrail_id}"
    return iam.PolicyStatement(actions=["bedrock:ApplyGuardrail"], resources=[arn])


RERANK = "bedrock:Rerank"


def rerank_statements(model_id: str, region: str | None = None) -> list[iam.PolicyStatement]:
    """What the Rerank API needs (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-prereq.html):
    `bedrock:Rerank`, which has no resource-level permissions (Resource `*`), and InvokeModel on the
    reranker model only, in `region` (None: the stack's)."""
    return [
        iam.PolicyStatement(actions=[RERANK], resources=["*"]),
        iam.PolicyStatement(actions=[INVOKE], resources=[foundation_model_arn(model_id, region or Aws.REGION)]),
    ]
