"""The Lambda functions and their layers: one role per function, each granted only what its code calls.

What each function calls (and so what its role may do):
- ingest: S3 HeadObject/GetObject(+Version) and ListBucket under `tenants/`; the registry table and its
  `by_path` index (get, query, conditional update, delete); the index (search, bulk writes and deletes,
  refresh, describe); Bedrock InvokeModel on the embedding model. No Converse, no index creation.
- query: the index's `_search` only, Bedrock InvokeModel on the embedding model, on the generation
  model and on the router's model if it has its own (Converse is authorised by InvokeModel),
  ApplyGuardrail on the configured guardrail, DynamoDB GetItem of the tenants' settings attribute only
  (no document item's attributes), UpdateItem of the usage counters and of the rate bucket's `tat_us`,
  GetItem and Query of the quota overrides, the bucket and the usage counters; with reranking on,
  `bedrock:Rerank` and InvokeModel on the reranker model; get, query, update and delete the items of the
  conversation partitions (`#conversations#<tenant>`) only; get, query and update those of the feedback
  partitions (`#feedback#<tenant>`) only. No S3, no other DynamoDB action, no index
  writes or deletes.
- documents: the registry table; S3 PutObject (uploads are presigned with this role's credentials),
  DeleteObject, HeadObject/GetObject(+Version: presigned downloads of the indexed version) and ListBucket
  under `tenants/`; the index (search, bulk deletes,
  refresh); SQS SendMessage on the ingest queue (the operator's re-queue of quota-refused documents).
  No Bedrock. The audit trail's log group: append and FilterLogEvents (the operator's export).
- mcp: read only, but for the usage counters, the rate bucket and the conversations (as the query function); the
  feedback partitions read only (the ranking signal's tallies). The index's
  `_search`, Bedrock InvokeModel on the embedding and generation models (and ApplyGuardrail on the
  guardrail, and the reranker's two grants when reranking is on), GetItem/Query on the registry table
  with decryption. No S3 at all, no index writes or deletes.
- query and mcp also append to the audit trail's log group (CreateLogStream, PutLogEvents), nothing more.
- bootstrap: create and describe the index. Nothing else.
- erasure: a tenant's whole data: the registry table (the only role that may delete its items but for
  the conversations, which the query and mcp functions delete on their users' request), every
  object version under `tenants/` (list and delete versions), the index (search, bulk deletes). It and
  the documents function may send to the erasure queue (`citewise_infra.erasure`). No Bedrock.
Every function also writes its own log group and X-Ray segments.
Every function carries the base layer (the library and its dependencies); the web layer (main-content
extraction of web pages, `citewise_infra.layer`) goes only to the function that extracts pages, the
refresh (`FunctionsFactory.add_web_layer`).
In search mode `s3vectors` the index grants are S3 Vectors actions on the tenants' indexes instead
(`citewise_infra.vectors`): ingest writes, documents deletes, erasure erases; query and MCP get none of
their own, and there is no bootstrap. With a key per tenant, ingest creates a tenant's KMS key with its
index and erasure destroys it (the KMS grants there).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from aws_cdk import AssetHashType, BundlingOptions, Duration, FileSystem
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from citewise.runtime.settings import (
    BootstrapSettings,
    DocumentsSettings,
    ErasureSettings,
    IngestSettings,
    McpSettings,
    QuerySettings,
    RefreshSettings,
    Settings,
)
from citewise_infra import bedrock
from citewise_infra.audit import AuditTrail
from citewise_infra.config import EnvironmentConfig, FunctionConfig, quota_environment
from citewise_infra.constants import (
    FUNCTION_IDS,
    FUNCTIONS_DIR,
    HANDLER,
    LAYER_ID,
    LIBRARY_DIR,
    METRICS_NAMESPACE,
    SERVICE_NAMES,
    STREAM_RUNTIME,
    WEB_LAYER_ID,
    FunctionKey,
)
from citewise_infra.layer import Architecture, LocalLayerBundling, source_hash, web_source_hash
from citewise_infra.nag import acknowledge
from citewise_infra.search import SearchAccess, SearchBackend
from citewise_infra.storage import Storage
from citewise_infra.vectors import VectorAccess, VectorStore

RUNTIME = lambda_.Runtime.PYTHON_3_12
# Graviton: cheaper per GB-second than x86; the layer is bundled for the same architecture.
ARCHITECTURE = lambda_.Architecture.ARM_64
LAYER_ARCHITECTURE: Architecture = "arm64"
TENANT_MAP_FILE = "tenant_map.json"
"""IAM mode's tenant map (principal ARN -> tenant), shipped beside the API functions' handlers."""
MCP_PROFILES = "profiles.toml"
"""The MCP function's tool profiles (`citewise.mcp.profiles`), if an operator puts them beside its handler."""
# No DeleteItem: a delete leaves a tombstone (an UpdateItem), and only the table's TTL removes items.
DYNAMODB_ACTIONS = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem")


