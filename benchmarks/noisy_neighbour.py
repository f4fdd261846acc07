"""Noisy neighbour on `citewise serve`: tenant A sends a bounded burst far over its query rate while
tenant B asks questions as usual. What B sees with A bursting, against what it sees alone.

`measure` is the scenario (the end-to-end test `tests/e2e/test_noisy_neighbour.py` runs it against the
test session's server and asserts on it); `run` starts a server of its own on a fresh home (hashing
embedder), uploads one document for each tenant, gives A a quota of 60 searches a minute with a burst of
10 and runs `measure` `repeats` times. B asks `b_requests` questions (POST /v1/query) one after another,
first alone, then while `a_processes` processes of A send `a_requests` searches back to back (a bounded
burst: A's rate is 1 a second, its burst about 100 a second). The figures: B's median and p95 alone and
under the burst, their ratios, and how A's requests ended (admitted, refused with 429 QUOTA_EXCEEDED,
anything else).
`python -m benchmarks.noisy_neighbour` runs it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from citewise.client import CitewiseClient

QUESTION = {"query": "How often are the signing keys rotated?"}
A_QUOTAS = {"queries_per_minute": 60, "query_burst": 10}
RUNBOOK = b"# Key rotation\n\nRotate the signing keys every 90 days with `cdk deploy`. The old key stays valid.\n"


def ask(base_url: str, token: str, route: str) -> tuple[int, float, dict[str, Any]]:
    """One POST of the question to `route` (/v1/query or /v1/search): (status, seconds, error body or {})."""
    request = urllib.request.Request(  # noqa: S310 - the server under test
        f"{base_url}{route}",
        data=json.dumps(QUESTION).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            response.read()
            return response.status, time.perf_counter() - started, {}
    except urllib.error.HTTPError as error:
        body = json.loads(error.read() or b"{}")
        return error.code, time.perf_counter() - started, body


def p95(values: list[float]) -> float:
    """The 95th percentile (inclusive method: 19 cut points, the last)."""
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def burst(base_url: str, token: str, count: int) -> Counter[str]:
    """`count` searches of A back to back: how they ended (admitted, refused with QUOTA_EXCEEDED, other)."""
    outcomes: Counter[str] = Counter()
    for _ in range(count):
        status, _, body = ask(base_url, token, "/v1/search")
        code = body.get("error", {}).get("code") if status != 200 else None
        outcomes["admitted" if status == 200 else "refused" if code == "QUOTA_EXCEEDED" else str(status)] += 1
    return outcomes


def measure(
    base_url: str, token_a: str, token_b: str, *, b_requests: int = 40, a_requests: int = 240, a_processes: int = 4
) -> dict[str, Any]:
    """B alone, then B under A's burst (module docstring). Latencies in milliseconds.

    A's burst runs in processes of its own, so B's client never waits for the interpreter lock of A's
    (what B measures is the server). A first warm-up round, untimed, has the server start the execution
    environments A's parallel requests need (a cold start each, as on Lambda), which would otherwise be
    measured as the neighbour's noise once and never again."""
    with ProcessPoolExecutor(a_processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        warming = [pool.submit(burst, base_url, token_a, 5) for _ in range(a_processes)]
        warm = [ask(base_url, token_b, "/v1/query") for _ in range(5)]
        for future in warming:
            future.result()
        alone = [ask(base_url, token_b, "/v1/query") for _ in range(b_requests)]
        bursting = [pool.submit(burst, base_url, token_a, a_requests // a_processes) for _ in range(a_processes)]
        contended = [ask(base_url, token_b, "/v1/query") for _ in range(b_requests)]
        outcomes = sum((future.result() for future in bursting), Counter[str]())
    ms = {
        "alone": [seconds * 1000 for _, seconds, _ in alone],
        "contended": [seconds * 1000 for _, seconds, _ in contended],
    }
    return {
        "b_requests": b_requests,
        "b_failed": sum(status != 200 for status, _, _ in warm + alone + contended),
        "b_alone_p50_ms": round(statistics.median(ms["alone"]), 2),
        "b_alone_p95_ms": round(p95(ms["alone"]), 2),
        "b_contended_p50_ms": round(statistics.median(ms["contended"]), 2),
        "b_contended_p95_ms": round(p95(ms["contended"]), 2),
        "p50_ratio": round(statistics.median(ms["contended"]) / statistics.median(ms["alone"]), 2),
        "p95_ratio": round(p95(ms["contended"]) / p95(ms["alone"]), 2),
        "a_sent": sum(outcomes.values()),
        "a_admitted": outcomes["admitted"],
        "a_refused": outcomes["refused"],
        "a_other": {key: value for key, value in outcomes.items() if key not in ("admitted", "refused")},
    }


def _citewise(*arguments: str, env: dict[str, str]) -> str:
    script = Path(sys.executable).with_name("citewise")
    done = subprocess.run([str(script), *arguments], env=env, capture_output=True, text=True, check=True)  # noqa: S603
    return done.stdout.strip()


def run(repeats: int = 3) -> list[dict[str, Any]]:
    """Start a server on a fresh home, set the tenants up, and measure `repeats` times."""
    with tempfile.TemporaryDirectory() as root:
        home = Path(root) / "home"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CITEWISE_")}
        env |= {"CITEWISE_HOME": str(home), "CITEWISE_EMBEDDER": "hashing"}
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        base_url = f"http://127.0.0.1:{port}"
        script = Path(sys.executable).with_name("citewise")
        with (Path(root) / "serve.log").open("wb") as log:
            server = subprocess.Popen([str(script), "serve", "--port", str(port)], env=env, stdout=log, stderr=log)  # noqa: S603
        try:
            _wait_healthy(base_url)
            tokens = {
                t: _citewise("token", "--tenant", t, "--user", "bench", env=env) for t in ("tenant-a", "tenant-b")
            }
            operator = _citewise("token", "--operator", "--user", "ops", env=env)
            document = Path(root) / "keys.md"
            document.write_bytes(RUNBOOK)
            for token in tokens.values():
                CitewiseClient(base_url, token).upload_and_wait(document, timeout=120)
            request = urllib.request.Request(  # noqa: S310
                f"{base_url}/v1/admin/tenants/tenant-a/quotas",
                data=json.dumps(A_QUOTAS).encode(),
                method="PUT",
                headers={"Authorization": f"Bearer {operator}", "Content-Type": "application/json"},
            )
            urllib.request.urlopen(request, timeout=30).read()  # noqa: S310
            results = []
            for _ in range(repeats):
                results.append(measure(base_url, tokens["tenant-a"], tokens["tenant-b"]))
                time.sleep(12)  # A's bucket refills between repeats (10 tokens at 1 a second)
            return results
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def _wait_healthy(base_url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/v1/health", timeout=5) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("citewise serve did not answer /v1/health within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="measurements on one server (default 3)")
    print(json.dumps(run(parser.parse_args().repeats), indent=2))


if __name__ == "__main__":
    main()
