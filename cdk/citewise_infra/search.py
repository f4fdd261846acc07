"""Search: an OpenSearch Service domain (the default) or an OpenSearch Serverless vector collection.

Both answer the same SigV4-signed requests of `citewise.aws.opensearch`; what differs is how access
is granted, and each backend grants the same four capabilities its own way:

| capability | requests (`index.opensearch`)          | domain: IAM action on path      | Serverless permission |
| READ       | POST/GET /{index}/_search              | Post/Get .../{index}/_search    | aoss:ReadDocument     |
| WRITE      | POST /{index}/_bulk, /{index}/_refresh | Post/Put _bulk, Post _refresh   | aoss:WriteDocument    |
| DESCRIBE   | HEAD /{index}, GET /{index}/_mapping   | Head .../{index}, Get _mapping  | aoss:DescribeIndex    |
| CREATE     | PUT /{index}                           | Put .../{index}                 | aoss:CreateIndex      |

(Domain actions are `es:ESHttp<Verb>` on `<domain ARN>/<index><path>`; Serverless permissions go in a
data access policy.)

So the query function, granted READ only, cannot write or delete chunks in either mode (on a domain
no DELETE verb is granted to anyone: chunks are deleted through `_bulk`, which only WRITE allows).

Managed domain: the domain policy trusts the account and IAM decides (per role, per index path), with
no fine-grained access control, so no master user or role mapping has to be managed inside OpenSearch.
HTTPS only (TLS 1.2), node-to-node encryption, encryption at rest with the stack's key, slow and error
logs to CloudWatch. It is not in a VPC: that would put every function in the VPC and add NAT gateways
or interface endpoints for Bedrock, S3 and DynamoDB to an otherwise idle-free bill; access is by SigV4
only, and no principal outside the account can be allowed by the domain policy.

Serverless: encryption policy (the stack's key), network policy (public endpoint, SigV4 only) and one
data access policy per function role. Policies take a while to propagate after creation; the index
bootstrap retries meanwhile (`citewise.runtime.bootstrap`).
"""

from __future__ import annotations

import enum
import json
from typing import Literal, Protocol

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchserverless as aoss
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct, IConstruct

from citewise_infra.config import EnvironmentConfig
from citewise_infra.constants import FunctionKey
from citewise_infra.nag import acknowledge


class SearchAccess(enum.Enum):
    """What a function may do with the chunk index."""

    READ = "read"
    WRITE = "write"
    DESCRIBE = "describe"
    CREATE = "create"


class SearchBackend(Protocol):
    """What the functions need from either backend."""

    endpoint: str  # https URL
    service: Literal["es", "aoss"]  # SigV4 service name

    def grant(self, key: FunctionKey, role: iam.IRole, *access: SearchAccess) -> IConstruct | None:
        """Allow `role` (function `key`) `access` to the chunk index; the construct that carries the
        permission outside the role's own policy, if any (something that must exist before use)."""
        ...


def build_search(scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey) -> SearchBackend:
    """The backend the environment asks for."""
    if config.search.mode == "serverless":
        return ServerlessSearch(scope, construct_id, config=config, key=key)
    return ManagedSearch(scope, construct_id, config=config, key=key)


# --- managed domain ------------------------------------------------------------------------------------

# (HTTP verbs, path below the index) per capability: the requests `index.opensearch` sends.
_DOMAIN_PATHS: dict[SearchAccess, list[tuple[tuple[str, ...], str]]] = {
    SearchAccess.READ: [(("es:ESHttpPost", "es:ESHttpGet"), "/_search")],
    SearchAccess.WRITE: [(("es:ESHttpPost", "es:ESHttpPut"), "/_bulk"), (("es:ESHttpPost",), "/_refresh")],
    SearchAccess.DESCRIBE: [(("es:ESHttpHead",), ""), (("es:ESHttpGet",), "/_mapping")],
    SearchAccess.CREATE: [(("es:ESHttpPut",), "")],
}


