"""The layer's pins, its dependency check and its local bundling, without downloading anything: pip is
replaced by a runner that installs metadata copied from this environment's identical packages."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from aws_cdk import DockerImage
from citewise_infra import layer
from citewise_infra.constants import LAYER_REQUIREMENTS, LIBRARY_DIR, PYPROJECT, WEB_LAYER_REQUIREMENTS
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
    sizes,
    source_hash,
    web_requirements,
    web_source_hash,
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


def real_installed(requirements_file: Path = LAYER_REQUIREMENTS) -> dict[str, Installed]:
    """The pinned packages with the requirements their real metadata declares (from this environment)."""
    return {
        name: Installed(version, tuple(metadata.requires(name) or ()))
        for name, version in pinned(requirements_file).items()
    }


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


def test_page_extraction_is_the_web_extra_not_a_runtime_dependency_and_local_mode_has_it() -> None:
    base = {canonicalize_name(requirement.name) for requirement in root_requirements()}
    web = {canonicalize_name(requirement.name) for requirement in web_requirements()}
    assert web == {"trafilatura", "lxml-html-clean"}
    assert not base & web
    # `make demo` and `make test` install the local extra: local mode extracts pages too
    extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    local = [Requirement(line) for line in extras["local"]]
    assert any(req.name == "citewise" and req.extras == {"web"} for req in local)


def test_the_web_pins_satisfy_the_web_extra_and_repeat_no_base_pin() -> None:
    base, web = pinned(), pinned(WEB_LAYER_REQUIREMENTS)
    for requirement in web_requirements():
        name = canonicalize_name(requirement.name)
        assert name in web and requirement.specifier.contains(web[name]), requirement
    assert not set(base) & set(web)
    assert not set(web) & (RUNTIME_PROVIDED | FORBIDDEN)


def test_the_web_pins_are_closed_over_the_base_layer() -> None:
    # The same check the web layer's bundling runs, over the metadata of the pinned packages of both files
    problems = check_layer(
        real_installed(WEB_LAYER_REQUIREMENTS),
        web_requirements(),
        markers=MARKERS,
        sdk=sdk_floor(root_requirements()),
        shadowed_by_runtime=botocore_requirements(),
        beneath=real_installed(),
    )
    assert problems == []
    # and the web layer needs the base one: its packages alone leave requirements unmet
    alone = check_layer(real_installed(WEB_LAYER_REQUIREMENTS), web_requirements(), markers=MARKERS, sdk=SDK)
    assert "trafilatura needs certifi, which is not in the layer" in alone


def test_a_layer_on_top_of_another_counts_its_packages_but_may_not_repeat_them() -> None:
    base = {"requests": dist("2.34", "urllib3>=2"), "urllib3": dist("2.8"), "six": dist("1.17")}
    web = {"extractor": dist("1.0", "requests>=2", "lxml"), "lxml": dist("6.1")}
    # requirements met below count; the base layer's unused packages are its own check's business
    assert check_layer(web, [Requirement("extractor")], markers=MARKERS, sdk=SDK, beneath=base) == []
    # a version below that does not fit is reported as any other
    old = {**base, "requests": dist("1.0")}
    assert check_layer(web, [Requirement("extractor")], markers=MARKERS, sdk=SDK, beneath=old) == [
        "extractor needs requests>=2, the layer has requests 1.0"
    ]
    # a package in both layers, and one in this layer that nothing needs, are refused
    repeated = {**web, "urllib3": dist("2.8"), "babel": dist("2.19")}
    assert check_layer(repeated, [Requirement("extractor")], markers=MARKERS, sdk=SDK, beneath=base) == [
        "urllib3 is in the base layer already: drop its pin here",
        "babel is in the layer but nothing needs it: drop its pin",
    ]


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
        for name, version in pinned(Path(command[command.index("--requirement") + 1])).items():
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


def _bundle(tmp_path: Path, name: str, *, web: bool, pip: FakePip | None = None) -> tuple[Path, list[str]]:
    lines: list[str] = []
    bundling = LocalLayerBundling("arm64", web=web, runner=pip or FakePip(), report=lines.append)
    assert bundling.try_bundle(str(tmp_path / name), image=DockerImage.from_registry("unused")) is True
    return tmp_path / name, lines


def test_the_web_layer_holds_only_the_web_pins_checked_over_a_base_layer_built_beside_it(tmp_path: Path) -> None:
    # Given the web layer bundled as `make synth` would bundle it
    pip = FakePip()
    output, lines = _bundle(tmp_path, "web", web=True, pip=pip)
    # Then pip installed the base pins (for the check) and then the web pins, for the Lambda platform
    files = [Path(command[command.index("--requirement") + 1]) for command in pip.commands]
    assert files == [LAYER_REQUIREMENTS, WEB_LAYER_REQUIREMENTS]
    assert all("--platform" in command for command in pip.commands)
    # And the layer has the web pins only: no base package, no library, no console scripts
    site = output / "python"
    assert set(installed_distributions(site)) == set(pinned(WEB_LAYER_REQUIREMENTS))
    assert not (site / "citewise").exists() and not (site / "bin").exists()
    # And the report gives its size and the size with the base layer
    (line,) = lines
    assert line.startswith("citewise web layer (arm64, Python 3.12): ") and line.endswith(
        "MiB unzipped with the base layer"
    )


def test_the_web_layer_fails_the_synth_when_the_base_layer_does_not_meet_its_requirements(tmp_path: Path) -> None:
    # certifi is the base layer's (requests needs it) and trafilatura's: dropping it fails the base check first
    with pytest.raises(RuntimeError, match="(?s)the Lambda layer is unfit:.*needs certifi"):
        _bundle(tmp_path, "web", web=True, pip=FakePip(drop="certifi"))
    with pytest.raises(RuntimeError, match="the Lambda web layer is unfit:\n  dateparser needs regex"):
        _bundle(tmp_path, "web2", web=True, pip=FakePip(drop="regex"))


def test_the_size_budget_is_on_the_base_and_web_layers_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a budget that each layer fits alone but not both together
    base_bytes = sizes(_bundle(tmp_path, "base", web=False)[0])[0]
    web_bytes = sizes(_bundle(tmp_path, "web", web=True)[0])[0]
    monkeypatch.setattr(layer, "MAX_UNZIPPED_BYTES", base_bytes + web_bytes - 1)
    assert max(base_bytes, web_bytes) < layer.MAX_UNZIPPED_BYTES
    _bundle(tmp_path, "base-again", web=False)
    # Then the web layer, which a function carries on top of the base one, is refused
    with pytest.raises(RuntimeError, match="the base and web layers are together .* MiB unzipped, over the budget"):
        _bundle(tmp_path, "web-again", web=True)


def test_the_web_layer_is_rebuilt_for_its_pins_and_the_base_pins_not_for_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_pins, web_pins = tmp_path / "requirements.txt", tmp_path / "web-requirements.txt"
    base_pins.write_text(LAYER_REQUIREMENTS.read_text())
    web_pins.write_text(WEB_LAYER_REQUIREMENTS.read_text())
    monkeypatch.setattr(layer, "LAYER_REQUIREMENTS", base_pins)
    monkeypatch.setattr(layer, "WEB_LAYER_REQUIREMENTS", web_pins)
    source = tmp_path / "citewise"
    source.mkdir()
    (source / "__init__.py").write_text("")
    monkeypatch.setattr(layer, "LIBRARY_DIR", source)
    hashes = [web_source_hash("arm64")]
    (source / "__init__.py").write_text("changed = True\n")
    assert web_source_hash("arm64") == hashes[0]  # the library is the base layer's
    for pins in (web_pins, base_pins):
        pins.write_text(pins.read_text() + "six==1.17.0\n")
        hashes.append(web_source_hash("arm64"))
    hashes.append(web_source_hash("x86_64"))
    assert len(set(hashes)) == 4 and source_hash("arm64") not in hashes
