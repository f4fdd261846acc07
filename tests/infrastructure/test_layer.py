"""The layer's pins, its dependency check and its local bundling, without downloading anything: pip is
replaced by a runner that installs metadata copied from this environment's identical packages."""

from __future__ import annotations

import ast
import sys
from importlib import metadata
from pathlib import Path

import pytest
from aws_cdk import DockerImage
from citewise_infra import layer
from citewise_infra.constants import LIBRARY_DIR
from citewise_infra.layer import (
    FORBIDDEN,
    NOT_IN_LAYER,
    RUNTIME_PROVIDED,
    Installed,
    LocalLayerBundling,
    botocore_requirements,
    check_layer,
    copy_library,
    installed_distributions,
    lambda_markers,
    pinned,
    pip_command,
    root_requirements,
    sdk_floor,
)
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

MARKERS = lambda_markers("arm64")
# Where the local platform's modules lived in the library before they moved to `citewise_local`.
MOVED_TO_LOCAL = (
    "cli.py",
    "render.py",
    "localserver.py",
    "lambdaenv.py",
    "localauth.py",
    "localfiles.py",
    "evaluation.py",
    "index/local.py",
    "registry/local.py",
    "blobstore/local.py",
    "embeddings/minilm.py",
)
# What only the local platform uses: the layer's modules import none of these.
LOCAL_ONLY_IMPORTS = frozenset({"citewise_local", "sqlite3", "http.server", "argparse", "numpy"})
SDK = Version("1.35")


def dist(version: str, *requires: str) -> Installed:
    return Installed(Version(version), requires)


def real_installed() -> dict[str, Installed]:
    """The pinned packages with the requirements their real metadata declares (from this environment)."""
    return {name: Installed(version, tuple(metadata.requires(name) or ())) for name, version in pinned().items()}


def test_the_pins_satisfy_pyproject_and_leave_out_the_runtime_and_local_packages() -> None:
    pins = pinned()
    for requirement in root_requirements():
        name = canonicalize_name(requirement.name)
        if name in RUNTIME_PROVIDED:
            assert name not in pins
            continue
        assert name in pins and requirement.specifier.contains(pins[name]), requirement
    assert not (set(pins) & (RUNTIME_PROVIDED | FORBIDDEN))
    assert pins[canonicalize_name("opensearch-py")] < Version("3")  # 3.x pulls grpcio


def test_the_pins_are_closed_under_their_own_requirements() -> None:
    # The same check the bundling runs on the real install, over the metadata of the pinned packages
    roots = root_requirements()
    problems = check_layer(
        real_installed(), roots, markers=MARKERS, sdk=sdk_floor(roots), shadowed_by_runtime=botocore_requirements()
    )
    assert problems == []


def test_the_sdk_floor_is_pyprojects_oldest_boto3() -> None:
    assert sdk_floor([Requirement("pydantic>=2"), Requirement("boto3>=1.35")]) == Version("1.35")
    with pytest.raises(ValueError, match="oldest boto3"):
        sdk_floor([Requirement("pydantic>=2")])


def test_a_missing_or_wrong_version_requirement_is_reported() -> None:
    installed = {"a": dist("1.0", "b>=2", "c"), "b": dist("1.5")}
    problems = check_layer(installed, [Requirement("a")], markers=MARKERS, sdk=SDK)
    assert set(problems) == {"a needs b>=2, the layer has b 1.5", "a needs c, which is not in the layer"}


def test_extras_are_followed_and_markers_evaluated_for_lambda() -> None:
    installed = {
        "powertools": dist(
            "3.0", 'xray>=2; extra == "tracer"', 'pywin; sys_platform == "win32"', 'old; python_version < "3.9"'
        ),
        "xray": dist("2.1"),
    }
    assert check_layer(installed, [Requirement("powertools[tracer]")], markers=MARKERS, sdk=SDK) == []
    # without the extra, xray is a pin nothing needs
    assert check_layer(installed, [Requirement("powertools")], markers=MARKERS, sdk=SDK) == [
        "xray is in the layer but nothing needs it: drop its pin"
    ]


def test_runtime_provided_and_forbidden_packages_are_refused() -> None:
    installed = {"a": dist("1.0", "botocore>=1.11", "numpy"), "botocore": dist("1.40"), "numpy": dist("2.0")}
    problems = check_layer(installed, [Requirement("a")], markers=MARKERS, sdk=SDK)
    assert "botocore is provided by the Lambda runtime and must not be in the layer" in problems
    assert "numpy must not be in the layer (local-only or too heavy)" in problems


def test_a_package_needing_a_newer_sdk_than_the_project_promises_is_a_conflict() -> None:
    installed = {"a": dist("1.0", "boto3>=1.40")}
    assert check_layer(installed, [Requirement("a")], markers=MARKERS, sdk=SDK) == [
        "a needs boto3>=1.40: newer than the runtime SDK the project supports (1.35)"
    ]


def test_a_shadowed_package_that_would_break_the_runtimes_botocore_is_refused() -> None:
    # opensearch-py 3 era: python-dateutil 4 and urllib3 3 would shadow what botocore needs
    installed = {"a": dist("1.0", "python-dateutil", "urllib3"), "python-dateutil": dist("4.0"), "urllib3": dist("2.8")}
    problems = check_layer(
        installed,
        [Requirement("a")],
        markers=MARKERS,
        sdk=SDK,
        shadowed_by_runtime=[Requirement("python-dateutil<3.0.0,>=2.1"), Requirement("urllib3!=2.2.0,<3,>=1.25.4")],
    )
    assert problems == [
        "the layer's python-dateutil 4.0 would shadow the runtime's and break botocore (python-dateutil<3.0.0,>=2.1)"
    ]


