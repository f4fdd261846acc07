"""The index bootstrap function: CloudFormation's custom resource requests -> `citewise.runtime.bootstrap`.

Called by the CDK `custom_resources.Provider` framework at deploy time; it answers with the physical
id and data of the resource, or raises to fail the deployment (see `citewise.runtime.bootstrap` for why Delete
does nothing and which failures are retried).
"""

from __future__ import annotations

from citewise.runtime.coldstart import init_phase

# Time kept back from the Lambda timeout to report a failure instead of being killed mid-retry.
_REPORT_MARGIN_S = 20.0

with init_phase():
    import time
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from citewise.runtime.bootstrap import handle_event
    from citewise.runtime.observability import logger
    from citewise.runtime.services import Services, build_services
    from citewise.runtime.settings import BootstrapSettings, load_settings

    def _services() -> Services:
        return build_services(load_settings(BootstrapSettings))

    @logger.inject_lambda_context(log_event=True)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """Create or check the index on Create/Update; nothing on Delete."""
        deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - _REPORT_MARGIN_S
        return handle_event(event, _services, deadline=deadline)
