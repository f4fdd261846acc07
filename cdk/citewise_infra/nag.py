"""cdk-nag (AwsSolutions) wiring and acknowledgements.

cdk-nag 3 runs as a CDK policy-validation plugin (`Validations.of(app).add_plugins(...)`): any
unacknowledged finding fails the synth with a report (`<outdir>/validation-report.json`). A finding is
acknowledged on the construct it is about, next to the code that causes it, always with the reason it
is acceptable here.

To audit, `-c citewise:acknowledge=false` synthesizes with no acknowledgement at all, so the report
lists every raw finding (the infrastructure tests use it to prove each acknowledgement still matches a
finding, and each finding has one).
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

MIN_REASON_LENGTH = 40
# The validation plugin name cdk-nag reports under; acknowledgements are scoped to it.
PLUGIN = "AwsSolutions"
CONTEXT_ACKNOWLEDGE = "citewise:acknowledge"


def enable(app: App) -> None:
    """Check every stack of `app` against the AwsSolutions rules at synth time."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Accept finding `rule` (`AwsSolutions-XX` or `AwsSolutions-XX[Finding::detail]`) on `construct`
    and what it contains; `reason` says why it is acceptable, in a sentence a reviewer can check."""
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"the reason for acknowledging {rule} must say why ({MIN_REASON_LENGTH}+ characters)")
    if str(construct.node.try_get_context(CONTEXT_ACKNOWLEDGE)).lower() == "false":  # -c gives a string
        return
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{PLUGIN}::{rule}", reason=reason))
