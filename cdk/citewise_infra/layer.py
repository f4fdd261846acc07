"""The Lambda layers, built without Docker: the base layer (the `citewise` package and its pinned runtime
dependencies), which every function carries, and the web layer (main-content extraction of web pages:
pyproject's `web` extra, trafilatura and what it pulls), which only the function extracting pages carries
on top of it, so that no other function's cold start or size pays for its ~53 MiB.

`pip install --platform manylinux2014_<arch> --only-binary=:all: --python-version 3.12` fetches the
wheels built for the Lambda runtime whatever machine synthesizes, so no container is needed; pure
Python wheels are the same everywhere and the compiled ones (pydantic-core, wrapt, charset-normalizer)
come for the right CPU. Packages are pinned in `cdk/layer/requirements.txt` and installed with
`--no-deps`, so a layer is reproducible; the price of a lock is that it can drift from pyproject, and
`check_layer` is the guard: after installing, it walks pyproject's requirements through the installed
packages' metadata (markers evaluated for Python 3.12 on Linux) and refuses the layer if a requirement
is unmet, a pin is unused, a package the runtime provides (boto3, botocore, s3transfer) or a local-only
one (numpy, tokenizers) slipped in, or a shadowed package would break the runtime's botocore (the
layer comes first on `sys.path`, so its urllib3 or python-dateutil is the one botocore imports).

The web layer is pinned in `cdk/layer/web-requirements.txt` and checked the same way against the `web`
extra, over the base layer beneath it (both unpack into `/opt/python`): a requirement may be met by either
layer, a web pin nothing in the extra needs or that the base layer has already is refused, so the two
together meet every requirement and no package is in both. Lambda's size limit is on a function and all
its layers together, so the web layer's budget is checked with the base layer's size added.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import jsii
from aws_cdk import DockerImage, ILocalBundling
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from citewise_infra.constants import LAYER_REQUIREMENTS, LIBRARY_DIR, PYPROJECT, WEB_LAYER_REQUIREMENTS

Architecture = Literal["arm64", "x86_64"]
PYTHON_VERSION = "3.12"
PIP_MACHINES: dict[Architecture, str] = {"arm64": "aarch64", "x86_64": "x86_64"}
# Provided by the Lambda Python runtime; shipping them would only add weight (botocore is 30 MB).
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})
# Never in the layer: the local mode's model runtime, and what opensearch-py 3 would drag in.
FORBIDDEN = frozenset({"numpy", "tokenizers", "safetensors", "torch", "grpcio", "protobuf"})
# Lambda's limit (250 MiB) is on a function plus all its layers, unzipped: the layers a function carries
# together stay within this, which keeps room for the function's code (kilobytes today).
MAX_UNZIPPED_BYTES = 200 * 1024 * 1024
_SKIPPED_FILES = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")
NOT_IN_LAYER = frozenset({"client.py"})
"""Modules of the library (paths inside it) that Lambda never runs: the HTTP client of the API, which is
in the `citewise` package for its users (`from citewise.client import ...`), not for the functions."""


def lambda_markers(architecture: Architecture) -> dict[str, str]:
    """PEP 508 marker values of the Lambda Python 3.12 runtime on `architecture`."""
    environment: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
    environment.update(
        python_version=PYTHON_VERSION,
        python_full_version=f"{PYTHON_VERSION}.0",
        implementation_name="cpython",
        implementation_version=f"{PYTHON_VERSION}.0",
        platform_python_implementation="CPython",
        os_name="posix",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine=PIP_MACHINES[architecture],
    )
    return environment


def root_requirements(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """What the base layer must satisfy: pyproject `dependencies` and the `aws` extra."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines: list[str] = [*project["dependencies"], *project["optional-dependencies"]["aws"]]
    return [Requirement(line) for line in lines]


