"""`scripts/opensearch/opensearch.sh`: what the test runs, the evaluation and the benchmarks rely on."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.opensearch_node import SCRIPT


@pytest.mark.opensearch
def test_a_running_node_does_not_hold_the_fetch_lock() -> None:
    # Given a node started by the script (the cache assembled), in a folder of its own under /tmp (the
    # script hands it to the node's user; pytest's tmp_path lies in a folder private to this one)
    run_dir = Path(tempfile.mkdtemp(prefix="citewise-opensearch-"))
    started = subprocess.run(["bash", str(SCRIPT), "start", str(run_dir)], capture_output=True, text=True, check=False)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        # When another process asks for the cache while it runs (as every `start` and `run` does first)
        fetched = subprocess.run(
            ["bash", str(SCRIPT), "fetch"], capture_output=True, text=True, timeout=60, check=False
        )
        # Then it is served at once: the node did not inherit the lock and keep it for its life
        assert fetched.returncode == 0, fetched.stderr[-2000:]
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(run_dir)], capture_output=True, check=False)
        shutil.rmtree(run_dir, ignore_errors=True)
