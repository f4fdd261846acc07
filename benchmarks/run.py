"""Run every benchmark, print one table, write `benchmarks/results/latest.json` (what `make bench` does).

Usage: python -m benchmarks.run [--only NAME ...] [--output PATH]

Each figure is the median of repeated runs; the table shows how many and their spread. Progress goes
to stderr, the table to stdout. A measurement that fails is reported and the others still run; the exit
status is then 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import chunker_comparison, cold_imports, ingest_pdf, ingest_throughput, layer_size, query_latency
from benchmarks.common import Figure, Section, log, machine

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
# Cheap and self-contained first; the query latency build (~2 minutes at 100k chunks) last.
MEASUREMENTS: dict[str, Callable[[], Section]] = {
    "ingest_throughput": ingest_throughput.run,
    "ingest_pdf": ingest_pdf.run,
    "chunker_comparison": chunker_comparison.run,
    "cold_imports": cold_imports.run,
    "layer_size": layer_size.run,
    "query_latency": query_latency.run,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(MEASUREMENTS), help="run only these measurements")
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"JSON results (default {RESULTS})")
    args = parser.parse_args()
    names = args.only or list(MEASUREMENTS)
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    report: dict[str, Any] = {"started_at": started_at.isoformat(timespec="seconds"), "machine": machine()}
    sections: list[Section] = []
    failed = False
    for name in names:
        log(f"{name} ...")
        section_started = time.perf_counter()
        try:
            section = MEASUREMENTS[name]()
        except Exception as exc:  # noqa: BLE001 - one broken measurement must not lose the others
            traceback.print_exc()
            section = Section(name, name, context={"error": f"{type(exc).__name__}: {exc}"})
            failed = True
        section.context["section_s"] = round(time.perf_counter() - section_started, 1)
        log(f"{name} done in {section.context['section_s']} s")
        sections.append(section)
    report["total_s"] = round(time.perf_counter() - started, 1)
    report["machine"]["load_average_at_end"] = list(os.getloadavg())
    report["sections"] = {section.name: section.to_json() for section in sections}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(table(report["machine"], sections, report["total_s"]))
    print(f"\nwrote {args.output}")
    return 1 if failed else 0


def table(host: dict[str, Any], sections: list[Section], total_s: float) -> str:
    """The plain-text report: the machine, then every figure by section, then the total time."""
    versions = ", ".join(f"{k} {v}" for k, v in host["versions"].items() if v)
    lines = [
        f"machine: {host['cpu_model']}, {host['usable_cores']} of {host['cores']} cores, {host['memory_gib']} GiB, "
        f"Python {host['python']}; {versions}",
        f"load average at start {host['load_average_at_start'][0]:.2f}, at end {host['load_average_at_end'][0]:.2f}",
    ]
    width = max((len(f.label) for s in sections for f in s.figures), default=20)
    for section in sections:
        lines += ["", f"{section.title}  [{section.context['section_s']} s]"]
        if "error" in section.context:
            lines.append(f"  {section.context['error']}")
        if section.figures:
            lines.append(f"  {'figure':<{width}}  {'median':>10}  {'unit':<8} {'n':>2}  min - max")
        lines += [f"  {_row(figure, width)}" for figure in section.figures]
    lines += ["", f"total: {total_s:.0f} s"]
    return "\n".join(lines)


def _row(figure: Figure, width: int) -> str:
    spread = f"{_number(min(figure.runs))} - {_number(max(figure.runs))}" if len(figure.runs) > 1 else ""
    return f"{figure.label:<{width}}  {_number(figure.median):>10}  {figure.unit:<8} {len(figure.runs):>2}  {spread}"


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


if __name__ == "__main__":
    sys.exit(main())
