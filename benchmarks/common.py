"""What every measurement shares: figures with their repeated runs, medians, and the machine they ran on.

The machine is shared and noisy, so a figure is never one timing: it keeps every run and reports the
median, and the table shows the spread (min-max) beside it so noise is visible rather than hidden.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Figure:
    """One reported number: the median of `runs` (a single run for counts and sizes, which do not vary)."""

    key: str
    label: str
    unit: str
    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "unit": self.unit,
            "median": _round(self.median),
            "runs": [_round(r) for r in self.runs],
        }


@dataclass
class Section:
    """The figures of one measurement, plus what a reader needs to interpret them (`context`)."""

    name: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, label: str, unit: str, runs: Sequence[float]) -> Figure:
        if not runs:
            raise ValueError(f"figure {key!r} has no runs")
        figure = Figure(key, label, unit, tuple(float(r) for r in runs))
        self.figures.append(figure)
        return figure

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "figures": {figure.key: figure.to_json() for figure in self.figures},
            "context": self.context,
        }


def timed(action: Callable[[], _T]) -> tuple[_T, float]:
    """`action()`'s result and its wall time in seconds."""
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Per-run ratios of paired runs: pairs measured back to back share the machine's load of the moment."""
    return [a / b for a, b in zip(numerators, denominators, strict=True)]


def log(message: str) -> None:
    """Progress on stderr, so stdout holds only the table."""
    print(message, file=sys.stderr, flush=True)


def run_command(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a program by absolute path (resolved here) with fixed arguments built by this package."""
    executable = args[0] if Path(args[0]).is_absolute() else shutil.which(args[0])
    if executable is None:
        raise FileNotFoundError(args[0])
    return subprocess.run([executable, *args[1:]], capture_output=True, text=True, check=False, **kwargs)  # noqa: S603 - no untrusted input


def machine() -> dict[str, Any]:
    """Cores, CPU model, memory, Python and library versions, load, and the commit measured."""
    cpuinfo = _read("/proc/cpuinfo")
    model = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), None
    )
    memory = next(
        (line.split()[1] for line in _read("/proc/meminfo").splitlines() if line.startswith("MemTotal")), None
    )
    commit = run_command(["git", "rev-parse", "HEAD"], cwd=REPO)
    dirty = run_command(["git", "status", "--porcelain"], cwd=REPO)
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "memory_gib": round(int(memory) / 2**20, 1) if memory else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "versions": {name: _version(name) for name in ("numpy", "pypdfium2", "pydantic", "tokenizers", "fpdf2")},
        "load_average_at_start": list(os.getloadavg()),
        "commit": commit.stdout.strip() or None,
        "working_tree_dirty": bool(dirty.stdout.strip()),
    }


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _round(value: float) -> float:
    """Four significant digits: more would only report noise."""
    return float(f"{value:.4g}")
