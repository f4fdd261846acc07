"""The Lambda layer's size, measured on the layer `make synth` really bundles.

The layer is built by the CDK app's own code (`cdk/citewise_infra/layer.py`): `LocalLayerBundling`
for the architecture the stack deploys, the same object `make synth` hands to CDK. It pip-installs the
pins of `cdk/layer/requirements.txt` with `--no-deps` for `manylinux2014_<arch>` / CPython 3.12
(wheels only, no byte code), copies the `citewise` package, refuses an unfit layer (`check_layer`) and
prints the line `make synth` prints. Nothing here resolves dependencies by itself, so the figures cannot
drift from the layer that is deployed: an earlier version of this benchmark did its own resolution from
pyproject, missed the extras (`aws-lambda-powertools[tracer]` pulls aws-xray-sdk and wrapt) and
went stale.

Sizes are the layer's own `sizes()`: the sum of file sizes (not `du`, which also counts directory
blocks) and a deflate zip of the output directory, both in MiB (2**20 bytes) like the synth's report
and like Lambda's limit, which AWS writes "250 MB" and enforces as 262,144,000 bytes = 250 MiB. On top,
this benchmark breaks the layer down by distribution, from each one's RECORD, and tells apart what
pyproject names from what those packages pull in. Sizes do not vary between runs: measured once.
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
    """Bundle the layer with `make synth`'s own code into a temporary folder and measure it.

    An unfit or over-budget layer raises, as it fails the synth; an unreachable registry is reported.
    """
    # `cdk/` is not a package: the CDK app and tests/infrastructure put it on sys.path the same way.
    # Imported here, not at module level, so other measurements do not start the CDK's jsii runtime.
    if str(CDK_DIR) not in sys.path:
        sys.path.insert(0, str(CDK_DIR))
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from aws_cdk import DockerImage
    from citewise_infra.constants import LAYER_REQUIREMENTS
    from citewise_infra.functions import LAYER_ARCHITECTURE
    from citewise_infra.layer import (
        MAX_UNZIPPED_BYTES,
        PIP_MACHINES,
        PYTHON_VERSION,
        LocalLayerBundling,
        pinned,
        root_requirements,
        sizes,
    )

    title = f"Lambda layer size ({LAYER_ARCHITECTURE}, Python {PYTHON_VERSION}): the layer `make synth` bundles"
    section = Section("layer_size", title)
    reports: list[str] = []
    with tempfile.TemporaryDirectory(prefix="citewise-layer-") as tmp:
        output = Path(tmp)
        log(f"  layer size: bundling the layer for {LAYER_ARCHITECTURE} as `make synth` does (pip --no-deps)")
        bundling = LocalLayerBundling(LAYER_ARCHITECTURE, report=reports.append)
        try:
            # The image is CDK's Docker fallback, which local bundling never uses.
            bundling.try_bundle(str(output), image=DockerImage.from_registry("unused"))
        except subprocess.CalledProcessError as exc:
            section.context["error"] = f"not measured: pip exited with {exc.returncode} (registry unreachable?)"
            return section
        # try_bundle raises on an unfit (check_layer) or over-budget layer: reaching here means it passed.
        unzipped, zipped = sizes(output)
        by_distribution = _distribution_bytes(output / "python")
    section.add("unzipped_mib", "the layer, unzipped (sum of file sizes)", "MiB", [unzipped / MIB])
    section.add("zipped_mib", "the layer, zipped (deflate)", "MiB", [zipped / MIB])
    section.add(
        "limit_share_pct",
        "share of Lambda's 250 MiB unzipped limit",
        "%",
        [100 * unzipped / LAMBDA_UNZIPPED_LIMIT_BYTES],
    )
    named = {canonicalize_name(requirement.name) for requirement in root_requirements()} | {LIBRARY}
    named_bytes = sum(size for name, size in by_distribution.items() if name in named)
    ranked = sorted(by_distribution.items(), key=lambda item: -item[1])
    section.context.update(
        {
            "built_by": "cdk/citewise_infra/layer.py LocalLayerBundling.try_bundle (what `make synth` runs)",
            "synth_report": reports,
            "target": f"manylinux2014_{PIP_MACHINES[LAYER_ARCHITECTURE]}, CPython {PYTHON_VERSION}, "
            "wheels only, --no-deps, no byte code",
            "requirements_file": LAYER_REQUIREMENTS.relative_to(REPO).as_posix(),
            "pins": len(pinned()),
            "check_layer": "passed",
            "unzipped_bytes": unzipped,
            "zipped_bytes": zipped,
            "unzipped_mb": round(unzipped / 1e6, 2),
            "zipped_mb": round(zipped / 1e6, 2),
            "distributions_mib": {name: round(size / MIB, 2) for name, size in ranked},
            "named_in_pyproject_mib": round(named_bytes / MIB, 2),
            "pulled_in_mib": round((sum(by_distribution.values()) - named_bytes) / MIB, 2),
            "not_in_any_distribution_bytes": unzipped - sum(by_distribution.values()),
            "synth_budget_mib": MAX_UNZIPPED_BYTES / MIB,
            "lambda_unzipped_limit_bytes": LAMBDA_UNZIPPED_LIMIT_BYTES,
        }
    )
    return section


def _distribution_bytes(site: Path) -> dict[str, int]:
    """Bytes per distribution under `site`: pip's from their RECORD, citewise (copied, no RECORD) by folder.

    Only files that exist inside `site` count: the RECORD also lists console scripts, which the bundling
    deletes, and `../bin` paths outside the layer.
    """
    root = site.resolve()
    found: dict[str, int] = {LIBRARY: _tree_bytes(site / LIBRARY)}
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
