"""The citewise CDK app (`cdk synth -c env=dev`, see cdk.json and docs/deploy.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from aws_cdk import App

# `cdk` runs this file as a script: make the sibling package importable.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from citewise_infra.app import build  # noqa: E402


def main() -> None:
    """Synthesize the stack of the environment chosen with `-c env=NAME`."""
    app = App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
