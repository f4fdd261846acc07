"""`python -m citewise`: the `citewise` command, where the local platform is installed.

The command lives in the local package, which the library never imports (import-linter holds it to
that, and the Lambda layer ships without it). So it is found as the local backends are: through the
entry point the installed distribution registers (the `citewise` console script), loaded only here.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

COMMAND = "citewise"


def main() -> int:
    """Run the installed `citewise` console script; 2 with a hint where it is not installed."""
    found = entry_points(group="console_scripts", name=COMMAND)
    if not found:
        print(f"error: the {COMMAND} command is not installed here: pip install 'citewise[local]'", file=sys.stderr)
        return 2
    command = found[COMMAND].load()
    return int(command())


if __name__ == "__main__":
    sys.exit(main())
