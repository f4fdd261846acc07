"""Every AWS call a function makes, held to that function's role in the synthesized template.

While a handler runs on the AWS stack, a botocore hook (`provide-client-params`, emitted for every API
call and for every presigned URL) records what it asks AWS to do. Each call becomes the IAM requests it
needs: the action (S3 names its own, e.g. HeadObject is `s3:GetObject`, a versioned read
`s3:GetObjectVersion`; a DynamoDB transaction is one action per item), the resource ARN resolved from the
parameters (table name -> table ARN, bucket and key -> object ARN, queue URL -> queue ARN), and the
KMS calls the service makes with the caller's credentials on an encrypted resource (S3 SSE-KMS,
DynamoDB with a customer managed key, an encrypted queue), with `kms:ViaService` as the service sets it.

The role comes from the real CDK app, synthesized offline once per environment, and its policies'
intrinsics (`Ref`, `Fn::GetAtt`, `Fn::Join`) are resolved against the names the tests give moto: the
registry table, the documents bucket, the ingest queue and fixed ARNs for the two keys. moto's IAM
policy engine (`moto.iam.access_control.IAMPolicy`) decides: it matches actions and resource patterns
and evaluates `StringEquals` conditions (so `kms:ViaService`); other condition operators it treats as
satisfied, and tests/infrastructure/test_iam.py asserts those conditions' exact shape instead.

A call no statement allows fails the invocation that made it, naming the function, action and resource.
OpenSearch requests are not AWS SDK calls: tests/infrastructure/test_opensearch_access.py holds them to
the same roles. S3 Vectors calls are (`s3vectors:<Operation>` on the index's ARN, or the bucket's); the
reads of the functions that answer questions are the exception (`TENANT_READS`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from moto.core import DEFAULT_ACCOUNT_ID
from moto.iam.access_control import IAMPolicyStatement, PermissionResult

from citewise.aws.tenant_keys import STACK_TAG, TENANT_TAG

REGION = "us-east-1"
ACCOUNT = DEFAULT_ACCOUNT_ID
PARTITION = "aws"
STORAGE_KEY_ID = "11111111-2222-3333-4444-555555555555"
QUEUE_KEY_ID = "66666666-7777-8888-9999-000000000000"
STACK_POOL_ID = "us-east-1_stackpool"
STACK_POOL_ARN = f"arn:aws:cognito-idp:us-east-1:{DEFAULT_ACCOUNT_ID}:userpool/{STACK_POOL_ID}"
PSEUDO = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
}


@dataclass(frozen=True)
class Request:
    """One IAM authorization request: what a call needs its caller's role to allow."""

    action: str
    resource: str
    conditions: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        where = f" ({', '.join(f'{k}={v}' for k, v in self.conditions.items())})" if self.conditions else ""
        return f"{self.action} on {self.resource}{where}"


@dataclass(frozen=True)
class Names:
    """The physical names the tests give moto, for the template's resources."""

    table: str
    bucket: str
    queue: str
    erasure_queue: str
    audit_log_group: str = "citewise-audit"


@dataclass
class Deployment:
    """One synthesized environment with its intrinsics resolved to the tests' names."""

    template: dict[str, Any]
    role_ids: dict[str, str]  # function key -> the logical id of its role
    physical: dict[str, dict[str, str]]  # logical id -> attribute ("Ref", "Arn", ...) -> value

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]  # type: ignore[no-any-return]

    def resolve(self, value: Any) -> Any:
        """`value` with `Ref`, `Fn::GetAtt` and `Fn::Join` replaced by the tests' names; a resource the tests
        do not create resolves to `unresolved:<logical id>`, which no call's ARN matches."""
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if "Ref" in value:
            name = value["Ref"]
            return PSEUDO.get(name) or self.physical.get(name, {}).get("Ref", f"unresolved:{name}")
        if "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            return self.physical.get(logical_id, {}).get(attribute, f"unresolved:{logical_id}.{attribute}")
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return str(separator).join(str(self.resolve(part)) for part in parts)
        unknown = [key for key in value if key.startswith("Fn::")]
        if unknown:
            raise ValueError(f"cannot resolve {unknown[0]} in a policy: teach Deployment.resolve")
        return {key: self.resolve(item) for key, item in value.items()}

    def policies(self, function: str) -> list[dict[str, Any]]:
        """Every identity policy document of `function`'s role (inline and attached), resolved."""
        role_id = self.role_ids[function]
        role = self.resources[role_id]["Properties"]
        documents = [policy["PolicyDocument"] for policy in role.get("Policies", [])]
        for resource in self.resources.values():
            if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"]["Roles"]:
                documents.append(resource["Properties"]["PolicyDocument"])
        return [self.resolve(document) for document in documents]

    def allows(self, function: str, request: Request) -> bool:
        """Whether a statement of `function`'s role allows `request`, by moto's policy engine."""
        return policies_allow(self.policies(function), request)

    def key_of(self, resource_type: str, name: str, key_property: tuple[str, ...]) -> str | None:
        """The KMS key ARN that encrypts the `resource_type` resource named `name`, if a customer key does."""
        for logical_id, resource in self.resources.items():
            if resource["Type"] != resource_type or self.physical.get(logical_id, {}).get("Ref") != name:
                continue
            value: Any = resource["Properties"]
            for step in key_property:
                value = value.get(step) if isinstance(value, dict) else value[int(step)]
                if value is None:
                    return None
            return str(self.resolve(value))
        return None


