"""The entry point of the ingest function: SQS batches of S3 notifications, built once per cold start.
The same queue delivers the delayed stale-chunk sweeps a Serverless index asks for (`citewise.ports.sweeps`).

`functions/ingest/handler.py` is one line that calls `ingest_handler`. It imports nothing of the API
(the REST resolver alone costs a cold start about 150 ms), only the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from citewise.domain import deadline
from citewise.domain.errors import IngestDeferredError, ValidationError
from citewise.ingest.pipeline import IngestResult, Outcome
from citewise.ingest.s3events import apply, parse_notification
from citewise.ports.blobstore import key_to_location
from citewise.ports.erasure import TenantErasingError
from citewise.ports.index import VectorIndex
from citewise.ports.sweeps import StaleSweep, StaleSweeper, parse_sweep
from citewise.runtime.observability import logger, metrics, timed, tracer
from citewise.runtime.services import build_services
from citewise.runtime.settings import IngestSettings, load_settings

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def ingest_handler() -> LambdaHandler:
    """The handler of the ingest function: SQS batches of S3 notifications, with partial failures.

    A record fails (and SQS redelivers it, then moves it to the DLQ) when ingestion raised a transient
    error; the document already shows FAILED with the reason by then. A document too long for one
    invocation is deferred the same way (`IngestDeferredError`), its record PENDING and its progress
    kept, so each delivery embeds more of it until one indexes it. Keys outside `tenants/{id}/` are
    logged and dropped: retrying cannot make them valid, and they must never be indexed.
    """
    services = build_services(load_settings(IngestSettings))
    # A batch that failed whole is still a normal answer listing its records: the function's Errors
    # metric stays for crashes, and IngestFailures counts failed records.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_handler(record: SQSRecord) -> None:
        try:
            sweep = parse_sweep(record.body)
            if sweep is not None:
                _run_sweep(services.index, sweep)
                return
            events = parse_notification(record.body)
        except ValidationError as exc:  # kept for the DLQ by failing the record; say so where it shows
            logger.warning("malformed message", extra={"message_id": record.message_id, "reason": exc.message})
            metrics.add_metric(name="IngestFailures", unit=MetricUnit.Count, value=1)
            raise
        for event in events:
            try:
                services.check_not_erasing(key_to_location(event.key)[0])
                with timed("IngestLatency"):
                    result = apply(event, services.ingestor, services.blobs, key_to_location)
            except TenantErasingError:  # its erasure deletes the object; indexing it would only race that
                logger.info("object of a tenant being erased dropped", extra={"key": event.key})
                metrics.add_metric(name="UploadsRefused", unit=MetricUnit.Count, value=1)
                continue
            except ValidationError as exc:
                logger.warning(
                    "object key rejected", extra={"bucket": event.bucket, "key": event.key, "reason": exc.message}
                )
                metrics.add_metric(name="IngestRejected", unit=MetricUnit.Count, value=1)
                continue
            except IngestDeferredError as exc:  # progress kept: the redelivery goes on from there
                logger.info("ingest deferred, to be continued", extra={"key": event.key, **exc.details})
                metrics.add_metric(name="IngestDeferrals", unit=MetricUnit.Count, value=1)
                raise
            except Exception as exc:  # BatchProcessor logs a failed record's exception at DEBUG only
                logger.warning("ingest failed, to be retried", extra={"key": event.key, "error": repr(exc)})
                metrics.add_metric(name="IngestFailures", unit=MetricUnit.Count, value=1)
                raise
            if result is not None:
                _record_outcome(result)

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics(capture_cold_start_metric=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        with deadline.budget(context.get_remaining_time_in_millis()):
            return dict(
                process_partial_response(
                    event=event,
                    record_handler=record_handler,
                    processor=processor,
                    context=context,
                )
            )

    return cast(LambdaHandler, lambda_handler)


def _run_sweep(index: VectorIndex, sweep: StaleSweep) -> None:
    """Run a delayed stale-chunk sweep (`citewise.ports.sweeps`); only a Serverless index sends them."""
    if not isinstance(index, StaleSweeper):
        raise ValidationError("a stale-chunk sweep arrived for an index that does not sweep")
    removed = index.sweep_stale(sweep)
    logger.info("stale chunks swept", extra={"tenant_id": sweep.tenant_id, "doc_id": sweep.doc_id, "removed": removed})
    metrics.add_metric(name="StaleChunksSwept", unit=MetricUnit.Count, value=removed)


def _record_outcome(result: IngestResult) -> None:
    document = result.document
    logger.info(
        "document ingested",
        extra={
            "tenant_id": document.tenant_id,
            "doc_id": document.doc_id,
            "outcome": result.outcome.value,
            "chunks": document.chunk_count,
            "embedded": result.embedded,
            "reused": result.reused,
            "error": document.error,
            "reason": result.reason,
        },
    )
    if result.outcome is Outcome.REFUSED:
        metrics.add_metric(name="UploadsRefused", unit=MetricUnit.Count, value=1)
    elif result.outcome is Outcome.FAILED:
        metrics.add_metric(name="IngestFailures", unit=MetricUnit.Count, value=1)
    elif result.outcome in (Outcome.NEW, Outcome.MODIFIED):
        metrics.add_metric(name="DocumentsIndexed", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="ChunksIndexed", unit=MetricUnit.Count, value=document.chunk_count)
        metrics.add_metric(name="ChunksEmbedded", unit=MetricUnit.Count, value=result.embedded)
