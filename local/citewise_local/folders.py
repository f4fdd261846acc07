"""Local files as source objects: what `citewise ingest PATH...` turns folders and files into.

A file's document path is its path relative to the parent of the argument it was found under, so
`citewise ingest samples/corpus` names documents `corpus/architecture.md`, independent of the current
directory. A sidecar `<file>.metadata.json` is read with its file and is part of its version, so editing
the sidecar alone re-indexes the document.

Documents read from folders record the channel `folder`, apart from those that arrived through the API
or the bucket (`local`, `s3`): a folder sync removes only documents it put there itself. Their `source`
(the content's origin) is derived like any other document's (`citewise.domain.provenance`).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from citewise.domain.errors import ValidationError
from citewise.domain.metadata import SIDECAR_SUFFIX, parse_sidecar
from citewise.domain.models import AttributeValue, Visibility
from citewise.domain.objects import SourceObject
from citewise.domain.tenancy import validate_document_name
from citewise.ingest.parsing import SUPPORTED_EXTENSIONS

FOLDER_CHANNEL = "folder"
"""The `channel` of documents ingested from local files and folders by `citewise ingest`."""


@dataclass
class Scan:
    """What a scan found: objects to ingest, the folder prefixes it covered, and what it passed over."""

    objects: list[SourceObject] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (document path, "CODE: reason")


def scan(paths: list[Path], tenant_id: str, owner: str, visibility: Visibility) -> Scan:
    """Source objects for every supported file under `paths` (hidden files and folders are ignored)."""
    result = Scan()
    for root in paths:
        if not root.exists():
            raise ValidationError(f"no such file or folder: {root}")
        root = root.resolve()
        base = root.parent
        if root.is_dir():
            result.prefixes.append(f"{root.name}/")
            candidates = sorted(_visible_files(root))
        else:
            candidates = [root]
        for file in candidates:
            if file.name.endswith(SIDECAR_SUFFIX):
                continue
            if root.is_dir() and file.suffix.lower() not in SUPPORTED_EXTENSIONS:
                result.skipped.append(file)
                continue
            # NFC, as the naming policy asks: macOS file names may come decomposed, and the name is only a
            # label here (the file is read through `file`).
            key = unicodedata.normalize("NFC", file.relative_to(base).as_posix())
            try:
                result.objects.append(_source(file, validate_document_name(key), tenant_id, owner, visibility))
            except ValidationError as exc:
                result.invalid.append((key, f"{exc.code}: {exc.message}"))
    return result


def _visible_files(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        relative = path.relative_to(root).parts
        if path.is_file() and not any(part.startswith(".") for part in relative):
            yield path


def _source(file: Path, key: str, tenant_id: str, owner: str, visibility: Visibility) -> SourceObject:
    with file.open("rb") as stream:
        digest = hashlib.file_digest(stream, "sha256")  # streamed: large files are not held in memory
    sidecar = file.with_name(file.name + SIDECAR_SUFFIX)
    attributes: dict[str, AttributeValue] = {}
    if sidecar.is_file():
        sidecar_bytes = sidecar.read_bytes()
        attributes = parse_sidecar(sidecar_bytes, sidecar.name)
        digest.update(sidecar_bytes)
    return SourceObject(
        tenant_id=tenant_id,
        path=key,
        size=file.stat().st_size,
        version=digest.hexdigest(),
        load=file.read_bytes,
        channel=FOLDER_CHANNEL,
        last_modified=datetime.fromtimestamp(file.stat().st_mtime, UTC),
        owner=owner,
        visibility=visibility,
        attributes=attributes,
    )
