"""CPU time of each Lambda handler's init, against `import boto3`: the cold-init figure a busy machine
cannot inflate.

`cold_imports` times wall clock, which on a shared 2-core machine at a load of 10 is mostly waiting for a
core (its figures then spread 1-18x between rounds). The CPU a process spends on its own init barely
depends on the load, so this compares two source trees on that: the same handlers, the same Lambda
environment (`cold_imports.lambda_environment`), `time.process_time()` around loading the handler module
in a fresh interpreter, the trees alternated within each round.

    python -m benchmarks.cold_cpu --rounds 5 BEFORE_TREE AFTER_TREE

A tree is a checkout of the repository (`git worktree add /tmp/before main`); its `layers/` goes first on
PYTHONPATH, so the installed citewise does not stand in for it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from benchmarks.cold_imports import BASELINE, HANDLERS, lambda_environment
from benchmarks.common import run_command


def _code(name: str, tree: Path) -> str:
    if name == BASELINE:
        load = "import boto3"
    else:
        path = str(tree / "functions" / name / "handler.py")
        load = (
            "import importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('handler', {path!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
        )
    return f"import time\n_started = time.process_time()\n{load}\nprint(time.process_time() - _started)"


def init_cpu_s(name: str, tree: Path) -> float:
    """CPU seconds a fresh interpreter spends loading `name` (a handler, or boto3) from `tree`."""
    environment = lambda_environment(name) | {"PYTHONPATH": f"{tree / 'layers'}:{tree}"}
    completed = run_command([sys.executable, "-c", _code(name, tree)], env=environment, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(f"{name} in {tree} failed: {completed.stderr.strip()[-2000:]}")
    return float(completed.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    names = (BASELINE, *HANDLERS)
    cpu: dict[tuple[str, str], list[float]] = {}
    ratio: dict[tuple[str, str], list[float]] = {}
    for round_number in range(args.rounds):
        print(f"round {round_number + 1} of {args.rounds}", file=sys.stderr)
        for tree in args.trees:
            baseline = init_cpu_s(BASELINE, tree)
            cpu.setdefault((str(tree), BASELINE), []).append(baseline)
            for name in names[1:]:
                seconds = init_cpu_s(name, tree)
                cpu.setdefault((str(tree), name), []).append(seconds)
                ratio.setdefault((str(tree), name), []).append(seconds / baseline)
    print("| handler | " + " | ".join(f"{tree}: CPU ms, / boto3's" for tree in args.trees) + " |")
    for name in names:
        cells = []
        for tree in args.trees:
            median_ms = statistics.median(cpu[(str(tree), name)]) * 1000
            rate = ratio.get((str(tree), name))
            cells.append(f"{median_ms:,.0f} ms" + (f", {statistics.median(rate):.2f}x" if rate else ""))
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
