"""The would-be Lambda layer's size: runtime dependencies for arm64 / Python 3.12, plus citewise itself.

The layer holds `[project] dependencies` and the `aws` extra less boto3/botocore (the Lambda runtime has
them), installed by pip for `manylinux2014_aarch64` and CPython 3.12 wheels only, plus the citewise
package built from this working tree. Three figures, each `du -sb` of a `pip install --target`:

- as listed, `--no-deps`: only the distributions named in pyproject.toml. This understates the layer:
  pydantic's compiled core, requests and others are dependencies of those, not named by us;
- with their dependencies: what the layer must really hold for the imports to work;
- the same less what the Python 3.12 runtime already provides (the AWS SDK's own dependencies: urllib3,
  python-dateutil, six, jmespath, s3transfer) and what only those needed (pip picked python-dateutil
  4, which wants tzdata; the runtime's 2.x does not): the realistic layer, also reported zipped.

Byte code is not compiled (`--no-compile`): pip would compile for this interpreter, not for the
runtime's. Sizes do not vary between runs, so each is measured once.
"""

from __future__ import annotations

import csv
import re
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

from benchmarks.common import REPO, Section, log, run_command

PLATFORM = ("--platform", "manylinux2014_aarch64", "--only-binary=:all:", "--python-version", "3.12")
IN_RUNTIME = frozenset({"boto3", "botocore"})
# What the python3.12 runtime ships besides boto3 and botocore: their own dependencies.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six"})
LAMBDA_LAYER_LIMIT_MB = 250  # unzipped, all layers and the function together


def layer_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The runtime dependencies and the `aws` extra, as written in pyproject.toml, less the runtime's own."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["aws"]]
    return [r for r in requirements if _name(r) not in IN_RUNTIME]


def run() -> Section:
    section = Section("layer_size", "Lambda layer size (arm64, Python 3.12): runtime deps + aws extra + citewise")
    requirements = layer_requirements()
    section.context["requirements"] = requirements
    with tempfile.TemporaryDirectory(prefix="citewise-layer-") as tmp:
        root = Path(tmp)
        source = _copy_source(root / "src")
        try:
            log("  layer size: pip install --no-deps")
            listed = root / "listed"
            _pip(listed, [*PLATFORM, "--no-deps", *requirements])
            _pip(listed, ["--no-deps", str(source)])
            log("  layer size: pip install with dependencies")
            layer = root / "layer"
            _pip(layer, [*PLATFORM, *requirements])
            _pip(layer, ["--no-deps", str(source)])
        except RuntimeError as exc:
            section.context["error"] = f"not measured: {exc}"
            return section
        section.add("listed_mb", "as listed in pyproject (--no-deps), unzipped", "MB", [_du(listed) / 1e6])
        section.add("closure_mb", "with all their dependencies, unzipped", "MB", [_du(layer) / 1e6])
        installed = _distributions(layer)
        needed = _reachable(installed, {_name(r) for r in requirements} | {"citewise"})
        removed = sorted(name for name in installed if name not in needed)
        for name in removed:
            _remove(layer, installed[name])
        section.add("layer_mb", "less what the runtime provides: the layer, unzipped", "MB", [_du(layer) / 1e6])
        archive = shutil.make_archive(str(root / "layer"), "zip", layer)
        section.add("layer_zip_mb", "the layer, zipped", "MB", [Path(archive).stat().st_size / 1e6])
        sizes = {name: _record_bytes(layer, info) for name, info in _distributions(layer).items()}
        section.context.update(
            {
                "removed_as_provided_by_the_runtime": removed,
                "distributions_mb": {n: round(b / 1e6, 2) for n, b in sorted(sizes.items(), key=lambda kv: -kv[1])},
                "lambda_unzipped_limit_mb": LAMBDA_LAYER_LIMIT_MB,
                "target": "manylinux2014_aarch64, CPython 3.12, wheels only, no byte code",
            }
        )
    return section


def _pip(target: Path, arguments: list[str]) -> None:
    completed = run_command(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(target), *arguments]
    )
    if completed.returncode != 0:
        last = [line for line in completed.stderr.splitlines() if line.strip()][-1:]
        raise RuntimeError(f"pip could not install {arguments[-1]!r}: {' '.join(last)}")


def _copy_source(destination: Path) -> Path:
    """The files setuptools needs to build citewise, copied so the build writes nothing into the repo."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, destination / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(REPO / "layers", destination / "layers", ignore=ignore)
    return destination


def _du(path: Path) -> int:
    completed = run_command(["du", "-sb", str(path)])
    return int(completed.stdout.split()[0])


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else requirement


def _distributions(target: Path) -> dict[str, Path]:
    """Installed distributions under `target` by normalised name, each with its .dist-info folder."""
    found: dict[str, Path] = {}
    for info in target.glob("*.dist-info"):
        metadata = (info / "METADATA").read_text(encoding="utf-8", errors="replace")
        name = next((line[5:].strip() for line in metadata.splitlines() if line.startswith("Name:")), info.name)
        found[_name(name)] = info
    return found


def _reachable(installed: dict[str, Path], roots: set[str]) -> set[str]:
    """Distributions our requirements need, not following what the runtime provides (its deps are there)."""
    needed: set[str] = set()
    frontier = [name for name in roots if name not in RUNTIME_PROVIDED]
    while frontier:
        name = frontier.pop()
        if name in needed or name not in installed:
            continue
        needed.add(name)
        frontier += [dep for dep in _requires(installed[name]) if dep not in RUNTIME_PROVIDED]
    return needed


def _requires(info: Path) -> list[str]:
    """The names a distribution requires, less those of its optional extras (markers otherwise kept)."""
    metadata = (info / "METADATA").read_text(encoding="utf-8", errors="replace")
    return [
        _name(line.removeprefix("Requires-Dist:"))
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]


def _record_files(target: Path, info: Path) -> list[Path]:
    """The files a distribution's RECORD lists that lie inside `target` (scripts may point outside)."""
    files = []
    with (info / "RECORD").open(encoding="utf-8", newline="") as record:
        for row in csv.reader(record):
            if row:
                path = (target / row[0]).resolve()
                if path.is_relative_to(target.resolve()) and path.is_file():
                    files.append(path)
    return files


def _record_bytes(target: Path, info: Path) -> int:
    return sum(path.stat().st_size for path in _record_files(target, info))


def _remove(target: Path, info: Path) -> None:
    """Delete a distribution's files, then the folders it leaves empty."""
    folders: set[Path] = set()
    for path in _record_files(target, info):
        path.unlink()
        folders.update(
            parent for parent in path.parents if parent.is_relative_to(target.resolve()) and parent != target.resolve()
        )
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
