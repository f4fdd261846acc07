"""Cold import of what each future Lambda handler will load, in a fresh process, against bare boto3.

There are no handlers yet, so each is stood in for by the library entry points it will call:
query (`citewise.answering`, `citewise.retrieval`), ingest (`citewise.ingestion`, `citewise.parsing`) and
documents (`citewise.registry.dynamodb`, `citewise.blobstore.s3`). Two figures per handler, each from
its own fresh interpreter: the whole process's wall time for `python -c "import ..."`, and the sum of
`python -X importtime`'s self times (import work alone, without interpreter start-up and exit).

Both are compared with the same figures for a process that only imports boto3, which every Python
Lambda pays for anyway; the ratio is the handler's import cost in units of that. Rounds run the
processes back to back in a rotating order, so the ratios pair runs made under the same load. A first,
untimed round leaves byte-code caches warm, as in a layer that ships them.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter

from benchmarks.common import Section, log, ratios, run_command, timed

BASELINE = "boto3"
HANDLERS: dict[str, tuple[str, ...]] = {
    "query": ("citewise.answering", "citewise.retrieval"),
    "ingest": ("citewise.ingestion", "citewise.parsing"),
    "documents": ("citewise.registry.dynamodb", "citewise.blobstore.s3"),
}
# Heavy or notable modules whose presence after the imports is worth knowing (numpy must not be among
# them on Lambda: the layer does not ship it).
WATCHED = ("numpy", "boto3", "botocore", "pydantic", "pypdf", "opensearchpy", "requests")


def _statement(modules: tuple[str, ...]) -> str:
    return "import " + ", ".join(modules)


def process_wall_s(modules: tuple[str, ...]) -> float:
    """Wall time of a whole fresh interpreter that imports `modules` (-I: no user site, no PYTHON* env)."""
    completed, wall_s = timed(lambda: run_command([sys.executable, "-I", "-c", _statement(modules)]))
    if completed.returncode != 0:
        raise RuntimeError(f"{_statement(modules)!r} failed: {completed.stderr.strip()}")
    return wall_s


def importtime_s(modules: tuple[str, ...]) -> dict[str, float]:
    """`-X importtime`'s self times, in seconds, summed by top-level package (the total is their sum)."""
    completed = run_command([sys.executable, "-I", "-X", "importtime", "-c", _statement(modules)])
    if completed.returncode != 0:
        raise RuntimeError(f"{_statement(modules)!r} failed: {completed.stderr.strip()}")
    by_package: Counter[str] = Counter()
    for line in completed.stderr.splitlines():
        # "import time:       123 |        456 |   package.module"; the header's columns are not numbers.
        fields = line.removeprefix("import time:").split("|")
        if line.startswith("import time:") and len(fields) == 3 and fields[0].strip().isdigit():
            by_package[fields[2].strip().split(".")[0]] += int(fields[0])
    return {package: us / 1e6 for package, us in by_package.items()}


def loaded(modules: tuple[str, ...]) -> list[str]:
    """Which of the watched top-level packages the imports pulled in."""
    code = f"{_statement(modules)}; import json, sys; print(json.dumps([m for m in {WATCHED!r} if m in sys.modules]))"
    completed = run_command([sys.executable, "-I", "-c", code])
    return list(json.loads(completed.stdout)) if completed.returncode == 0 else []


def run(rounds: int = 7) -> Section:
    section = Section("cold_imports", "Cold import per future Lambda handler, fresh process, vs bare `import boto3`")
    groups: dict[str, tuple[str, ...]] = {BASELINE: (BASELINE,), **HANDLERS, "interpreter": ("sys",)}
    for modules in groups.values():  # warm the byte-code caches; not timed
        process_wall_s(modules)
    walls: dict[str, list[float]] = {name: [] for name in groups}
    imports: dict[str, list[float]] = {name: [] for name in groups}
    packages: dict[str, list[dict[str, float]]] = {name: [] for name in groups}
    names = list(groups)
    for round_number in range(rounds):
        log(f"  cold imports: round {round_number + 1} of {rounds}")
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            walls[name].append(process_wall_s(groups[name]))
            packages[name].append(importtime_s(groups[name]))
            imports[name].append(sum(packages[name][-1].values()))
    section.add(
        "interpreter_wall_ms",
        "bare interpreter (python -c 'import sys'): process wall",
        "ms",
        [w * 1000 for w in walls["interpreter"]],
    )
    section.add("boto3_wall_ms", "import boto3: process wall", "ms", [w * 1000 for w in walls[BASELINE]])
    section.add("boto3_importtime_ms", "import boto3: -X importtime sum", "ms", [t * 1000 for t in imports[BASELINE]])
    for name, modules in HANDLERS.items():
        label = f"{name} ({' + '.join(m.removeprefix('citewise.') for m in modules)})"
        section.add(f"{name}_wall_ms", f"{label}: process wall", "ms", [w * 1000 for w in walls[name]])
        section.add(f"{name}_wall_ratio", f"{name}: process wall / boto3's", "x", ratios(walls[name], walls[BASELINE]))
        section.add(f"{name}_importtime_ms", f"{label}: -X importtime sum", "ms", [t * 1000 for t in imports[name]])
        section.add(
            f"{name}_importtime_ratio",
            f"{name}: importtime sum / boto3's",
            "x",
            ratios(imports[name], imports[BASELINE]),
        )
    section.context.update(
        {
            "python": sys.executable,
            "rounds": rounds,
            "handlers": {name: list(modules) for name, modules in HANDLERS.items()},
            "loaded": {name: loaded(groups[name]) for name in (BASELINE, *HANDLERS)},
            "importtime_top_packages_ms": {name: _top(packages[name]) for name in (BASELINE, *HANDLERS)},
            "note": "local venv interpreter and x86_64 wheels; Lambda runs Python 3.12 on its own CPUs",
        }
    )
    return section


def _top(runs: list[dict[str, float]], count: int = 8) -> dict[str, float]:
    """The packages with the largest median import time over the rounds, in ms."""
    names = {name for run in runs for name in run}
    medians = {name: statistics.median(run.get(name, 0.0) for run in runs) * 1000 for name in names}
    return {name: round(ms, 1) for name, ms in sorted(medians.items(), key=lambda kv: -kv[1])[:count]}
