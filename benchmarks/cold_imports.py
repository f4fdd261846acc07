"""Cold init of each Lambda handler in a fresh process, against bare boto3.

A handler's figure is what its Lambda's init phase pays. A fresh `python -I` loads
`functions/<name>/handler.py` by file path (`spec_from_file_location`, as the runtime imports `handler`).
That imports the library and Powertools, validates the settings, wires the services with
`citewise.runtime.services.build_services` (each adapter is built on a request's first use, not at init: a
client a function never needs is never built) and sets up the Powertools stack. The process gets a
deployed function's environment on the AWS backend and nothing else (`lambda_environment`): fake
credentials, no AWS config files, instance metadata disabled. Init contacts nothing; an untimed probe of
each target checks that with an audit hook. So the figure is import + settings + wiring, with no
network time in it.

Tracing is on, as on Lambda. Powertools' Tracer disables itself unless LAMBDA_TASK_ROOT is set and
POWERTOOLS_TRACE_DISABLED is not true, so both are set, and X-Ray patches the libraries the functions
use (botocore, http.client) at init, as on Lambda.

Four figures per handler, each from its own fresh interpreter in every round:
- the whole process's wall time;
- init: the process's own clock around loading the module (no interpreter start-up or exit);
- the sum of `python -X importtime`'s self times: the import part of init;
- construct: init again, in a process that first imported every module the probe saw the handler load,
  which leaves the part of init that is not imports (settings, botocore's JSON models, the resolver).
The first three are compared with the same figure for a process that only imports boto3, which every
Python Lambda that uses the SDK pays for anyway; the ratio is the handler's cost in units of that.
Rounds run the processes back to back in a rotating order, so the ratios pair runs made under the same
load. The probes run first, untimed, and leave byte-code caches warm, as in a layer that ships them.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from importlib import metadata

from benchmarks.common import REPO, Section, log, ratios, run_command, timed
from benchmarks.layer_size import _name, layer_requirements

FUNCTIONS = REPO / "functions"
BASELINE = "boto3"
INTERPRETER = "interpreter"
HANDLERS = ("query", "documents", "mcp", "ingest", "bootstrap")
# The functions whose settings are `ApiSettings`; the stack gives them the identity settings too.
API_HANDLERS = frozenset({"query", "documents", "mcp"})
# Heavy or notable modules whose presence after init is worth knowing. numpy must not be among them on
# Lambda: the layer does not ship it. httpx, PIL, fontTools and cryptography are not in the layer either,
# but they are in the local venv, and X-Ray or pypdf import them there when they are installed.
WATCHED = (
    "numpy",
    "boto3",
    "botocore",
    "pydantic",
    "pypdf",
    "pypdfium2",
    "opensearchpy",
    "requests",
    "aws_xray_sdk",
    "httpx",
    "PIL",
    "fontTools",
    "cryptography",
)
# Audit events that would mean init reaches for the network. Creating or binding a socket does not:
# urllib3 binds one to ::1 at import to detect IPv6, and X-Ray's emitter creates its UDP socket.
CONTACT_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "urllib.Request",
    }
)
# Init takes about a second under load. A process still running after this long is waiting on something.
TIMEOUT_S = 120


def lambda_environment(name: str) -> dict[str, str]:
    """The environment of deployed function `name` on the AWS backend, or the baselines' shared part.

    Nothing is inherited except PATH, so a developer's CITEWISE_* or AWS_PROFILE cannot leak in. The
    credentials are fake and never used: nothing is called.
    """
    environment = {
        "PATH": os.environ.get("PATH", os.defpath),
        "CITEWISE_BACKEND": "aws",
        "CITEWISE_OPENSEARCH_ENDPOINT": "https://search-example.us-east-1.es.amazonaws.com",
        "CITEWISE_REGISTRY_TABLE": "citewise-bench-registry",
        "CITEWISE_DOCUMENTS_BUCKET": "citewise-bench-documents",
        "CITEWISE_AWS_REGION": "us-east-1",
        "CITEWISE_EMBEDDER": "titan",
        "POWERTOOLS_METRICS_NAMESPACE": "Citewise",
        "POWERTOOLS_TRACE_DISABLED": "false",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",  # noqa: S105 - a fake, as moto's tests use
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        # A Lambda has no ~/.aws files; the developer's must not change what botocore reads.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    if name in HANDLERS:
        # LAMBDA_TASK_ROOT is where the runtime finds handler.py; Powertools and X-Ray take it to mean
        # "in Lambda" (Tracer on; X-Ray also touches /tmp/.aws-xray/initialized).
        environment["LAMBDA_TASK_ROOT"] = str(FUNCTIONS / name)
        environment["POWERTOOLS_SERVICE_NAME"] = f"citewise-{name}"
    if name in ("query", "mcp"):
        environment["CITEWISE_SYNTHESIZER"] = "bedrock"
    if name in API_HANDLERS:
        environment["CITEWISE_AUTH_MODE"] = "cognito"
        environment["CITEWISE_TENANT_CLAIM"] = "custom:tenant_id"
    return environment


def _load(name: str) -> str:
    """The statements whose cost is measured: load a handler module by path, or a baseline's import."""
    if name == BASELINE:
        return "import boto3"
    if name == INTERPRETER:
        return "import sys"
    path = str(FUNCTIONS / name / "handler.py")
    return (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('handler', {path!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert callable(module.lambda_handler)"
    )


def _python(name: str, code: str, *options: str) -> subprocess.CompletedProcess[str]:
    """A fresh `python -I` (no user site, no PYTHON* variables) running `code` in `name`'s environment."""
    command = [sys.executable, "-I", *options, "-c", code]
    try:
        completed = run_command(command, env=lambda_environment(name), timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{name}: still running after {TIMEOUT_S} s; is init waiting on the network?") from exc
    if completed.returncode != 0:
        raise RuntimeError(f"{name} failed: {completed.stderr.strip()[-2000:]}")
    return completed


def process_s(name: str) -> tuple[float, float]:
    """Wall time of the whole fresh process, and init: the process's own clock around `_load(name)`."""
    code = f"import time\n_started = time.perf_counter()\n{_load(name)}\nprint(time.perf_counter() - _started)"
    completed, wall_s = timed(lambda: _python(name, code))
    return wall_s, float(completed.stdout.split()[-1])


def importtime_s(name: str) -> dict[str, float]:
    """`-X importtime`'s self times, in seconds, summed by top-level package (the total is their sum)."""
    completed = _python(name, _load(name), "-X", "importtime")
    by_package: Counter[str] = Counter()
    for line in completed.stderr.splitlines():
        # "import time:       123 |        456 |   package.module"; the header's columns are not numbers.
        fields = line.removeprefix("import time:").split("|")
        if line.startswith("import time:") and len(fields) == 3 and fields[0].strip().isdigit():
            by_package[fields[2].strip().split(".")[0]] += int(fields[0])
    return {package: us / 1e6 for package, us in by_package.items()}


@dataclass(frozen=True)
class Probe:
    """What one untimed load of a target shows: watched packages, socket audit events, every module."""

    loaded: list[str]
    socket_events: dict[str, int]
    modules: list[str]  # importable ones (a spec; not Cython's synthetic modules), in `sys.modules` order


def probe(name: str) -> Probe:
    """Load `name` once with an audit hook; raises if its init reached for the network."""
    code = (
        "import json, sys\nevents = []\n"
        "sys.addaudithook(lambda event, args: events.append(event) if event.startswith(('socket.', 'urllib.'))"
        " else None)\n"
        f"{_load(name)}\n"
        f"print(json.dumps({{'loaded': [m for m in {WATCHED!r} if m in sys.modules], 'events': events,"
        " 'modules': [m for m, module in sys.modules.items() if getattr(module, '__spec__', None)]}))"
    )
    found = json.loads(_python(name, code).stdout.splitlines()[-1])
    events = Counter(str(event) for event in found["events"])
    contacts = sorted(set(events) & CONTACT_EVENTS)
    if contacts:
        raise RuntimeError(f"{name}: init reaches for the network ({', '.join(contacts)}); the figure would time it")
    return Probe(list(found["loaded"]), dict(sorted(events.items())), list(found["modules"]))


def construct_s(name: str, modules: list[str]) -> tuple[float, int]:
    """Init with every module it loads already imported: settings, services, Powertools set-up alone.

    What remains is work that is not an import: validating the settings, botocore reading its JSON
    models and endpoint rules to build each client, the resolver and the decorators (and any import
    that `modules` could not make ahead, counted in the second value).
    """
    code = (
        "import importlib, time\n_missed = 0\n"
        f"for _module in {modules!r}:\n"
        "    try:\n        importlib.import_module(_module)\n"
        "    except Exception:\n        _missed += 1\n"
        f"_started = time.perf_counter()\n{_load(name)}\nprint(time.perf_counter() - _started, _missed)"
    )
    elapsed, missed = _python(name, code).stdout.split()[-2:]
    return float(elapsed), int(missed)


def run(rounds: int = 7) -> Section:
    section = Section(
        "cold_imports", "Cold init per Lambda handler (AWS backend), fresh process, vs bare `import boto3`"
    )
    names = [BASELINE, *HANDLERS, INTERPRETER]
    probes = {name: probe(name) for name in names}  # also warms the byte-code caches; not timed
    walls: dict[str, list[float]] = {name: [] for name in names}
    inits: dict[str, list[float]] = {name: [] for name in names}
    imports: dict[str, list[float]] = {name: [] for name in names}
    packages: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    constructs: dict[str, list[float]] = {name: [] for name in HANDLERS}
    missed: dict[str, int] = dict.fromkeys(HANDLERS, 0)
    for round_number in range(rounds):
        log(f"  cold imports: round {round_number + 1} of {rounds}")
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            wall_s, init_s = process_s(name)
            walls[name].append(wall_s)
            inits[name].append(init_s)
            packages[name].append(importtime_s(name))
            imports[name].append(sum(packages[name][-1].values()))
            if name in constructs:
                construct, not_ahead = construct_s(name, probes[name].modules)
                constructs[name].append(construct)
                missed[name] = max(missed[name], not_ahead)
    section.add(
        "interpreter_wall_ms",
        "bare interpreter (python -c 'import sys'): process wall",
        "ms",
        [w * 1000 for w in walls[INTERPRETER]],
    )
    section.add("boto3_wall_ms", "import boto3: process wall", "ms", [w * 1000 for w in walls[BASELINE]])
    section.add("boto3_init_ms", "import boto3: in-process time", "ms", [t * 1000 for t in inits[BASELINE]])
    section.add("boto3_importtime_ms", "import boto3: -X importtime sum", "ms", [t * 1000 for t in imports[BASELINE]])
    for name in HANDLERS:
        label = f"{name} handler"
        section.add(f"{name}_wall_ms", f"{label}: process wall", "ms", [w * 1000 for w in walls[name]])
        section.add(f"{name}_wall_ratio", f"{name}: process wall / boto3's", "x", ratios(walls[name], walls[BASELINE]))
        section.add(f"{name}_init_ms", f"{label}: init, in-process", "ms", [t * 1000 for t in inits[name]])
        section.add(f"{name}_init_ratio", f"{name}: init / import boto3's", "x", ratios(inits[name], inits[BASELINE]))
        section.add(f"{name}_importtime_ms", f"{label}: -X importtime sum", "ms", [t * 1000 for t in imports[name]])
        section.add(
            f"{name}_importtime_ratio",
            f"{name}: importtime sum / boto3's",
            "x",
            ratios(imports[name], imports[BASELINE]),
        )
        section.add(
            f"{name}_construct_ms",
            f"{label}: init with its modules imported ahead",
            "ms",
            [t * 1000 for t in constructs[name]],
        )
    section.context.update(
        {
            "python": sys.executable,
            "rounds": rounds,
            "handlers": {name: str((FUNCTIONS / name / "handler.py").relative_to(REPO)) for name in HANDLERS},
            "environment": {
                name: {k: v for k, v in lambda_environment(name).items() if k != "PATH"}
                for name in (BASELINE, *HANDLERS)
            },
            "tracing": "on, as on Lambda: LAMBDA_TASK_ROOT set and POWERTOOLS_TRACE_DISABLED=false",
            "loaded": {name: probes[name].loaded for name in (BASELINE, *HANDLERS)},
            "socket_events": {name: probes[name].socket_events for name in (BASELINE, *HANDLERS)},
            "modules_loaded": {name: len(probes[name].modules) for name in (BASELINE, *HANDLERS)},
            "construct_modules_not_imported_ahead": missed,
            "importtime_top_packages_ms": {name: _top(packages[name]) for name in (BASELINE, *HANDLERS)},
            "importtime_not_in_layer_ms": {name: _outside(packages[name]) for name in (BASELINE, *HANDLERS)},
            "note": "local venv interpreter and x86_64 wheels; Lambda runs Python 3.12 on its own CPUs",
        }
    )
    return section


def outside_layer(packages: set[str]) -> list[str]:
    """Those of the top-level `packages` that a deployed function would not have.

    Installed here, their distributions are outside the closure of the layer's requirements (with the
    extras they name) and the runtime's boto3. X-Ray patches httpx, and pypdf uses PIL, fontTools and
    cryptography, whenever they are importable, so the dev venv makes init import more than Lambda's.
    The standard library has no distribution and counts as present; so does citewise, which is in the layer.
    """
    shipped = _closure([*layer_requirements(), "boto3"]) | {"citewise"}
    owners = metadata.packages_distributions()
    return sorted(
        package
        for package in packages
        if owners.get(package) and not any(_name(owner) in shipped for owner in owners[package])
    )


def _closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` need as installed here: their requirements, those of the extras
    they name, and so on (other markers kept)."""
    needed: set[tuple[str, frozenset[str]]] = set()
    frontier = list(requirements)
    while frontier:
        requirement = frontier.pop()
        extras = re.match(r"[^\[;]*\[([^\]]*)\]", requirement)
        key = (_name(requirement), frozenset(e.strip() for e in extras.group(1).split(",")) if extras else frozenset())
        if key in needed:
            continue
        needed.add(key)
        try:
            requires = metadata.requires(key[0]) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", line)
            if extra is None or extra.group(1) in key[1]:
                frontier.append(line)
    return {name for name, _ in needed}


def _top(runs: list[dict[str, float]], count: int = 15) -> dict[str, float]:
    """The packages with the largest median import time over the rounds, in ms."""
    names = {name for run in runs for name in run}
    medians = {name: statistics.median(run.get(name, 0.0) for run in runs) * 1000 for name in names}
    return {name: round(ms, 1) for name, ms in sorted(medians.items(), key=lambda kv: -kv[1])[:count]}


def _outside(runs: list[dict[str, float]]) -> dict[str, float]:
    """Median import time, in ms, of the packages outside the layer (`outside_layer`), and their total."""
    outside = outside_layer({name for run in runs for name in run})
    total = statistics.median(sum(run.get(name, 0.0) for name in outside) for run in runs) * 1000
    return {"total": round(total, 1), **_top([{name: run.get(name, 0.0) for name in outside} for run in runs])}
