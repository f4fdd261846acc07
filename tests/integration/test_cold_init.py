"""Each Lambda handler's cold init, in a fresh interpreter with a deployed function's environment: what
it must not load (issue 17: init at most 3x `import boto3`; `benchmarks/cold_imports.py` times it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.cold_imports import FUNCTIONS, HANDLERS, lambda_environment

# Loaded by no handler's init: numpy is not in the layer; PDFium and the MiniLM stack come with the
# first document; httpx and rich were what X-Ray's patch_all pulled in wherever httpx is installed.
NEVER = ("numpy", "pypdfium2", "tokenizers", "httpx", "rich")
# Not loaded at any init either: dateutil's bundled zone database (and `tarfile`, which reads it) serves
# only the check of a configured time zone, never the default one.
ZONE_DATABASE = ("dateutil.zoneinfo", "tarfile")
# Nor the built-in adapters when the settings choose Bedrock's (as `lambda_environment` does): each is
# imported when it is built.
UNCHOSEN_ADAPTERS = ("citewise.builtin.extractive", "citewise.builtin.hashing")
# What each function's requests never need, kept out of its init.
# Powertools' OpenAPI models serve the OpenAPI document only, not a request's validation.
OPENAPI_MODELS = "aws_lambda_powertools.event_handler.openapi.models"
# The ingest pipeline comes with the documents function's first delete (`Services.ingestor`); the MCP
# tools only read.
NOT_AT_INIT = {
    "query": ("citewise.ingest.pipeline", "citewise.ingest.parsing", "citewise.ports.blobstore", OPENAPI_MODELS),
    "documents": ("citewise.ingest.pipeline", OPENAPI_MODELS),
    "mcp": ("citewise.ingest.pipeline", "citewise.ingest.parsing", OPENAPI_MODELS),
    "ingest": ("citewise.query.retrieval", "citewise.query.routing", "aws_lambda_powertools.event_handler"),
    "bootstrap": ("citewise.query.retrieval", "citewise.ingest.pipeline"),
}

_INIT = """
import gc, importlib.util, json, sys
import citewise.runtime.coldstart  # what a handler loads before it pauses the collector
collections = lambda: sum(generation["collections"] for generation in gc.get_stats())
spec = importlib.util.spec_from_file_location("handler", {path!r})
module = importlib.util.module_from_spec(spec)
code = spec.loader.get_code("handler")  # compiled first, so that its collections are not counted
before = collections()
exec(code, module.__dict__)
collected = collections() - before
assert callable(module.lambda_handler)
from pydantic_settings import BaseSettings
from citewise.runtime import settings
built = [name for name, kind in vars(settings).items()
         if isinstance(kind, type) and issubclass(kind, BaseSettings) and kind is not BaseSettings
         and kind.__pydantic_complete__]
print(json.dumps({{"modules": sorted(sys.modules), "built": sorted(built), "collected": collected,
                  "frozen": gc.get_freeze_count(), "collector_on": gc.isenabled()}}))
"""
# The one settings class whose validator each function builds at init (the others' are deferred).
SETTINGS_BUILT = {
    "query": ["QuerySettings"],
    "documents": ["DocumentsSettings"],
    "mcp": ["McpSettings"],
    "ingest": ["IngestSettings"],
    "bootstrap": [],  # its settings are read per request
}


@pytest.mark.parametrize("name", HANDLERS)
def test_handler_init_loads_nothing_its_requests_do_not_need(name: str) -> None:
    # Given a handler's module, and the environment its function gets on Lambda (tracing on)
    code = _INIT.format(path=str(FUNCTIONS / name / "handler.py"))

    # When a fresh interpreter loads it, as the runtime's init phase does
    completed = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-I", "-c", code], env=lambda_environment(name), capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads(completed.stdout.splitlines()[-1])
    loaded = set(report["modules"])

    # Then neither the packages no handler needs at init, nor the other side of the pipeline, are loaded
    unwanted = NEVER + ZONE_DATABASE + UNCHOSEN_ADAPTERS + NOT_AT_INIT.get(name, ())
    assert sorted(module for module in loaded if module.split(".")[0] in NEVER or module in unwanted) == []
    # And X-Ray patched the clients the functions use
    assert "aws_xray_sdk.ext.botocore.patch" in loaded
    # And only the function's own settings class was built (each costs a cold start about 5 ms)
    assert report["built"] == SETTINGS_BUILT[name]
    # And the garbage collector never ran while the handler loaded (`citewise.runtime.coldstart`): what
    # init built is frozen, out of every later collection's way, and the collector is on for requests
    assert report["collected"] == 0
    assert report["frozen"] > 50_000
    assert report["collector_on"]


@pytest.mark.parametrize("name", [name for name in HANDLERS if name != "bootstrap"])  # no bootstrap there
def test_search_mode_s3vectors_loads_no_index_adapter_at_init(name: str) -> None:
    # Given a function's environment in search mode s3vectors (a vector bucket instead of an endpoint)
    environment = lambda_environment(name)
    del environment["CITEWISE_OPENSEARCH_ENDPOINT"]
    environment["CITEWISE_VECTOR_BUCKET"] = "citewise-dev-vectors"
    code = _INIT.format(path=str(FUNCTIONS / name / "handler.py"))
    # When a fresh interpreter loads its handler
    completed = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-I", "-c", code], env=environment, capture_output=True, text=True, timeout=120
    )
    # Then its settings load, and neither index adapter is imported before a request needs one
    assert completed.returncode == 0, completed.stderr[-2000:]
    loaded = set(json.loads(completed.stdout.splitlines()[-1])["modules"])
    assert not loaded & {"citewise.aws.s3vectors", "citewise.aws.opensearch", "opensearchpy"}
