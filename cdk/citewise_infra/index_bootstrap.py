"""Index bootstrap: a custom resource that creates the chunk index at deploy time.

The bootstrap function (`functions/bootstrap`, logic in `citewise.runtime.bootstrap`) is the on-event handler of
a CDK `custom_resources.Provider`. Its properties carry what decides the index (endpoint, name,
embedder, dimension), so changing any of them runs an Update that checks or creates the new index.
There is no search pipeline to create: hybrid fusion (`citewise.query.fusion`) runs in the library, the same
code as in the local mode.
"""

from __future__ import annotations

from aws_cdk import CustomResource, RemovalPolicy, Stack
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from citewise_infra.config import EnvironmentConfig
from citewise_infra.constants import INDEX_RESOURCE_TYPE
from citewise_infra.functions import CitewiseFunction
from citewise_infra.nag import acknowledge
from citewise_infra.search import SearchBackend


class IndexBootstrap(Construct):
    """The provider and the `Custom::CitewiseIndex` resource."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        search: SearchBackend,
        function: CitewiseFunction,
        access: IConstruct | None,
    ) -> None:
        super().__init__(scope, construct_id)
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=function.function,
            log_group=logs.LogGroup(
                self,
                "ProviderLogs",
                retention=config.data.log_retention,
                removal_policy=RemovalPolicy.DESTROY,
            ),
        )
        self.resource = CustomResource(
            self,
            "Index",
            service_token=provider.service_token,
            resource_type=INDEX_RESOURCE_TYPE,
            properties={
                "Endpoint": search.endpoint,
                "IndexName": config.search.index_name,
                "Embedder": config.models.embedder,
                "Dimension": str(config.models.embedding_dimension),
            },
            # Delete is a no-op in the handler anyway; RETAIN also keeps CloudFormation from calling it.
            removal_policy=RemovalPolicy.RETAIN,
        )
        if access is not None:
            # A Serverless data access policy must exist before the first request (it then propagates).
            self.resource.node.add_dependency(access)
        framework = provider.node.find_child("framework-onEvent")
        acknowledge(
            framework,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The CDK custom resource framework function is CDK's own; its role only writes its logs through "
            "the AWS managed basic execution policy and invokes the bootstrap function.",
        )
        function_id = Stack.of(self).get_logical_id(function.function.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            framework,
            f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
            "The custom resource framework may invoke any version of the bootstrap function (CDK grants "
            "function ARN and ARN:*); it is still that one function.",
        )