def settings_environment(settings: type[Settings], values: Mapping[str, str]) -> dict[str, str]:
    """`CITEWISE_<FIELD>` variables for `values` (field name -> value), refusing any field that
    `settings` (the function's settings class) does not have: the stack cannot set a variable the
    function would silently ignore."""
    unknown = sorted(set(values) - set(settings.model_fields))
    if unknown:
        raise ValueError(f"{settings.__name__} has no field {', '.join(unknown)}")
    return {f"CITEWISE_{name.upper()}": value for name, value in values.items()}


@dataclass(frozen=True)
class Functions:
    """The six functions, by key; no bootstrap in search mode `s3vectors` (no index to create at deploy
    time: each tenant's is created by its first write)."""

    ingest: CitewiseFunction
    query: CitewiseFunction
    documents: CitewiseFunction
    mcp: CitewiseFunction
    bootstrap: CitewiseFunction | None
    erasure: CitewiseFunction
    refresh: CitewiseFunction

    def all(self) -> list[CitewiseFunction]:
        """Every function the stack has."""
        candidates = (self.ingest, self.query, self.documents, self.mcp, self.bootstrap, self.erasure, self.refresh)
        return [fn for fn in candidates if fn is not None]


class CitewiseFunction(Construct):
    """A Python 3.12 arm64 function of `functions/<key>/` with the shared layer, its own role and its own
    log group (so the role needs no managed policy and the logs have a retention)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: FunctionKey,
        config: EnvironmentConfig,
        sizing: FunctionConfig,
        layer: lambda_.ILayerVersion,
        environment: Mapping[str, str],
        description: str,
        unscoped: Sequence[str] = (),
        files: Mapping[str, str] | None = None,
    ) -> None:
        """`unscoped` names the actions besides X-Ray's that the role must allow on `*` (the action has no
        resource-level permissions), each with why: they are acknowledged together. `files` (name ->
        text) are shipped beside the handler, in the function's code."""
        super().__init__(scope, construct_id)
        source = FUNCTIONS_DIR / key
        if not source.is_dir():
            raise FileNotFoundError(f"the {key} function's code is missing: {source}")
        if files:
            source = _with_files(source, files)
        self.key = key
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=config.data.log_retention,
            removal_policy=config.removal,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"citewise {config.name} {key} function: least privilege for what its code calls",
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(source), exclude=["__pycache__", "*.pyc"]),
            layers=[layer],
            role=self.role,
            environment={
                "POWERTOOLS_SERVICE_NAME": SERVICE_NAMES[key],
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": config.log_level,
                **environment,
            },
            memory_size=sizing.memory_mb,
            timeout=Duration.seconds(sizing.timeout_s),
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            description=description,
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "Python 3.12 is deliberate: the layer is built for cp312 and the handlers are tested on it; "
            "moving to a newer runtime is a tested change of its own, not a silent default.",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "; ".join(
                [
                    "X-Ray PutTraceSegments/PutTelemetryRecords (active tracing) support no resource-level permissions",
                    *unscoped,
                ]
            )
            + "; every other statement of this role names its resources.",
        )

    def add(self, *statements: iam.PolicyStatement) -> None:
        """Allow `statements` to this function's role only."""
        for statement in statements:
            self.role.add_to_principal_policy(statement)


