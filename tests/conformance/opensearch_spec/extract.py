"""Extract the operations citewise sends from opensearch-project/opensearch-api-specification into one
self-contained JSON file (`operations.json`): per operation its path and query parameters and its
request body schema, with every schema they reference (across the spec's files) under `$defs`.

Run from a clone of the specification (see README.md for the pinned commit):

    python tests/conformance/opensearch_spec/extract.py /path/to/opensearch-api-specification
"""

from __future__ import annotations

import json
import posixpath
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

# (method, path template, the namespace file that defines it): what `citewise.aws.opensearch` sends.
OPERATIONS = [
    ("HEAD", "/{index}", "namespaces/indices.yaml"),
    ("PUT", "/{index}", "namespaces/indices.yaml"),
    ("GET", "/{index}/_mapping", "namespaces/indices.yaml"),
    ("POST", "/{index}/_refresh", "namespaces/indices.yaml"),
    ("POST", "/{index}/_bulk", "namespaces/_core.yaml"),
    ("POST", "/{index}/_search", "namespaces/_core.yaml"),
]
HERE = Path(__file__).resolve().parent


class Bundler:
    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.files: dict[str, Any] = {}
        self.defs: dict[str, Any] = {}

    def load(self, name: str) -> Any:
        if name not in self.files:
            self.files[name] = yaml.safe_load((self.repo / "spec" / name).read_text())
        return self.files[name]

    def pointer(self, name: str, fragment: str) -> Any:
        node = self.load(name)
        for part in fragment.lstrip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def target(self, ref: str, name: str) -> tuple[str, str]:
        where, _, fragment = ref.partition("#")
        return (posixpath.normpath(posixpath.join(posixpath.dirname(name), where)) if where else name), fragment

    def resolve(self, node: Any, name: str) -> tuple[Any, str]:
        """A `$ref`'d parameter or request body, followed to its definition."""
        while isinstance(node, dict) and "$ref" in node:
            name, fragment = self.target(node["$ref"], name)
            node = self.pointer(name, fragment)
        return node, name

    def schema(self, node: Any, name: str) -> Any:
        """`node` with every `$ref` to a named schema rewritten to `#/$defs/<file>:<name>`."""
        if isinstance(node, list):
            return [self.schema(item, name) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            file, fragment = self.target(node["$ref"], name)
            key = f"{posixpath.basename(file)}:{fragment.rsplit('/', 1)[-1]}"
            if key not in self.defs:
                self.defs[key] = {}
                self.defs[key] = self.schema(self.pointer(file, fragment), file)
            return {"$ref": f"#/$defs/{key}"}
        return {k: self.schema(v, name) for k, v in node.items() if not k.startswith("x-")}

    def operation(self, method: str, path: str, name: str) -> dict[str, Any]:
        spec = self.load(name)["paths"][path][method.lower()]
        parameters: dict[str, Any] = {}
        for raw in spec.get("parameters", []):
            parameter, where = self.resolve(raw, name)
            parameters[parameter["name"]] = {
                "in": parameter["in"],
                "required": parameter.get("required", False),
                "schema": self.schema(parameter.get("schema", {}), where),
            }
        body = None
        if "requestBody" in spec:
            request, where = self.resolve(spec["requestBody"], name)
            ((content_type, content),) = request["content"].items()
            body = {"content_type": content_type, "schema": self.schema(content["schema"], where)}
        return {"operationId": spec["operationId"], "parameters": parameters, "body": body}


LICENCE_FILES = ("LICENSE.txt", "NOTICE.txt")
"""The upstream licence (Apache-2.0) and notice, copied beside the extract."""


def main(repo: Path) -> None:
    bundler = Bundler(repo)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    operations = {f"{m} {p}": bundler.operation(m, p, name) for m, p, name in OPERATIONS}
    out = {"commit": commit.stdout.strip(), "operations": operations, "$defs": bundler.defs}
    (HERE / "operations.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    # Apache-2.0 section 4: a redistribution carries the licence and the NOTICE file
    for name in LICENCE_FILES:
        shutil.copyfile(repo / name, HERE / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
