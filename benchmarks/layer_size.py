"""The Lambda layers' sizes, measured on the layers `make synth` really bundles.

Two layers (`cdk/citewise_infra/layer.py`): the base layer, which every function carries, and the web
layer (main-content extraction: pyproject's `web` extra), which only the function extracting web pages
carries on top of it. Each is built by the CDK app's own code: `LocalLayerBundling` for the architecture
the stack deploys, the same object `make synth` hands to CDK. It pip-installs the pins of
`cdk/layer/requirements.txt` (base) or `cdk/layer/web-requirements.txt` (web) with `--no-deps` for
`manylinux2014_<arch>` / CPython 3.12 (wheels only, no byte code), copies the `citewise` package into the
base layer, refuses an unfit layer (`check_layer`; the web layer's over a base layer built beside it) and
prints the line `make synth` prints. Nothing here resolves dependencies by itself, so the figures cannot
drift from the layers that are deployed: an earlier version of this benchmark did its own resolution from
pyproject, missed the extras (`aws-lambda-powertools[tracer]` pulls aws-xray-sdk and wrapt) and
went stale.

Sizes are the layer's own `sizes()`: the sum of file sizes (not `du`, which also counts directory
blocks) and a deflate zip of the output directory, both in MiB (2**20 bytes) like the synth's report
and like Lambda's limit, which AWS writes "250 MB" and enforces as 262,144,000 bytes = 250 MiB, for a
function and all its layers together. On top, this benchmark breaks each layer down by distribution, from
each one's RECORD, and tells apart what pyproject names from what those packages pull in. Sizes do not
vary between runs: measured once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from benchmarks.common import REPO, Section, log

CDK_DIR = REPO / "cdk"
MIB = 2**20
# Lambda's limit on a function and all its layers, unzipped, as its error message states it.
LAMBDA_UNZIPPED_LIMIT_BYTES = 262_144_000
LIBRARY = "citewise"
IN_RUNTIME = frozenset({"boto3", "botocore"})


def run() -> Section:
    """Bundle both layers with `make synth`'s own code into temporary folders and measure them.

    An unfit or over-budget layer raises, as it fails the synth; an unreachable registry is reported.
    """
    # `cdk/` is not a package: the CDK app and tests/infrastructure put it on sys.path the same way.
    # Imported here, not at module level, so other measurements do not start the CDK's jsii runtime.
    if str(CDK_DIR) not in sys.path:
        sys.path.insert(0, str(CDK_DIR))
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from aws_cdk import DockerImage
    from citewise_infra.constants import LAYER_REQUIREMENTS, WEB_LAYER_REQUIREMENTS
    from citewise_infra.functions import LAYER_ARCHITECTURE
    from citewise_infra.layer import (
        MAX_UNZIPPED_BYTES,
        PIP_MACHINES,
        PYTHON_VERSION,
        LocalLayerBundling,
        pinned,
        root_requirements,
        sizes,
        web_requirements,
    )

    title = f"Lambda layer sizes ({LAYER_ARCHITECTURE}, Python {PYTHON_VERSION}): the layers `make synth` bundles"
    section = Section("layer_size", title)
    reports: list[str] = []
    measured: dict[str, tuple[int, int, dict[str, int]]] = {}
    for name, web in (("base", False), ("web", True)):
        with tempfile.TemporaryDirectory(prefix=f"citewise-{name}-layer-") as tmp:
            output = Path(tmp)
            log(f"  layer size: bundling the {name} layer for {LAYER_ARCHITECTURE} as `make synth` does (pip)")
            bundling = LocalLayerBundling(LAYER_ARCHITECTURE, web=web, report=reports.append)
            try:
                # The image is CDK's Docker fallback, which local bundling never uses.
                bundling.try_bundle(str(output), image=DockerImage.from_registry("unused"))
            except subprocess.CalledProcessError as exc:
                section.context["error"] = f"not measured: pip exited with {exc.returncode} (registry unreachable?)"
                return section
            # try_bundle raises on an unfit (check_layer) or over-budget layer: reaching here means it passed.
            measured[name] = (*sizes(output), _distribution_bytes(output / "python"))
    unzipped, zipped, by_distribution = measured["base"]
    web_unzipped, web_zipped, web_by_distribution = measured["web"]
    section.add("unzipped_mib", "the base layer (every function), unzipped (sum of files)", "MiB", [unzipped / MIB])
    section.add("zipped_mib", "the base layer, zipped (deflate)", "MiB", [zipped / MIB])
    section.add(
        "limit_share_pct",
        "the base layer's share of Lambda's 250 MiB unzipped limit",
        "%",
        [100 * unzipped / LAMBDA_UNZIPPED_LIMIT_BYTES],
    )
    section.add("web_unzipped_mib", "the web layer (page extraction), unzipped", "MiB", [web_unzipped / MIB])
    section.add("web_zipped_mib", "the web layer, zipped (deflate)", "MiB", [web_zipped / MIB])
    section.add(
        "with_web_unzipped_mib",
        "base + web layers, unzipped (what the function extracting pages carries)",
        "MiB",
        [(unzipped + web_unzipped) / MIB],
    )
    section.add(
        "with_web_limit_share_pct",
        "base + web layers' share of Lambda's 250 MiB unzipped limit",
        "%",
        [100 * (unzipped + web_unzipped) / LAMBDA_UNZIPPED_LIMIT_BYTES],
    )
    named = {canonicalize_name(requirement.name) for requirement in root_requirements()} | {LIBRARY}
    named_bytes = sum(size for name, size in by_distribution.items() if name in named)
    web_named = {canonicalize_name(requirement.name) for requirement in web_requirements()}
    web_named_bytes = sum(size for name, size in web_by_distribution.items() if name in web_named)
    section.context.update(
        {
            "built_by": "cdk/citewise_infra/layer.py LocalLayerBundling.try_bundle (what `make synth` runs)",
            "synth_report": reports,
            "target": f"manylinux2014_{PIP_MACHINES[LAYER_ARCHITECTURE]}, CPython {PYTHON_VERSION}, "
            "wheels only, --no-deps, no byte code",
            "requirements_file": LAYER_REQUIREMENTS.relative_to(REPO).as_posix(),
            "pins": len(pinned()),
            "web_requirements_file": WEB_LAYER_REQUIREMENTS.relative_to(REPO).as_posix(),
            "web_pins": len(pinned(WEB_LAYER_REQUIREMENTS)),
            "check_layer": "passed (both layers)",
            "unzipped_bytes": unzipped,
            "zipped_bytes": zipped,
            "unzipped_mb": round(unzipped / 1e6, 2),
            "zipped_mb": round(zipped / 1e6, 2),
            "web_unzipped_bytes": web_unzipped,
            "web_zipped_bytes": web_zipped,
            "distributions_mib": _ranked(by_distribution),
            "web_distributions_mib": _ranked(web_by_distribution),
            "named_in_pyproject_mib": round(named_bytes / MIB, 2),
            "pulled_in_mib": round((sum(by_distribution.values()) - named_bytes) / MIB, 2),
            "web_named_in_pyproject_mib": round(web_named_bytes / MIB, 2),
            "web_pulled_in_mib": round((sum(web_by_distribution.values()) - web_named_bytes) / MIB, 2),
            "not_in_any_distribution_bytes": unzipped - sum(by_distribution.values()),
            "synth_budget_mib": MAX_UNZIPPED_BYTES / MIB,
            "lambda_unzipped_limit_bytes": LAMBDA_UNZIPPED_LIMIT_BYTES,
        }
    )
    return section


def _ranked(by_distribution: dict[str, int]) -> dict[str, float]:
    """MiB per distribution, largest first."""
    return {name: round(size / MIB, 2) for name, size in sorted(by_distribution.items(), key=lambda item: -item[1])}


def _distribution_bytes(site: Path) -> dict[str, int]:
    """Bytes per distribution under `site`: pip's from their RECORD, citewise (copied into the base layer,
    no RECORD) by folder.

    Only files that exist inside `site` count: the RECORD also lists console scripts, which the bundling
    deletes, and `../bin` paths outside the layer.
    """
    root = site.resolve()
    found: dict[str, int] = {LIBRARY: _tree_bytes(site / LIBRARY)} if (site / LIBRARY).is_dir() else {}
    for dist in metadata.distributions(path=[str(site)]):
        total = 0
        for file in dist.files or ():
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_relative_to(root) and path.is_file():
                total += path.stat().st_size
        found[canonicalize_name(dist.metadata["Name"])] = total
    return found


def _tree_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def layer_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """pyproject's runtime dependencies and `aws` extra as written (extras kept), less boto3/botocore.

    Not used to build anything here: `cold_imports` walks their closure in the dev venv to tell which
    imported packages a deployed function would not have, and reads pyproject without starting the CDK.
    """
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements: list[str] = [*project["dependencies"], *project["optional-dependencies"]["aws"]]
    return [r for r in requirements if _name(r) not in IN_RUNTIME]


def _name(requirement: str) -> str:
    """The normalised distribution name at the start of a requirement line (used by `cold_imports` too)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else requirement