def _with_files(source: Path, files: Mapping[str, str]) -> Path:
    """A copy of the function code directory `source` with `files` added (the asset is staged from it)."""
    staged = Path(FileSystem.mkdtemp(f"citewise-{source.name}-"))
    shutil.copytree(source, staged, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name, text in files.items():
        (staged / name).write_text(text, encoding="utf-8")
    return staged


class FunctionsFactory(Construct):
    """Builds the layer and the functions, with their environment and permissions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        storage: Storage,
        search: SearchBackend | VectorStore,
        audit: AuditTrail,
        origins: tuple[str, ...],
    ) -> None:
        """`origins`: the browser origins the API functions answer (`api.cors_allow_origins`, the console's)."""
        super().__init__(scope, construct_id)
        self._config = config
        self._origins = origins
        self._storage = storage
        self._search = search
        self._audit = audit
        # Per function, the construct that carries its search permission outside its role, if any.
        self.search_access: dict[FunctionKey, IConstruct] = {}
        self.layer = self._build_layer()
        self.functions = Functions(
            ingest=self._build_ingest(),
            query=self._build_query(),
            documents=self._build_documents(),
            mcp=self._build_mcp(),
            bootstrap=self._build_bootstrap(),
            erasure=self._build_erasure(),
            refresh=self._build_refresh(),
        )

    # --- the layer ---------------------------------------------------------------------------------------

    def _build_layer(self) -> lambda_.LayerVersion:
        return self._layer_version(
            LAYER_ID,
            source_hash(LAYER_ARCHITECTURE),
            LocalLayerBundling(LAYER_ARCHITECTURE),
            "citewise library and its runtime dependencies (boto3 comes with the runtime)",
        )

    @cached_property
    def web_layer(self) -> lambda_.LayerVersion:
        """The web layer (trafilatura and what it pulls), on top of the base layer; created at the first
        function that needs it."""
        return self._layer_version(
            WEB_LAYER_ID,
            web_source_hash(LAYER_ARCHITECTURE),
            LocalLayerBundling(LAYER_ARCHITECTURE, web=True),
            "citewise web page extraction (trafilatura and its dependencies), on top of the citewise layer",
        )

    def add_web_layer(self, fn: CitewiseFunction) -> None:
        """Let `fn` extract web pages: the web layer after the base layer (both unpack into /opt/python)."""
        fn.function.add_layers(self.web_layer)

    def _layer_version(
        self, construct_id: str, asset_hash: str, bundling: LocalLayerBundling, description: str
    ) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            construct_id,
            code=lambda_.Code.from_asset(
                str(LIBRARY_DIR.parent),
                asset_hash_type=AssetHashType.CUSTOM,
                asset_hash=asset_hash,
                bundling=BundlingOptions(
                    # Only used if local bundling declined, which it never does: it builds or raises.
                    image=RUNTIME.bundling_image,
                    local=bundling,
                ),
            ),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=description,
            removal_policy=self._config.removal,
        )

    # --- environment ---------------------------------------------------------------------------------------

    def _search_values(self) -> dict[str, str]:
        """Where the index is and which embedder fills it: what every function needs."""
        config = self._config
        embedder = {"embedder": config.models.embedder, "embedding_dimension": str(config.models.embedding_dimension)}
        if isinstance(self._search, VectorStore):
            return {"backend": "aws", **self._search.environment(), **embedder}
        values = {
            "backend": "aws",
            "opensearch_endpoint": self._search.endpoint,
            "opensearch_service": self._search.service,
            "index_name": config.search.index_name,
            **embedder,
        }
        if self._search.service == "es":
            # A replica needs a node other than its primary's: on one data node it would never be
            # placed and the index would stay yellow (Serverless takes no replica setting).
            values["index_replicas"] = "0" if config.search.data_nodes == 1 else "1"
        return values

    def _document_values(self) -> dict[str, str]:
        """Where documents and their records are: the functions that read or write them."""
        return {
            **self._search_values(),
            "registry_table": self._storage.table.table_name,
            "documents_bucket": self._storage.bucket.bucket_name,
            "max_document_bytes": str(self._config.ingest.max_document_bytes),
            "tombstone_retention_days": str(self._config.data.tombstone_retention_days),
            **quota_environment(self._config.quotas),
        }

    def _identity_values(self) -> dict[str, str]:
        """How the API functions find the caller's tenant."""
        auth = self._config.auth
        values: dict[str, str] = {"auth_mode": auth.mode}
        if auth.mode == "cognito":
            values["tenant_claim"] = "custom:tenant_id"
        else:
            # A file in the code, not a variable: Lambda allows 4 KB for all of a function's variables.
            values["tenant_map_file"] = TENANT_MAP_FILE
            if auth.operator_principals:
                values["operator_principals"] = json.dumps(list(auth.operator_principals))
        return values

    def _identity_files(self) -> dict[str, str]:
        """The files the API functions' identity needs beside their handler: IAM mode's tenant map."""
        auth = self._config.auth
        return {TENANT_MAP_FILE: json.dumps(auth.tenant_map, sort_keys=True, indent=1)} if auth.mode == "iam" else {}

    def _cors_values(self) -> dict[str, str]:
        """The browser origins whose pages may read the API functions' responses (`citewise.runtime.cors`)."""
        return {"cors_allow_origins": json.dumps(list(self._origins))} if self._origins else {}

    def _function(
        self,
        key: FunctionKey,
        sizing: FunctionConfig,
        settings: type[Settings],
        values: dict[str, str],
        what: str,
        unscoped: Sequence[str] = (),
        files: Mapping[str, str] | None = None,
    ) -> CitewiseFunction:
        return CitewiseFunction(
            self,
            FUNCTION_IDS[key],
            key=key,
            config=self._config,
            sizing=sizing,
            layer=self.layer,
            environment=settings_environment(settings, values),
            description=f"citewise {self._config.name}: {what}",
            unscoped=unscoped,
            files=files,
        )

    def _grant_model(self, fn: CitewiseFunction, model_id: str, *, streamed: bool = False) -> None:
        fn.add(*bedrock.invoke_statements(model_id, streamed=streamed))
        prefix, foundation_id = bedrock.split_profile(model_id)
        if prefix is not None:
            acknowledge(
                fn.role,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/{foundation_id}]",
                f"{model_id} is a cross-region inference profile: Bedrock may serve it from any region of "
                "the profile, so the model is allowed in every region, and only through that profile "
                "(bedrock:InferenceProfileArn condition).",
            )

    def _grant_search(
        self, fn: CitewiseFunction, access: tuple[SearchAccess, ...], vectors: tuple[VectorAccess, ...]
    ) -> None:
        """Grant `access` to the OpenSearch index, or `vectors` to the tenants' S3 Vectors indexes."""
        if isinstance(self._search, VectorStore):
            if vectors:
                self._search.grant(fn.role, *vectors)
            return
        carrier = self._search.grant(fn.key, fn.role, *access)
        if carrier is not None:
            self.search_access[fn.key] = carrier

    # --- the functions -------------------------------------------------------------------------------------

    def _build_ingest(self) -> CitewiseFunction:
        fn = self._function(
            "ingest", self._config.ingest, IngestSettings, self._document_values(), "S3 notifications -> index"
        )
        self._storage.grant_read_documents(fn.role)
        self._storage.grant_restore_documents(fn.role)
        self._storage.grant_registry(fn.role, DYNAMODB_ACTIONS)
        self._grant_search(
            fn,
            (SearchAccess.READ, SearchAccess.WRITE, SearchAccess.DESCRIBE),
            (VectorAccess.WRITE, VectorAccess.VECTOR_SPACE, VectorAccess.TAG_SPACE, VectorAccess.KEY_CREATE),
        )
        self._grant_model(fn, self._config.models.embedding_model_id)
        return fn

    def _answer_values(self) -> dict[str, str]:
        """What the functions that answer questions need: the index, the caller's identity, the model."""
        config = self._config
        models = config.models
        values = {
            **self._search_values(),
            **self._identity_values(),
            **self._cors_values(),
            "synthesizer": "bedrock",
            "generation_model_id": models.generation_model_id,
            # the tenants' settings documents, quotas, usage counters and the users' conversations only
            "registry_table": self._storage.table.table_name,
            "conversation_ttl_days": str(config.data.conversation_ttl_days),
            **quota_environment(self._config.quotas),
            **self._audit.values(),
        }
        if models.guardrail_id is not None and models.guardrail_version is not None:
            values.update(guardrail_id=models.guardrail_id, guardrail_version=models.guardrail_version)
        if models.routing_model_id is not None:
            values.update(router=models.router, router_model_id=models.routing_model_id)
        rerank = self._config.rerank
        if rerank.enabled:
            values.update(
                reranker="bedrock",
                rerank_model_id=rerank.model_id,
                rerank_candidates=str(rerank.candidates),
                rerank_timeout=str(rerank.timeout_s),
            )
            if rerank.region is not None:
                values["rerank_region"] = rerank.region
        return values

    def _grant_answering(self, fn: CitewiseFunction) -> None:
        """Search the index (read only), read the tenant's settings, count the tenant's usage, embed the
        question, route it, generate the answer (through the guardrail)."""
        models = self._config.models
        # S3 Vectors: no grant of the function's own; it reads through the tenant-reader role (issue 28, §3).
        self._grant_search(fn, (SearchAccess.READ,), ())
        self._storage.grant_read_tenant_settings(fn.role)
        self._storage.grant_count_usage(fn.role)
        self._storage.grant_check_quotas(fn.role)
        self._storage.grant_conversations(fn.role)
        # Feedback is given through REST only (the query function); both rank with its tallies.
        self._storage.grant_feedback(fn.role, write=fn.key == "query")
        if self._config.auth.mode == "cognito":  # programs' credentials exist with Cognito only
            self._storage.grant_read_credentials(fn.role)
        self._grant_model(fn, models.embedding_model_id)
        # A streamed answer (POST /v1/query with events) is written through ConverseStream.
        self._grant_model(fn, models.generation_model_id, streamed=fn.key == "query")
        if models.routing_model_id not in (None, models.generation_model_id):
            self._grant_model(fn, models.routing_model_id)
        if models.guardrail_id is not None:
            fn.add(bedrock.guardrail_statement(models.guardrail_id))
        if self._config.rerank.enabled:
            fn.add(*bedrock.rerank_statements(self._config.rerank.model_id, self._config.rerank.region))
        self._audit.grant_write(fn.role)

    def _answer_unscoped(self) -> tuple[str, ...]:
        """The unscoped actions of the functions that answer: `bedrock:Rerank` when reranking is on."""
        if not self._config.rerank.enabled:
            return ()
        return (
            "bedrock:Rerank supports no resource-level permissions (Resource * is what the Bedrock reranking "
            "permissions page prescribes); the model it runs is limited by the InvokeModel statement on the "
            "reranker model's ARN",
        )

    def _build_query(self) -> CitewiseFunction:
        fn = self._function(
            "query",
            self._config.query,
            QuerySettings,
            self._answer_values(),
            "POST /v1/query and /v1/search",
            self._answer_unscoped(),
            self._identity_files(),
        )
        self._grant_answering(fn)
        # Its runtime loop is citewise's, which can stream `POST /v1/query` (citewise.api.streaming_runtime).
        fn.function.add_environment("AWS_LAMBDA_EXEC_WRAPPER", STREAM_RUNTIME)
        return fn

    def _build_mcp(self) -> CitewiseFunction:
        values = self._answer_values()
        if (FUNCTIONS_DIR / "mcp" / MCP_PROFILES).is_file():
            values["mcp_profiles"] = MCP_PROFILES  # shipped beside the handler, read from the task root
        fn = self._function(
            "mcp",
            self._config.mcp,
            McpSettings,
            values,
            "POST /mcp: read-only agent tools (MCP)",
            self._answer_unscoped(),
            self._identity_files(),
        )
        self._grant_answering(fn)
        self._storage.grant_read_registry(fn.role)
        return fn

    def _build_documents(self) -> CitewiseFunction:
        values = {
            **self._document_values(),
            **self._identity_values(),
            **self._cors_values(),
            **self._audit.values(),
            "upload_url_ttl": str(self._config.api.upload_url_ttl_s),
        }
        if self._config.prices is not None:  # the usage routes' cost estimate
            values["prices"] = self._config.prices.model_dump_json()
        fn = self._function(
            "documents",
            self._config.documents,
            DocumentsSettings,
            values,
            "/v1/documents, /v1/uploads, /v1/admin/ (the operator's), health",
            files=self._identity_files(),
        )
        self._storage.grant_manage_documents(fn.role)
        self._storage.grant_registry(fn.role, DYNAMODB_ACTIONS)
        self._storage.grant_sources(fn.role)
        self._grant_search(
            fn, (SearchAccess.READ, SearchAccess.WRITE), (VectorAccess.DELETE, VectorAccess.VECTOR_SPACE)
        )
        self._audit.grant_write(fn.role)
        self._audit.grant_read(fn.role)
        return fn

    def _build_erasure(self) -> CitewiseFunction:
        fn = self._function(
            "erasure",
            self._config.erasure,
            ErasureSettings,
            self._document_values(),
            "tenant erasure, resumed through its own queue",
        )
        self._storage.grant_erase_tenants(fn.role)
        self._grant_search(fn, (SearchAccess.READ, SearchAccess.WRITE), (VectorAccess.ERASE, VectorAccess.KEY_DESTROY))
        return fn

    def _build_refresh(self) -> CitewiseFunction:
        config = self._config
        # The embedder is named for the cold start's check only (`Services`): no refresh embeds anything.
        values = {
            "backend": "aws",
            "embedder": config.models.embedder,
            "embedding_dimension": str(config.models.embedding_dimension),
            "registry_table": self._storage.table.table_name,
            "documents_bucket": self._storage.bucket.bucket_name,
            "max_document_bytes": str(self._config.ingest.max_document_bytes),
        }
        fn = self._function(
            "refresh", self._config.refresh, RefreshSettings, values, "web sources' refreshes, through its own queue"
        )
        self._storage.grant_sources(fn.role)
        self._storage.grant_write_source_pages(fn.role)
        self.add_web_layer(fn)
        return fn

    def _build_bootstrap(self) -> CitewiseFunction | None:
        if isinstance(self._search, VectorStore):
            return None
        fn = self._function(
            "bootstrap",
            self._config.bootstrap,
            BootstrapSettings,
            self._search_values(),
            "deploy-time creation of the search index",
        )
        self._grant_search(fn, (SearchAccess.DESCRIBE, SearchAccess.CREATE), ())
        return fn