class ManagedSearch(Construct):
    """An OpenSearch Service domain sized by the environment."""

    service: Literal["es", "aoss"] = "es"

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.domain_name = f"citewise-{config.name}"  # 3-28 characters; environment names are at most 16
        self.domain = self._build_domain(key)
        self.endpoint = f"https://{self.domain.domain_endpoint}"

    def _build_domain(self, key: kms.IKey) -> opensearch.Domain:
        search = self._config.search
        removal = self._config.removal
        log_groups = {
            kind: logs.LogGroup(
                self,
                f"{kind}Logs",
                retention=self._config.data.log_retention,
                removal_policy=removal,
            )
            for kind in ("SlowSearch", "SlowIndex", "App")
        }
        # The domain's log publishing needs a CloudWatch Logs resource policy; declared here, natively,
        # instead of the custom resource the construct would otherwise add.
        publishing = logs.ResourcePolicy(
            self,
            "LogPublishing",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[group.log_group_arn for group in log_groups.values()],
                    conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
                )
            ],
        )
        zone_awareness = None
        if search.availability_zones > 1:
            zone_awareness = opensearch.ZoneAwarenessConfig(
                enabled=True, availability_zone_count=search.availability_zones
            )
        domain = opensearch.Domain(
            self,
            "Domain",
            # Named, so the domain policy can name the domain without referring to itself (a cycle).
            domain_name=self.domain_name,
            version=opensearch.EngineVersion.open_search(search.engine_version),
            capacity=opensearch.CapacityConfig(
                data_node_instance_type=search.data_node_type,
                data_nodes=search.data_nodes,
                master_node_instance_type=search.master_node_type,
                master_nodes=search.master_nodes or None,
                multi_az_with_standby_enabled=False,
            ),
            ebs=opensearch.EbsOptions(volume_size=search.volume_gib, volume_type=ec2.EbsDeviceVolumeType.GP3),
            zone_awareness=zone_awareness,
            node_to_node_encryption=True,
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True, kms_key=key),
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=log_groups["SlowSearch"],
                slow_index_log_enabled=True,
                slow_index_log_group=log_groups["SlowIndex"],
                app_log_enabled=True,
                app_log_group=log_groups["App"],
            ),
            suppress_logs_resource_policy=True,
            enable_auto_software_update=True,
            off_peak_window_enabled=True,
            removal_policy=removal,
        )
        domain.node.add_dependency(publishing)
        # Set on the CloudFormation resource itself (the L2 `access_policies` would add a custom
        # resource): the account is trusted, and each role's IAM policy decides what it may do.
        cfn_domain: opensearch.CfnDomain = domain.node.default_child  # type: ignore[assignment]
        cfn_domain.access_policies = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:{Stack.of(self).partition}:iam::{Stack.of(self).account}:root"},
                    "Action": "es:ESHttp*",
                    "Resource": Stack.of(self).format_arn(
                        service="es", resource="domain", resource_name=f"{self.domain_name}/*"
                    ),
                }
            ],
        }
        self._acknowledge(domain)
        return domain

    def _acknowledge(self, domain: opensearch.Domain) -> None:
        search = self._config.search
        outside_vpc = (
            "Access is SigV4 only and the domain policy admits this account's IAM principals alone; a VPC "
            "would put every function in it and need NAT or interface endpoints for Bedrock, S3 and DynamoDB."
        )
        acknowledge(domain, "AwsSolutions-OS1", outside_vpc)
        acknowledge(domain, "AwsSolutions-OS3", outside_vpc)
        if search.master_nodes == 0:
            acknowledge(
                domain,
                "AwsSolutions-OS4",
                f"{self._config.name} runs {search.data_nodes} data node(s) without dedicated masters to keep "
                "an idle environment cheap; production environments set master_nodes in cdk.json.",
            )
        if search.availability_zones == 1:
            acknowledge(
                domain,
                "AwsSolutions-OS7",
                f"{self._config.name} is a single-AZ domain by choice (cost); production environments set "
                "availability_zones to 2 or 3 in cdk.json.",
            )

    def grant(self, key: FunctionKey, role: iam.IRole, *access: SearchAccess) -> IConstruct | None:
        index_arn = f"{self.domain.domain_arn}/{self._config.search.index_name}"
        for capability in access:
            for actions, suffix in _DOMAIN_PATHS[capability]:
                role.add_to_principal_policy(iam.PolicyStatement(actions=list(actions), resources=[index_arn + suffix]))
        return None


