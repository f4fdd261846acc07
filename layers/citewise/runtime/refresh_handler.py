"""The entry point of the refresh function: the schedule's tick, and the batches of refreshes on its queue.

Two events reach it. EventBridge Scheduler's, every few minutes (`{"type": "citewise.refresh.schedule"}`):
it starts a run for every source whose time has come (`citewise.ingest.sources.start_due`: the lock taken,
the first message queued) and returns. An SQS batch from its queue: each message continues one run
(`Refresher.run`) until the invocation's budget is nearly spent; a run not finished is sent again, so a
site of any size is refreshed over as many invocations as it takes, each well inside the function's time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final, cast

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from citewise.aws.sqs_refresh import parse_refresh
from citewise.domain import deadline
from citewise.ingest.sources import start_due
from citewise.runtime.observability import logger, metrics, tracer
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import RefreshSettings, load_settings

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
SCHEDULE_EVENT: Final = "citewise.refresh.schedule"
"""The `type` of the schedule's event (the schedule's fixed input, `citewise_infra.refresh`)."""
DUE_PER_TICK: Final = 200
"""Sources one tick starts at most; the rest are still due at the next tick."""


def refresh_handler(services: Services | None = None) -> LambdaHandler:
    """The handler of the refresh function (one message per batch: a run takes the whole budget)."""
    wired = services if services is not None else build_services(load_settings(RefreshSettings))
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_handler(record: SQSRecord) -> None:
        message = parse_refresh(record.body)
        logger.append_keys(tenant_id=message.tenant_id, source_id=message.source_id, run_id=message.run_id)
        try:
            run = wired.refresher().run(message, time_left=deadline.remaining)
        except Exception as exc:  # BatchProcessor logs a failed record's exception at DEBUG only
            logger.warning("refresh run failed, to be retried", extra={"error": repr(exc)})
            metrics.add_metric(name="RefreshFailures", unit=MetricUnit.Count, value=1)
            raise
        if run is None:
            logger.info("refresh message without its run (finished, taken over or removed): dropped")
            return
        summary = run.summary
        logger.info("refresh run", extra={"finished": run.finished_at is not None, **summary.model_dump()})
        if run.finished_at is None:
            wired.refresh_queue.send(message)
            return
        metrics.add_metric(name="SourcesRefreshed", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="PagesStored", unit=MetricUnit.Count, value=summary.changed + summary.new)

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics(capture_cold_start_metric=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        with deadline.budget(context.get_remaining_time_in_millis()):
            if event.get("type") == SCHEDULE_EVENT:
                started = start_due(wired.sources, wired.refresh_queue, now=datetime.now(UTC), limit=DUE_PER_TICK)
                logger.info("refreshes started", extra={"started": len(started)})
                return {"started": len(started)}
            return dict(
                process_partial_response(
                    event=event, record_handler=record_handler, processor=processor, context=context
                )
            )

    return cast(LambdaHandler, lambda_handler)
