"""The citewise stack of one environment: it only composes the constructs, one per concern."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Environment, Stack, Tags
from constructs import Construct

from citewise_infra.api import Api
from citewise_infra.audit import AuditTrail
from citewise_infra.config import EnvironmentConfig
from citewise_infra.console import ANY_CLOUDFRONT_ORIGIN, Console
from citewise_infra.constants import (
    API_ID,
    AUDIT_ID,
    CONSOLE_ASSETS,
    CONSOLE_ID,
    ERASURE_ID,
    FUNCTIONS_ID,
    INDEX_BOOTSTRAP_ID,
    INGESTION_ID,
    OBSERVABILITY_ID,
    SEARCH_ID,
    STORAGE_ID,
    TENANT_READER_ID,
    VECTORS_ID,
    Outputs,
)
from citewise_infra.erasure import Erasure
from citewise_infra.functions import FunctionsFactory
from citewise_infra.index_bootstrap import IndexBootstrap
from citewise_infra.ingestion import Ingestion
from citewise_infra.observability import Observability
from citewise_infra.search import SearchBackend, build_search
from citewise_infra.storage import Storage
from citewise_infra.tenant_reader import TenantReader
from citewise_infra.vectors import VectorStore


class CitewiseStack(Stack):
    """Storage, search (OpenSearch, or an S3 Vectors bucket), functions, ingestion, index bootstrap (OpenSearch
    only), API, the web console (if on) and observability of one environment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        env: Environment,
        console_assets: Path = CONSOLE_ASSETS,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            env=env,
            description=f"citewise {config.name}: multi-tenant question answering with citations",
            termination_protection=not config.destroy_on_delete,
            **kwargs,
        )
        Tags.of(self).add("project", "citewise")
        Tags.of(self).add("environment", config.name)
        self.config = config
        self.storage = Storage(self, STORAGE_ID, config=config)
        self.search: SearchBackend | VectorStore = (
            VectorStore(self, VECTORS_ID, config=config, key=self.storage.key)
            if config.search.mode == "s3vectors"
            else build_search(self, SEARCH_ID, config=config, key=self.storage.key)
        )
        self.audit = AuditTrail(self, AUDIT_ID, config=config)
        # Before the API: its CORS names the console's origin (`citewise_infra.console` says how it names the API).
        self.console: Console | None = None
        origins = config.api.cors_allow_origins
        if config.console.enabled:
            self.console = Console(
                self,
                CONSOLE_ID,
                config=config,
                assets=console_assets,
                access_logs=self.storage.access_logs,
                documents=self.storage.bucket,
            )
            self.storage.allow_browsers([ANY_CLOUDFRONT_ORIGIN])
            origins = (*origins, self.console.origin)
        factory = FunctionsFactory(
            self,
            FUNCTIONS_ID,
            config=config,
            storage=self.storage,
            search=self.search,
            audit=self.audit,
            origins=origins,
        )
        self.functions = factory.functions
        self.layer = factory.layer
        # No bootstrap in search mode s3vectors: each tenant's index is created by its first write.
        self.index_bootstrap: IndexBootstrap | None = None
        if not isinstance(self.search, VectorStore) and self.functions.bootstrap is not None:
            self.index_bootstrap = IndexBootstrap(
                self,
                INDEX_BOOTSTRAP_ID,
                config=config,
                search=self.search,
                function=self.functions.bootstrap,
                # The bootstrap's permission outside its role (a Serverless data access policy), if any.
                access=factory.search_access.get("bootstrap"),
            )
        if isinstance(self.search, VectorStore):
            # Query and MCP read a tenant's index only through this role, with a session policy naming it.
            self.tenant_reader = TenantReader(
                self,
                TENANT_READER_ID,
                config=config,
                bucket_arn=self.search.bucket_arn,
                key=self.storage.key,
                readers=[self.functions.query, self.functions.mcp],
            )
            self.search.grant_tenant_key_reads(self.tenant_reader.role)
        self.ingestion = Ingestion(
            self, INGESTION_ID, config=config, storage=self.storage, function=self.functions.ingest
        )
        self.ingestion.accept_requeues(self.functions.documents)
        if self.index_bootstrap is not None:
            # Ingest only once the index exists: the ingest role may not create it.
            self.ingestion.event_source_mapping.node.add_dependency(self.index_bootstrap.resource)
        self.erasure = Erasure(
            self,
            ERASURE_ID,
            config=config,
            function=self.functions.erasure,
            starter=self.functions.documents,
            key=self.ingestion.key,
        )
        self.api = Api(
            self,
            API_ID,
            config=config,
            functions={
                "query": self.functions.query,
                "documents": self.functions.documents,
                "mcp": self.functions.mcp,
            },
            erasure=self.functions.erasure,
            origins=origins,
            console_origin=self.console.origin if self.console else None,
        )
        if self.console is not None:
            self.console.connect(self.api)
        self.observability = Observability(
            self,
            OBSERVABILITY_ID,
            config=config,
            key=self.storage.key,
            functions=self.functions,
            ingestion=self.ingestion,
            erasure=self.erasure,
            api=self.api,
            search=self.search,
        )
        self._outputs()

    def _outputs(self) -> None:
        values = {
            Outputs.API_URL: self.api.rest_api.url,
            Outputs.DOCUMENTS_BUCKET: self.storage.bucket.bucket_name,
            Outputs.REGISTRY_TABLE: self.storage.table.table_name,
            Outputs.INGEST_QUEUE_URL: self.ingestion.queue.queue_url,
            Outputs.DEAD_LETTER_QUEUE_URL: self.ingestion.dead_letter_queue.queue_url,
            Outputs.ERASURE_QUEUE_URL: self.erasure.queue.queue_url,
            Outputs.ALARM_TOPIC_ARN: self.observability.topic.topic_arn,
            Outputs.DASHBOARD_NAME: self.observability.dashboard.dashboard_name,
            Outputs.AUDIT_LOG_GROUP: self.audit.log_group.log_group_name,
        }
        if isinstance(self.search, VectorStore):
            values[Outputs.VECTOR_BUCKET] = self.search.bucket_name
        else:
            values[Outputs.SEARCH_ENDPOINT] = self.search.endpoint
        if self.api.user_pool is not None and self.api.user_pool_client is not None:
            values[Outputs.USER_POOL_ID] = self.api.user_pool.user_pool_id
            values[Outputs.USER_POOL_CLIENT_ID] = self.api.user_pool_client.user_pool_client_id
        if self.console is not None and self.console.client is not None:
            values[Outputs.CONSOLE_URL] = self.console.url
            values[Outputs.CONSOLE_CLIENT_ID] = self.console.client.user_pool_client_id
            values[Outputs.CONSOLE_BUCKET] = self.console.bucket.bucket_name
        if self.api.credential_token_url is not None:
            values[Outputs.CREDENTIAL_TOKEN_URL] = self.api.credential_token_url
        for key, value in values.items():
            CfnOutput(self, key, value=value)
