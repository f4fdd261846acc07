"""The Powertools logger, tracer and metrics of every function, created once.

Logs are structured JSON with the request id as correlation id and the tenant id appended per request;
document text, questions and tokens are never logged. Library modules log through stdlib loggers named
for their module (`citewise.ingest.s3events` ...), which need nothing of Powertools; their records go through
this logger's handler and formatter, so they carry the same correlation id, tenant and function keys.
Metrics go out as EMF in namespace `Citewise` (POWERTOOLS_METRICS_NAMESPACE) with the function's service
name as dimension.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from citewise.domain.models import Reranking

logger = Logger()
# The libraries whose calls the functions make: botocore (DynamoDB, S3, Bedrock) and http.client, under
# urllib3 (OpenSearch). X-Ray's patch_all would patch every library it supports that is importable, and
# import each to do so: on a machine that has httpx, that alone added httpx, rich, click and pygments
# to every cold start.
_TRACED_MODULES = ("botocore", "httplib")
tracer = Tracer(patch_modules=_TRACED_MODULES)
metrics = Metrics()
# The module loggers' parent must exist for Powertools to find it. (A service named `citewise` is that
# parent already, and Powertools leaves it alone.)
logging.getLogger("citewise")
copy_config_to_registered_loggers(source_logger=logger, include={"citewise"})
# Requests that record no metric (health checks, listings) are normal here; Powertools would write a
# warning to the function's log for every one of them.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


@contextmanager
def timed(metric: str) -> Iterator[None]:
    """Record how long the block took as `metric` in milliseconds (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        metrics.add_metric(name=metric, unit=MetricUnit.Milliseconds, value=(time.perf_counter() - started) * 1000)


def count_reranking(reranking: Reranking | None) -> None:
    """Count a reranked query as `Reranked`, or as `RerankFallbacks` when the reranker failed and the fused
    order was kept (an alarm-worthy rate: model access or quota); nothing when no reranker is configured."""
    if reranking is not None:
        metric = "RerankFallbacks" if reranking.fallback else "Reranked"
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