def web_requirements(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """What the web layer must satisfy, with the base layer beneath it: pyproject's `web` extra."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return [Requirement(line) for line in project["optional-dependencies"]["web"]]


def sdk_floor(roots: Iterable[Requirement]) -> Version:
    """The oldest boto3 the project accepts (pyproject `boto3>=X`): what the runtime must at least have.

    Lambda updates the runtime's SDK on its own schedule, so requirements on boto3/botocore are checked
    against this floor: a layer package that needs a newer SDK than the project promises is a conflict.
    """
    for requirement in roots:
        if canonicalize_name(requirement.name) == "boto3":
            floors = [Version(spec.version) for spec in requirement.specifier if spec.operator in (">=", "==")]
            if floors:
                return max(floors)
    raise ValueError("pyproject must state the oldest boto3 it supports (boto3>=X in the aws extra)")


def botocore_requirements() -> list[Requirement]:
    """botocore's own requirements (urllib3, python-dateutil, jmespath), from the installed botocore's
    metadata: the layer's copies of those shadow the runtime's, so they must satisfy botocore."""
    return [Requirement(line) for line in metadata.requires("botocore") or []]


def pinned(requirements_file: Path = LAYER_REQUIREMENTS) -> dict[str, Version]:
    """The pins of the layer's requirements file, by canonical name."""
    pins: dict[str, Version] = {}
    for raw in requirements_file.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier  # one exact pin per line
        if spec.operator != "==":
            raise ValueError(f"{requirements_file.name}: pin exact versions ({line})")
        pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


@dataclass(frozen=True)
class Installed:
    """One distribution found in the layer: version and declared requirements."""

    version: Version
    requires: tuple[str, ...]


def installed_distributions(site: Path) -> dict[str, Installed]:
    """The distributions installed under `site` (a `--target` directory), by canonical name."""
    found: dict[str, Installed] = {}
    for dist in metadata.distributions(path=[str(site)]):
        found[canonicalize_name(dist.metadata["Name"])] = Installed(Version(dist.version), tuple(dist.requires or ()))
    return found


def check_layer(
    installed: Mapping[str, Installed],
    roots: Sequence[Requirement],
    *,
    markers: Mapping[str, str],
    sdk: Version,
    shadowed_by_runtime: Sequence[Requirement] = (),
    beneath: Mapping[str, Installed] | None = None,
) -> list[str]:
    """Every reason the layer is unfit to ship; empty when it is fine.

    Walks `roots` through `installed` (each package with the extras asked of it), checking versions;
    requirements on the runtime's SDK are checked against `sdk`. `shadowed_by_runtime` are the runtime
    botocore's requirements, which the layer's copies of those packages must meet. `beneath` is the base
    layer under this one (for the web layer): its packages meet requirements too, and none may be repeated
    here; it is checked on its own, so only this layer's packages must each be needed.
    """
    below: Mapping[str, Installed] = beneath or {}
    problems: list[str] = []
    for name in sorted(installed):
        if name in RUNTIME_PROVIDED:
            problems.append(f"{name} is provided by the Lambda runtime and must not be in the layer")
        if name in FORBIDDEN:
            problems.append(f"{name} must not be in the layer (local-only or too heavy)")
        if name in below:
            problems.append(f"{name} is in the base layer already: drop its pin here")
    available = {**below, **installed}
    reached: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()
    pending: list[tuple[Requirement, str]] = [(requirement, "pyproject") for requirement in roots]
    while pending:
        requirement, needed_by = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in RUNTIME_PROVIDED:
            if not requirement.specifier.contains(sdk, prereleases=True):
                problems.append(
                    f"{needed_by} needs {requirement}: newer than the runtime SDK the project supports ({sdk})"
                )
            continue
        dist = available.get(name)
        if dist is None:
            problems.append(f"{needed_by} needs {requirement}, which is not in the layer")
            continue
        if not requirement.specifier.contains(dist.version, prereleases=True):
            problems.append(f"{needed_by} needs {requirement}, the layer has {name} {dist.version}")
        key = (name, frozenset(requirement.extras))
        if key in visited:
            continue
        visited.add(key)
        reached.add(name)
        extras = {"", *requirement.extras}
        for line in dist.requires:
            child = Requirement(line)
            applies = child.marker is None or any(
                child.marker.evaluate({**markers, "extra": extra}) for extra in extras
            )
            if applies:
                pending.append((child, name))
    for name in sorted(set(installed) - reached - RUNTIME_PROVIDED - FORBIDDEN):
        problems.append(f"{name} is in the layer but nothing needs it: drop its pin")
    for requirement in shadowed_by_runtime:
        if requirement.marker is not None and not requirement.marker.evaluate({**markers, "extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        dist = installed.get(name)
        if dist is not None and not requirement.specifier.contains(dist.version, prereleases=True):
            problems.append(
                f"the layer's {name} {dist.version} would shadow the runtime's and break botocore ({requirement})"
            )
    return problems


def pip_command(target: Path, architecture: Architecture, requirements_file: Path = LAYER_REQUIREMENTS) -> list[str]:
    """The pip invocation that installs the pinned wheels for the Lambda runtime into `target`."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-compile",  # .pyc files for this machine's Python would be useless on 3.12
        "--only-binary=:all:",
        "--platform",
        f"manylinux2014_{PIP_MACHINES[architecture]}",
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--target",
        str(target),
        "--requirement",
        str(requirements_file),
    ]


def copy_library(destination: Path, source: Path = LIBRARY_DIR) -> None:
    """Install the `citewise` package itself: pure Python, copied as is (no caches, no `NOT_IN_LAYER`)."""

    def skipped(directory: str, names: list[str]) -> set[str]:
        found = set(_SKIPPED_FILES(directory, names))
        return found | (NOT_IN_LAYER & set(names)) if Path(directory) == source else found

    shutil.copytree(source, destination / source.name, ignore=skipped, dirs_exist_ok=True)


def sizes(root: Path) -> tuple[int, int]:
    """(unzipped, zipped) size in bytes of the directory as Lambda would receive it."""
    unzipped = 0
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                unzipped += path.stat().st_size
                archive.write(path, path.relative_to(root).as_posix())
    return unzipped, buffer.getbuffer().nbytes


def source_hash(architecture: Architecture) -> str:
    """The base layer's asset hash: the library's files, the pins and the target. Unchanged inputs reuse
    the bundle."""
    digest = hashlib.sha256()
    digest.update(f"{architecture}/{PYTHON_VERSION}\n".encode())
    digest.update(LAYER_REQUIREMENTS.read_bytes())
    for path in sorted(LIBRARY_DIR.rglob("*")):
        in_layer = path.relative_to(LIBRARY_DIR).as_posix() not in NOT_IN_LAYER
        if in_layer and path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            digest.update(path.relative_to(LIBRARY_DIR).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def web_source_hash(architecture: Architecture) -> str:
    """The web layer's asset hash: its pins, the base layer's pins it is checked over, and the target (the
    library is not in it: editing citewise rebuilds only the base layer)."""
    digest = hashlib.sha256()
    digest.update(f"web/{architecture}/{PYTHON_VERSION}\n".encode())
    digest.update(WEB_LAYER_REQUIREMENTS.read_bytes())
    digest.update(LAYER_REQUIREMENTS.read_bytes())
    return digest.hexdigest()


Runner = Callable[[list[str]], None]


def _run(command: list[str]) -> None:
    subprocess.run(command, check=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})  # noqa: S603


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@jsii.implements(ILocalBundling)
class LocalLayerBundling:
    """CDK local bundling of a layer (`BundlingOptions(local=...)`): pip on this machine, no Docker.

    `web=False` builds the base layer; `web=True` the web layer, which is checked over a base layer built
    beside it in a temporary folder (its packages' metadata and its size are what the check needs).
    """

    def __init__(
        self,
        architecture: Architecture,
        *,
        web: bool = False,
        runner: Runner = _run,
        report: Callable[[str], None] | None = None,
    ):
        self._architecture = architecture
        self._web = web
        self._runner = runner
        self._report = report or (lambda line: print(line, file=sys.stderr))

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_options: Any) -> bool:
        """Build the layer into `output_dir/python`; raises (failing the synth) if it is unfit."""
        output = Path(output_dir)
        if not self._web:
            self._build_base(output)
            unzipped, zipped = sizes(output)
            self._check_size(unzipped, "the Lambda layer is")
            self._report(f"citewise layer ({self._target()}): {_mib(unzipped)} unzipped, {_mib(zipped)} zipped")
            return True
        with tempfile.TemporaryDirectory(prefix="citewise-base-layer-") as base:
            beneath = self._build_base(Path(base))
            base_unzipped, _ = sizes(Path(base))
        site = self._install(output, WEB_LAYER_REQUIREMENTS)
        problems = check_layer(
            installed_distributions(site),
            web_requirements(),
            markers=lambda_markers(self._architecture),
            sdk=sdk_floor(root_requirements()),
            shadowed_by_runtime=botocore_requirements(),
            beneath=beneath,
        )
        if problems:
            raise RuntimeError("the Lambda web layer is unfit:\n  " + "\n  ".join(problems))
        unzipped, zipped = sizes(output)
        self._check_size(base_unzipped + unzipped, "the base and web layers are together")
        self._report(
            f"citewise web layer ({self._target()}): {_mib(unzipped)} unzipped, {_mib(zipped)} zipped; "
            f"{_mib(base_unzipped + unzipped)} unzipped with the base layer"
        )
        return True

    def _target(self) -> str:
        return f"{self._architecture}, Python {PYTHON_VERSION}"

    def _install(self, output: Path, requirements_file: Path) -> Path:
        """pip-install the pins of `requirements_file` into `output/python`, which it returns."""
        site = output / "python"
        site.mkdir(parents=True, exist_ok=True)
        self._runner(pip_command(site, self._architecture, requirements_file))
        # Console scripts for this machine's Python (dotenv, normalizer, dateparser-download): nothing in
        # Lambda runs them.
        shutil.rmtree(site / "bin", ignore_errors=True)
        return site

    def _build_base(self, output: Path) -> dict[str, Installed]:
        """The base layer into `output/python`, checked; its distributions (what the web layer sits on)."""
        site = self._install(output, LAYER_REQUIREMENTS)
        copy_library(site)
        roots = root_requirements()
        installed = installed_distributions(site)
        problems = check_layer(
            installed,
            roots,
            markers=lambda_markers(self._architecture),
            sdk=sdk_floor(roots),
            shadowed_by_runtime=botocore_requirements(),
        )
        if problems:
            raise RuntimeError("the Lambda layer is unfit:\n  " + "\n  ".join(problems))
        return installed

    @staticmethod
    def _check_size(unzipped: int, what: str) -> None:
        if unzipped > MAX_UNZIPPED_BYTES:
            raise RuntimeError(f"{what} {_mib(unzipped)} unzipped, over the budget of {_mib(MAX_UNZIPPED_BYTES)}")
