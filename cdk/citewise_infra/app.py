"""Builds the CDK app of one environment from context: `-c env=NAME` picks a block of cdk.json."""

from __future__ import annotations

import os
from pathlib import Path

from aws_cdk import App, Environment

from citewise_infra import nag
from citewise_infra.config import load_environment
from citewise_infra.constants import (
    CONSOLE_ASSETS,
    CONTEXT_ALARM_EMAIL,
    CONTEXT_CONSOLE_ASSETS,
    CONTEXT_ENV,
    CONTEXT_ENVIRONMENTS,
    CONTEXT_SEARCH_MODE,
    stack_name,
)
from citewise_infra.stack import CitewiseStack


def build(app: App) -> CitewiseStack:
    """Add the stack of the environment named in the context to `app`, with cdk-nag checking it."""
    config = load_environment(
        app.node.try_get_context(CONTEXT_ENVIRONMENTS),
        app.node.try_get_context(CONTEXT_ENV),
        app.node.try_get_context(CONTEXT_ALARM_EMAIL),
        app.node.try_get_context(CONTEXT_SEARCH_MODE),
    )
    # No account in cdk.json: the one of the CLI's credentials at deploy time; none at all offline,
    # which synthesizes an account-agnostic template (nothing here needs the account number).
    env = Environment(account=config.account or os.environ.get("CDK_DEFAULT_ACCOUNT"), region=config.region)
    assets = Path(app.node.try_get_context(CONTEXT_CONSOLE_ASSETS) or CONSOLE_ASSETS)
    stack = CitewiseStack(app, stack_name(config.name), config=config, env=env, console_assets=assets)
    nag.enable(app)
    return stack
