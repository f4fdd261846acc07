"""The entry point of the erasure function: runs tenants' erasures from its queue (`citewise.aws.sqs_erasure`).

Each message says "continue the erasure of T". The job (`citewise.ports.erasure.run_erasure`) runs until
the invocation's budget is nearly spent, then the handler sends the message again and returns: a tenant
of any size is erased over as many invocations as it takes. A run that found nothing it could delete
yet (a Serverless index's refresh lag) is sent again after `RETRY_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from citewise.aws.sqs_erasure import parse_erasure
from citewise.domain import deadline
from citewise.ports.erasure import RETRY_SECONDS, ErasureStatus
from citewise.runtime.observability import logger, metrics, tracer
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import ErasureSettings, load_settings

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
MIN_RUN_SECONDS = 5.0
"""A run stopped with less than this left ran out of time: its continuation is sent at once."""


def erasure_handler(services: Services | None = None) -> LambdaHandler:
    """The handler of the erasure function (one message per batch: each run takes the whole budget)."""
    wired = services if services is not None else build_services(load_settings(ErasureSettings))
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_handler(record: SQSRecord) -> None:
        tenant_id = parse_erasure(record.body)
        logger.append_keys(tenant_id=tenant_id)
        try:
            erasure = wired.run_erasure(tenant_id)
        except Exception as exc:  # BatchProcessor logs a failed record's exception at DEBUG only
            logger.warning("erasure run failed, to be retried", extra={"error": repr(exc)})
            metrics.add_metric(name="ErasureFailures", unit=MetricUnit.Count, value=1)
            raise
        part = {part.store: part.deleted for part in erasure.stores}
        logger.info("erasure run", extra={"status": erasure.status.value, "steps": erasure.steps, "deleted": part})
        if erasure.status is ErasureStatus.ERASED:
            metrics.add_metric(name="TenantsErased", unit=MetricUnit.Count, value=1)
            return
        left = deadline.remaining()
        out_of_time = left is not None and left < MIN_RUN_SECONDS
        wired.erasure_queue.send(tenant_id, delay_seconds=0 if out_of_time else RETRY_SECONDS)

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics(capture_cold_start_metric=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        with deadline.budget(context.get_remaining_time_in_millis()):
            return dict(
                process_partial_response(
                    event=event, record_handler=record_handler, processor=processor, context=context
                )
            )

    return cast(LambdaHandler, lambda_handler)
