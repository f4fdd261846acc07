"""The console's sources against what ships: its own unit tests (vitest) pass, and a fresh build of
console/ gives exactly the files committed in local/citewise_local/console/ (which the wheel, `citewise
serve` and the CDK stack serve). `make console-check` says the same by rebuilding in place; this test builds
into a temporary folder, so a run of the suite never rewrites the committed files.

Needs console/node_modules (`make test` installs it with npm ci).
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "console"
BUILT = ROOT / "local" / "citewise_local" / "console"


def npm(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("npm") is None or not (PROJECT / "node_modules").is_dir():
        pytest.fail("console/node_modules is missing: `make test` installs the console's npm project")
    return subprocess.run(
        ["npm", "--prefix", str(PROJECT), "exec", "--no", "--", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def files(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


def test_the_console_unit_tests_pass() -> None:
    run = npm("vitest", "run")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert " passed" in run.stdout


def test_a_fresh_build_gives_the_committed_files(tmp_path: Path) -> None:
    out = tmp_path / "console"
    run = npm("vite", "build", "--outDir", str(out), "--emptyOutDir")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert files(out) == files(BUILT), "the committed console differs from its sources: run `make console`"
    _, mismatch, errors = filecmp.cmpfiles(out, BUILT, sorted(files(out)), shallow=False)
    assert mismatch == [] and errors == [], f"rebuilt files differ: {mismatch or errors} (run `make console`)"