# --- serverless collection -----------------------------------------------------------------------------

# Short names for the data access policies (32-character limit on policy names).
_POLICY_SUFFIXES: dict[FunctionKey, str] = {
    "ingest": "ingest",
    "query": "query",
    "documents": "docs",
    "mcp": "mcp",
    "bootstrap": "boot",
    "erasure": "erase",
}
_COLLECTION_PERMISSIONS: dict[SearchAccess, tuple[str, ...]] = {
    SearchAccess.READ: ("aoss:ReadDocument",),
    SearchAccess.WRITE: ("aoss:WriteDocument",),
    SearchAccess.DESCRIBE: ("aoss:DescribeIndex",),
    SearchAccess.CREATE: ("aoss:CreateIndex", "aoss:DescribeIndex"),
}


class ServerlessSearch(Construct):
    """An OpenSearch Serverless vector collection with its security policies."""

    service: Literal["es", "aoss"] = "aoss"

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.collection_name = f"citewise-{config.name}"
        encryption = self._build_encryption_policy(key)
        network = self._build_network_policy()
        self.collection = aoss.CfnCollection(
            self,
            "Collection",
            name=self.collection_name,
            type="VECTORSEARCH",
            description=f"citewise {config.name} chunk index",
            standby_replicas="ENABLED" if config.search.standby_replicas else "DISABLED",
        )
        # A collection can only be created once an encryption policy covers its name.
        self.collection.add_dependency(encryption)
        self.collection.add_dependency(network)
        self.collection.apply_removal_policy(config.removal)
        self.endpoint = self.collection.attr_collection_endpoint

    def _policy_name(self, kind: str) -> str:
        # Policy names: 3-32 lowercase characters; the environment name is at most 16.
        return f"cw-{self._config.name}-{kind}"

    def _build_encryption_policy(self, key: kms.IKey) -> aoss.CfnSecurityPolicy:
        policy = {
            "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{self.collection_name}"]}],
            "AWSOwnedKey": False,
            "KmsARN": key.key_arn,
        }
        return aoss.CfnSecurityPolicy(
            self,
            "EncryptionPolicy",
            name=self._policy_name("enc"),
            type="encryption",
            policy=Stack.of(self).to_json_string(policy),
        )

    def _build_network_policy(self) -> aoss.CfnSecurityPolicy:
        policy = [
            {
                "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{self.collection_name}"]}],
                "AllowFromPublic": True,
            }
        ]
        return aoss.CfnSecurityPolicy(
            self, "NetworkPolicy", name=self._policy_name("net"), type="network", policy=json.dumps(policy)
        )

    def grant(self, key: FunctionKey, role: iam.IRole, *access: SearchAccess) -> IConstruct | None:
        # The IAM side only lets the role reach the collection's data plane; what it may do there is
        # the data access policy's business.
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn])
        )
        permissions = sorted(
            {permission for capability in access for permission in _COLLECTION_PERMISSIONS[capability]}
        )
        index = f"index/{self.collection_name}/{self._config.search.index_name}"
        policy = [
            {
                "Description": f"citewise {key} function",
                "Rules": [{"ResourceType": "index", "Resource": [index], "Permission": permissions}],
                "Principal": [role.role_arn],
            }
        ]
        return aoss.CfnAccessPolicy(
            self,
            f"{key.capitalize()}DataAccess",
            name=self._policy_name(_POLICY_SUFFIXES[key]),
            type="data",
            policy=Stack.of(self).to_json_string(policy),
        )
