"""The real OpenSearch node that the `opensearch`-marked tests run on.

`make test` starts one node for the whole run (`scripts/opensearch/opensearch.sh run -- pytest ...`) and passes its
URL in `CITEWISE_OPENSEARCH_URL`, so every pytest-xdist worker shares it. Without that variable (a
single test file run by hand) the first test that needs the node starts one with the same script, and
the session stops it at its end. Tests never share an index: each creates its own under a random name
(`fresh_index_name`) and deletes it afterwards, so workers and tests cannot see each other's chunks.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from opensearchpy import OpenSearch

URL_VARIABLE = "CITEWISE_OPENSEARCH_URL"
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "opensearch" / "opensearch.sh"


class Node:
    """One node per test process: the one given in `CITEWISE_OPENSEARCH_URL`, or one started on first use.

    The variable is read when this module is imported, before the autouse fixture that hides the
    developer's `CITEWISE_*` variables from the tests runs.
    """

    def __init__(self, given: str | None) -> None:
        self.url = given
        self.started_in = 0.0  # seconds the node took to start, when this process started it
        self._run_dir: Path | None = None

    def ensure(self) -> str:
        """The node's URL, starting a node now if none was given and none is running."""
        if self.url is None:
            self._run_dir = Path(tempfile.mkdtemp(prefix="citewise-opensearch-"))
            began = time.monotonic()
            started = subprocess.run(
                ["bash", str(SCRIPT), "start", str(self._run_dir)], capture_output=True, text=True, check=False
            )
            if started.returncode != 0:
                raise RuntimeError(f"the OpenSearch node did not start:\n{started.stderr[-4000:]}")
            self.url = started.stdout.strip().splitlines()[-1]
            self.started_in = time.monotonic() - began
        return self.url

    def stop(self) -> None:
        """Stop the node this process started (never one it was given)."""
        if self._run_dir is not None:
            subprocess.run(["bash", str(SCRIPT), "stop", str(self._run_dir)], check=False, capture_output=True)
            self._run_dir = None
            self.url = None

    def client(self) -> OpenSearch:
        return OpenSearch(hosts=[self.ensure()], timeout=60)

    def versions(self) -> str:
        """'OpenSearch X, k-NN Y' as the node reports them."""
        client = self.client()
        try:
            engine = client.info()["version"]["number"]
            plugins = {p["component"]: p["version"] for p in client.cat.plugins(format="json")}
        finally:
            client.close()
        return f"OpenSearch {engine}, k-NN {plugins.get('opensearch-knn', 'absent')}"


NODE = Node(os.environ.get(URL_VARIABLE))


def fresh_index_name() -> str:
    """An index name no other test, worker or run uses."""
    return f"citewise-test-{uuid.uuid4().hex[:12]}"