def policies_allow(documents: Sequence[dict[str, Any]], request: Request) -> bool:
    """Whether a statement of the policy `documents` allows `request`, by moto's policy engine.

    Statement by statement: moto answers DENIED for an Allow statement whose condition does not hold,
    where IAM would skip it (so one policy holding the S3 and the DynamoDB `kms:ViaService` grants
    would deny both). The policies have no Deny statement, which this would have to weigh first.
    """
    statements = [s for document in documents for s in _as_list(document["Statement"])]
    if any(statement["Effect"] != "Allow" for statement in statements):
        raise NotImplementedError("a policy has a Deny statement: weigh it in policies_allow")
    return any(
        IAMPolicyStatement(statement).is_action_permitted(
            request.action, request.resource, incoming_condition_values=request.conditions
        )
        == PermissionResult.PERMITTED
        for statement in statements
    )


def session_allows(role_policies: Sequence[dict[str, Any]], session_policy: dict[str, Any], request: Request) -> bool:
    """Whether a role session with an inline session policy may make `request`: IAM allows a session what
    both the role's identity policies and the session policy allow (IAM User Guide, "Session policies";
    no resource policy here grants the session itself anything)."""
    return policies_allow(role_policies, request) and policies_allow([session_policy], request)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _physical(names: Names, ids: dict[str, str]) -> dict[str, dict[str, str]]:
    """The attributes of the resources the tests create (`ids`: role in the stack -> logical id)."""

    def key(key_id: str) -> dict[str, str]:
        return {"Ref": key_id, "Arn": f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/{key_id}"}

    def queue(name: str) -> dict[str, str]:
        url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        return {"Ref": url, "QueueUrl": url, "QueueName": name, "Arn": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}"}

    return {
        ids["table"]: {"Ref": names.table, "Arn": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{names.table}"},
        ids["bucket"]: {"Ref": names.bucket, "Arn": f"arn:{PARTITION}:s3:::{names.bucket}"},
        ids["queue"]: queue(names.queue),
        ids["erasure_queue"]: queue(names.erasure_queue),
        ids["audit_log_group"]: {"Ref": names.audit_log_group, "Arn": _log_group(names.audit_log_group) + ":*"},
        ids["storage_key"]: key(STORAGE_KEY_ID),
        ids["queue_key"]: key(QUEUE_KEY_ID),
        **({ids["user_pool"]: {"Ref": STACK_POOL_ID, "Arn": STACK_POOL_ARN}} if "user_pool" in ids else {}),
    }


@dataclass(frozen=True)
class Environment:
    """Which synthesized environment a function's configuration corresponds to."""

    serverless: bool = False
    s3vectors: bool = False
    key_per_tenant: bool = False  # search mode s3vectors with a KMS key per tenant
    rerank_region: str | None = None  # reranking on (in this region), or off

    @classmethod
    def of(cls, variables: Mapping[str, str]) -> Environment:
        """The environment whose template sets what `variables` (the `CITEWISE_` settings) say: a
        Serverless collection (tests/infrastructure's `serverless_iam`) or a domain (dev), reranking on
        or off."""
        reranking = variables.get("CITEWISE_RERANKER") == "bedrock"
        return cls(
            serverless=variables.get("CITEWISE_OPENSEARCH_SERVICE") == "aoss",
            s3vectors="CITEWISE_VECTOR_BUCKET" in variables,
            key_per_tenant="CITEWISE_TENANT_KEY_SCOPE" in variables,
            rerank_region=variables.get("CITEWISE_RERANK_REGION", REGION) if reranking else None,
        )


@functools.cache
def deployment(environment: Environment, names: Names) -> Deployment:
    """`environment` synthesized offline (once per session) from the real CDK app, with `names`."""
    from tests.infrastructure.conftest import MANAGED, S3VECTORS, S3VECTORS_KEYS, SERVERLESS_IAM, synthesize

    overrides = dict(SERVERLESS_IAM) if environment.serverless else dict(MANAGED)
    if environment.s3vectors:
        overrides.update(S3VECTORS_KEYS if environment.key_per_tenant else S3VECTORS)
    if environment.rerank_region is not None:
        overrides["rerank"] = {"enabled": True, "region": environment.rerank_region}
    account = os.environ.pop("CDK_DEFAULT_ACCOUNT", None)  # an account-agnostic template, as in the tests
    try:
        with tempfile.TemporaryDirectory(prefix="citewise-synth-") as outdir:
            synth = synthesize(Path(outdir), "dev", overrides)
    finally:
        if account is not None:
            os.environ["CDK_DEFAULT_ACCOUNT"] = account
    stack = synth.stack
    ids = {
        **({"user_pool": synth.logical_id(stack.api.user_pool)} if stack.api.user_pool is not None else {}),
        "table": synth.logical_id(stack.storage.table),
        "bucket": synth.logical_id(stack.storage.bucket),
        "queue": synth.logical_id(stack.ingestion.queue),
        "erasure_queue": synth.logical_id(stack.erasure.queue),
        "storage_key": synth.logical_id(stack.storage.key),
        "queue_key": synth.logical_id(stack.ingestion.key),
        "audit_log_group": synth.logical_id(stack.audit.log_group),
    }
    functions = stack.functions
    built = {f.name: getattr(functions, f.name) for f in dataclasses.fields(functions)}
    role_ids = {name: synth.logical_id(fn.role) for name, fn in built.items() if fn is not None}
    return Deployment(template=synth.template, role_ids=role_ids, physical=_physical(names, ids))


# --- what a call needs ------------------------------------------------------------------------------------


def _arn(service: str, resource: str) -> str:
    return f"arn:{PARTITION}:{service}:{REGION}:{ACCOUNT}:{resource}"


def _object(bucket: str, key: str) -> str:
    return f"arn:{PARTITION}:s3:::{bucket}/{key}"


def _s3(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    bucket = params["Bucket"]
    key = deploy.key_of("AWS::S3::Bucket", bucket, _BUCKET_KEY)

    def via_s3(action: str) -> list[Request]:
        return [Request(action, key, {"kms:ViaService": f"s3.{REGION}.amazonaws.com"})] if key else []

    def read(bucket_name: str, object_key: str, version: str | None) -> Request:
        return Request("s3:GetObjectVersion" if version else "s3:GetObject", _object(bucket_name, object_key))

    bucket_arn = f"arn:{PARTITION}:s3:::{bucket}"
    match operation:
        case "HeadObject":
            return [read(bucket, params["Key"], params.get("VersionId"))]
        case "GetObject":
            return [read(bucket, params["Key"], params.get("VersionId")), *via_s3("kms:Decrypt")]
        case "PutObject":
            return [Request("s3:PutObject", _object(bucket, params["Key"])), *via_s3("kms:GenerateDataKey")]
        case "CopyObject":
            source = params["CopySource"]
            if isinstance(source, str):
                path, _, query = unquote(source).partition("?versionId=")
                source_bucket, _, source_key = path.lstrip("/").partition("/")
                source = {"Bucket": source_bucket, "Key": source_key, "VersionId": query or None}
            copy_source = f"{source['Bucket']}/{source['Key']}"
            return [
                read(source["Bucket"], source["Key"], source.get("VersionId")),
                Request("s3:PutObject", _object(bucket, params["Key"]), {"s3:x-amz-copy-source": copy_source}),
                *via_s3("kms:Decrypt"),
                *via_s3("kms:GenerateDataKey"),
            ]
        case "DeleteObject":
            action = "s3:DeleteObjectVersion" if params.get("VersionId") else "s3:DeleteObject"
            return [Request(action, _object(bucket, params["Key"]))]
        case "DeleteObjects":
            return [
                Request(
                    "s3:DeleteObjectVersion" if item.get("VersionId") else "s3:DeleteObject",
                    _object(bucket, item["Key"]),
                )
                for item in params["Delete"]["Objects"]
            ]
        case "ListObjects" | "ListObjectsV2" | "HeadBucket":
            return [Request("s3:ListBucket", bucket_arn, _prefix(params))]
        case "ListObjectVersions":
            return [Request("s3:ListBucketVersions", bucket_arn, _prefix(params))]
    raise NotImplementedError(f"no IAM mapping for S3 {operation}: add it to tests/integration/handlers/iam.py")


_BUCKET_KEY = (
    "BucketEncryption",
    "ServerSideEncryptionConfiguration",
    "0",
    "ServerSideEncryptionByDefault",
    "KMSMasterKeyID",
)


def _prefix(params: dict[str, Any]) -> dict[str, str]:
    return {"s3:prefix": params["Prefix"]} if "Prefix" in params else {}


_DYNAMODB_ITEM_ACTIONS = {"Get": "GetItem", "Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}


def _dynamodb(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    def table(name: str, index: str | None = None) -> str:
        return _arn("dynamodb", f"table/{name}" + (f"/index/{index}" if index else ""))

    match operation:
        case "GetItem" | "PutItem" | "UpdateItem" | "DeleteItem" | "Query" | "Scan":
            requests = [Request(f"dynamodb:{operation}", table(params["TableName"], params.get("IndexName")))]
        case "BatchGetItem" | "BatchWriteItem":
            requests = [Request(f"dynamodb:{operation}", table(name)) for name in params["RequestItems"]]
        case "TransactWriteItems" | "TransactGetItems":
            # A transaction is authorized item by item, with each item's own action.
            requests = [
                Request(f"dynamodb:{_DYNAMODB_ITEM_ACTIONS.get(kind, 'ConditionCheckItem')}", table(item["TableName"]))
                for entry in params["TransactItems"]
                for kind, item in [next(iter(entry.items()))]
            ]
        case _:
            raise NotImplementedError(f"no IAM mapping for DynamoDB {operation}: add it")
    # A table under a customer managed key: DynamoDB uses the key with the caller's credentials.
    keys = {
        deploy.key_of("AWS::DynamoDB::Table", r.resource.split("/")[1], ("SSESpecification", "KMSMasterKeyId"))
        for r in requests
    }
    via = {"kms:ViaService": f"dynamodb.{REGION}.amazonaws.com"}
    return requests + [Request("kms:Decrypt", key, via) for key in sorted(k for k in keys if k)]


def _sqs(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    name = urlparse(params["QueueUrl"]).path.rsplit("/", 1)[-1] if "QueueUrl" in params else params["QueueName"]
    action = operation.removesuffix("Batch")
    requests = [Request(f"sqs:{action}", _arn("sqs", name))]
    key = deploy.key_of("AWS::SQS::Queue", f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}", ("KmsMasterKeyId",))
    if key and action == "SendMessage":
        # Sending to an encrypted queue: the sender generates (and decrypts) the data key.
        requests += [Request("kms:GenerateDataKey", key), Request("kms:Decrypt", key)]
    return requests


def _bedrock_agent_runtime(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    if operation != "Rerank":
        raise NotImplementedError(f"no IAM mapping for bedrock-agent-runtime {operation}: add it")
    # The Bedrock reranking prerequisites: Rerank (no resource-level permissions) and InvokeModel on the model.
    model = params["rerankingConfiguration"]["bedrockRerankingConfiguration"]["modelConfiguration"]["modelArn"]
    return [Request("bedrock:Rerank", "*"), Request("bedrock:InvokeModel", model)]


def _log_group(name: str) -> str:
    return _arn("logs", f"log-group:{name}")


def _logs(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    group = _log_group(params["logGroupName"])
    match operation:
        case "CreateLogStream" | "PutLogEvents":
            return [Request(f"logs:{operation}", f"{group}:log-stream:{params['logStreamName']}")]
        case "FilterLogEvents":
            # CloudWatch Logs authorizes a group's own actions on the group's ARN with `:*` (the ARN that
            # `Fn::GetAtt Arn` returns and CDK grants on); docs/aws.md lists it to confirm on an account.
            return [Request("logs:FilterLogEvents", f"{group}:*")]
    raise NotImplementedError(f"no IAM mapping for CloudWatch Logs {operation}: add it")


def s3vectors_requests(operation: str, params: dict[str, Any], deploy: Deployment | None = None) -> list[Request]:
    """What an S3 Vectors call needs, on the Service Authorization Reference's ARNs (`bucket/<name>` and
    `bucket/<name>/index/<index>`). QueryVectors with a text query, a filter or metadata, and ListVectors
    with data or metadata, also need `s3vectors:GetVectors` (the "Permissions" of each operation in
    botocore's s3vectors model). Decryption with a customer managed key happens in the
    service, with conditions the roles' grants name; docs/aws.md lists it as unverified."""
    bucket = params.get("vectorBucketName")
    if "indexArn" in params:
        index = str(params["indexArn"])
    else:
        index = _arn("s3vectors", f"bucket/{bucket}/index/{params.get('indexName')}")
    needs_get = {
        "QueryVectors": any(params.get(k) for k in ("queryTexts", "filter", "returnMetadata")),
        "ListVectors": bool(params.get("returnData") or params.get("returnMetadata")),
    }
    match operation:
        case "QueryVectors" | "ListVectors":
            extra = [Request("s3vectors:GetVectors", index)] if needs_get[operation] else []
            return [Request(f"s3vectors:{operation}", index), *extra]
        case "GetIndex" | "GetVectors" | "PutVectors" | "DeleteVectors" | "CreateIndex" | "DeleteIndex":
            return [Request(f"s3vectors:{operation}", index)]
        case "GetVectorBucket" | "ListIndexes":
            return [Request(f"s3vectors:{operation}", _arn("s3vectors", f"bucket/{bucket}"))]
        case "ListTagsForResource" | "TagResource":
            return [Request(f"s3vectors:{operation}", str(params["resourceArn"]))]
    raise NotImplementedError(f"no IAM mapping for S3 Vectors {operation}: add it")


def _key_tags(key_id: str) -> dict[str, str]:
    """The `aws:ResourceTag/...` condition values of a key moto holds (an absent tag as "", which no
    `StringEquals` on it matches, as IAM refuses a condition on a missing key; moto would ignore it)."""
    from moto.kms.models import kms_backends

    tags = {t["TagKey"]: t["TagValue"] for t in kms_backends[ACCOUNT][REGION].list_resource_tags(key_id)["Tags"]}
    return {f"aws:ResourceTag/{name}": tags.get(name, "") for name in (STACK_TAG, TENANT_TAG)}


def _kms_key(key_id: str) -> tuple[str, dict[str, str]] | None:
    """The ARN and tag conditions of the key `key_id` names (an id, an ARN or an alias), None if none."""
    from moto.kms.models import kms_backends

    backend = kms_backends[ACCOUNT][REGION]
    raw = backend.get_key_id_from_alias(key_id) if key_id.startswith("alias/") else backend.get_key_id(key_id)
    if raw is None or raw not in backend.keys:
        return None
    return backend.keys[raw].arn, _key_tags(raw)


def _kms(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    """The KMS calls of search mode s3vectors with a key per tenant (`citewise.aws.tenant_keys`), as the
    KMS API reference authorizes them: CreateKey (with `Tags`, also TagResource) with the request's tags as
    `aws:RequestTag/...`; an alias call on the alias's ARN and on its key; a key call on the key's ARN, with
    the key's tags as `aws:ResourceTag/...`. A lookup of an alias that does not exist authorizes nothing
    (KMS answers NotFoundException)."""
    if operation == "CreateKey":
        tags = {f"aws:RequestTag/{t['TagKey']}": t["TagValue"] for t in params.get("Tags", [])}
        tagging = [Request("kms:TagResource", "*", tags)] if tags else []
        return [Request("kms:CreateKey", "*", tags), *tagging]
    if operation in ("CreateAlias", "DeleteAlias"):
        alias = str(params["AliasName"])
        key = _kms_key(str(params["TargetKeyId"]) if operation == "CreateAlias" else alias)
        on_key = [Request(f"kms:{operation}", key[0], key[1])] if key else []
        return [Request(f"kms:{operation}", _arn("kms", alias)), *on_key]
    if operation in ("DescribeKey", "ScheduleKeyDeletion"):
        key = _kms_key(str(params["KeyId"]))
        return [Request(f"kms:{operation}", key[0], key[1])] if key else []
    raise NotImplementedError(f"no IAM mapping for KMS {operation}: add it")


def _sts(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    if operation != "AssumeRole":
        raise NotImplementedError(f"no IAM mapping for STS {operation}: add it")
    return [Request("sts:AssumeRole", str(params["RoleArn"]))]


def _cognito_idp(operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    """An app client's creation or deletion, on its user pool. moto makes up a pool's id, so the stack's
    pool (the one the functions are configured with, `CITEWISE_USER_POOL_ID`) resolves to a stand-in ARN
    that the template's pool resolves to as well; any other pool keeps its own ARN, which nothing allows."""
    if operation not in ("CreateUserPoolClient", "DeleteUserPoolClient"):
        raise NotImplementedError(f"no IAM mapping for cognito-idp {operation}: add it")
    pool = params["UserPoolId"]
    arn = STACK_POOL_ARN if pool == os.environ.get("CITEWISE_USER_POOL_ID") else _arn("cognito-idp", f"userpool/{pool}")
    return [Request(f"cognito-idp:{operation}", arn)]


TENANT_READER_FUNCTIONS = frozenset({"query", "mcp"})
TENANT_READS = frozenset(
    {"s3vectors:QueryVectors", "s3vectors:GetVectors", "s3vectors:ListVectors", "s3vectors:GetIndex"}
)
"""Search mode s3vectors: the functions that answer questions read a tenant's index with credentials of the
tenant-reader role whose session policy names that one index (`citewise.aws.tenant_sessions`), not with
their own role, which the stack grants no S3 Vectors action. Those reads are not held to the function's
role here: `RoleCheck.tenant_reads` keeps them, and the tests assert that each read the caller's own
index; tests/integration/test_tenant_isolation.py holds the sessions to the reader role and the session
policy (`session_allows`)."""

REQUIREMENTS: dict[str, Callable[[str, dict[str, Any], Deployment], list[Request]]] = {
    "s3": _s3,
    "dynamodb": _dynamodb,
    "sqs": _sqs,
    "logs": _logs,
    "bedrock-agent-runtime": _bedrock_agent_runtime,
    "cognito-idp": _cognito_idp,
    "s3vectors": s3vectors_requests,
    "sts": _sts,
    "kms": _kms,
}


def requirements(service: str, operation: str, params: dict[str, Any], deploy: Deployment) -> list[Request]:
    """What one SDK call of `service` needs its caller's role to allow."""
    if service not in REQUIREMENTS:
        raise NotImplementedError(f"no IAM mapping for {service}:{operation}: add it to REQUIREMENTS")
    return REQUIREMENTS[service](operation, params, deploy)


# --- recording -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One SDK call (or presigned URL) made while a function ran."""

    function: str
    service: str
    operation: str
    params: dict[str, Any]


@dataclass
class RoleCheck:
    """Records the calls of the function running now and refuses any its role does not allow, in the
    template of the configuration it runs with (read from the environment when it starts)."""

    names: Names
    calls: list[Call] = field(default_factory=list)
    tenant_reads: list[tuple[Call, Request]] = field(default_factory=list)
    """The `TENANT_READS` of the `TENANT_READER_FUNCTIONS`, not held to their roles (see there)."""
    _running: str | None = None

    def attach(self, events: Any) -> None:
        """Hook `events` (a boto3 session's emitter: every client made from it afterwards copies it)."""
        events.register("provide-client-params", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if self._running is not None:
            service = model.service_model.service_name
            self.calls.append(Call(self._running, service, model.name, dict(params)))

    @contextmanager
    def running(self, function: str) -> Iterator[None]:
        """Attribute the calls made inside to `function`; then fail if its role refuses any of them."""
        deploy = deployment(Environment.of(os.environ), self.names)
        first = len(self.calls)
        self._running = function
        try:
            yield
        finally:
            self._running = None
            denied = denied_calls(deploy, self.calls[first:], self.tenant_reads)
            if denied:
                raise AssertionError(f"the role in the template does not allow: {'; '.join(denied)}")


def denied_calls(
    deploy: Deployment, calls: list[Call], tenant_reads: list[tuple[Call, Request]] | None = None
) -> list[str]:
    """One line per request of `calls` that the caller's role in `deploy` does not allow; the `TENANT_READS`
    of the `TENANT_READER_FUNCTIONS` go to `tenant_reads` instead (refused when it is None)."""
    denied = []
    for call in calls:
        if call.function not in deploy.role_ids:
            continue
        for request in requirements(call.service, call.operation, call.params, deploy):
            if tenant_reads is not None and call.function in TENANT_READER_FUNCTIONS and request.action in TENANT_READS:
                tenant_reads.append((call, request))
            elif not deploy.allows(call.function, request):
                denied.append(f"{call.function} function: {request} (for {call.service} {call.operation})")
    return denied