def test_pip_installs_the_pins_for_the_lambda_platform_without_building_anything(tmp_path: Path) -> None:
    command = pip_command(tmp_path / "python", "arm64")
    joined = " ".join(command)
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    for flag in (
        "--platform manylinux2014_aarch64",
        "--only-binary=:all:",
        "--python-version 3.12",
        "--implementation cp",
        "--no-deps",
        f"--target {tmp_path / 'python'}",
    ):
        assert flag in joined
    assert "--platform manylinux2014_x86_64" in " ".join(pip_command(tmp_path, "x86_64"))


def test_the_library_is_copied_without_caches(tmp_path: Path) -> None:
    source = tmp_path / "src" / "citewise"
    (source / "__pycache__").mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"0")
    copy_library(tmp_path / "out", source)
    assert sorted(p.name for p in (tmp_path / "out" / "citewise").rglob("*")) == ["__init__.py"]


def test_the_api_client_is_left_out_of_the_layer_and_of_its_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a library with the client at its root and a module of the same name further down
    source = tmp_path / "src" / "citewise"
    (source / "sub").mkdir(parents=True)
    for name in ("__init__.py", "client.py", "sub/client.py"):
        (source / name).write_text("")
    # When it is copied into the layer
    copy_library(tmp_path / "out", source)
    # Then only the root's client is left out
    copied = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.py"))
    assert copied == ["citewise/__init__.py", "citewise/sub/client.py"]
    # And the client is not part of the layer's asset hash: editing it rebuilds no layer, editing the rest does
    assert NOT_IN_LAYER == {"client.py"} and (LIBRARY_DIR / "client.py").is_file()
    monkeypatch.setattr(layer, "LIBRARY_DIR", source)
    before = layer.source_hash("arm64")
    (source / "client.py").write_text("changed = True\n")
    assert layer.source_hash("arm64") == before
    (source / "sub" / "client.py").write_text("changed = True\n")
    assert layer.source_hash("arm64") != before


class FakePip:
    """Installs the pinned packages' real metadata (and a file per package) instead of downloading."""

    def __init__(self, drop: str | None = None) -> None:
        self.commands: list[list[str]] = []
        self._drop = drop

    def __call__(self, command: list[str]) -> None:
        self.commands.append(command)
        target = Path(command[command.index("--target") + 1])
        for name, version in pinned().items():
            if name == self._drop:
                continue
            info = target / f"{name.replace('-', '_')}-{version}.dist-info"
            info.mkdir(parents=True)
            requires = "".join(f"Requires-Dist: {line}\n" for line in metadata.requires(name) or ())
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}")
            (target / f"{name.replace('-', '_')}.py").write_text("x = 1\n" * 100)
        (target / "bin").mkdir(exist_ok=True)
        (target / "bin" / "normalizer").write_text("#!/usr/bin/python3\n")


def test_local_bundling_installs_copies_checks_and_reports_the_size(tmp_path: Path) -> None:
    pip, lines = FakePip(), []
    bundling = LocalLayerBundling("arm64", runner=pip, report=lines.append)
    assert bundling.try_bundle(str(tmp_path), image=DockerImage.from_registry("unused")) is True
    site = tmp_path / "python"
    assert "--platform" in pip.commands[0]
    assert (site / "citewise" / "runtime" / "bootstrap.py").is_file()
    assert (site / "citewise" / "api" / "routes.py").is_file()
    assert not (site / "bin").exists()
    assert set(installed_distributions(site)) == set(pinned())
    (line,) = lines
    assert line.startswith("citewise layer (arm64, Python 3.12): ") and "MiB unzipped" in line and "MiB zipped" in line


def test_local_bundling_fails_the_synth_on_an_unfit_layer(tmp_path: Path) -> None:
    bundling = LocalLayerBundling("arm64", runner=FakePip(drop="certifi"), report=lambda _: None)
    with pytest.raises(RuntimeError, match="requests needs certifi"):
        bundling.try_bundle(str(tmp_path), image=DockerImage.from_registry("unused"))


def test_the_bundled_layer_holds_the_library_and_nothing_of_the_local_platform(tmp_path: Path) -> None:
    # Given the layer bundled as `make synth` bundles it
    bundling = LocalLayerBundling("arm64", runner=FakePip(), report=lambda _: None)
    assert bundling.try_bundle(str(tmp_path), image=DockerImage.from_registry("unused")) is True
    site = tmp_path / "python"
    # When its files are listed
    files = {path.relative_to(site).as_posix() for path in site.rglob("*") if path.is_file()}
    # Then the library is there, and neither the moved modules nor the local package are
    assert {"citewise/runtime/services.py", "citewise/api/handler.py", "citewise/runtime/ingest_handler.py"} <= files
    assert "citewise/client.py" not in files  # the API's HTTP client: for its users, not for Lambda
    assert files.isdisjoint(f"citewise/{module}" for module in MOVED_TO_LOCAL)
    assert not [name for name in files if name.split("/", 1)[0].startswith("citewise_local")]
    # And no bundled module imports local-only code, even inside a function
    imported: dict[str, set[str]] = {}
    for path in (site / "citewise").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                imported.setdefault(name, set()).add(path.relative_to(site).as_posix())
    leaks = {
        name: users
        for name, users in imported.items()
        if any(name == local or name.startswith(f"{local}.") for local in LOCAL_ONLY_IMPORTS)
    }
    assert leaks == {}
