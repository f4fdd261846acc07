"""Local files as source objects: what `citewise ingest PATH...` turns folders and files into.

A file's document path is its path relative to the parent of the argument it was found under, so
`citewise ingest samples/corpus` names documents `corpus/architecture.md`, independent of the current
directory. A sidecar `<file>.metadata.json` is read with its file and is part of its version, so editing
the sidecar alone re-indexes the document.

What a folder holds can be narrowed (issue 26): an ignore file at its top (`.citewiseignore`) and the
command's `--exclude` and `--include` patterns, all in gitignore syntax (pathspec's `GitIgnoreSpec`, the
rules git itself follows: `release-notes.md` anywhere, `es/` a folder, `!keep.txt` an exception), matched
against the path inside the folder. A file left out counts as not in the folder: a later sync removes its
document as it would a deleted file's. A file named on the command line is always ingested.

Documents read from folders record the channel `folder`, apart from those that arrived through the API
or the bucket (`local`, `s3`): a folder sync removes only documents it put there itself. Their `source`
(the content's origin) is derived like any other document's (`citewise.domain.provenance`).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pathspec import GitIgnoreSpec

from citewise.domain.errors import ValidationError
from citewise.domain.metadata import SIDECAR_SUFFIX, parse_sidecar
from citewise.domain.models import AttributeValue, Visibility
from citewise.domain.objects import SourceObject
from citewise.domain.tenancy import validate_document_name
from citewise.ingest.parsing import SUPPORTED_EXTENSIONS

FOLDER_CHANNEL = "folder"
"""The `channel` of documents ingested from local files and folders by `citewise ingest`."""


IGNORE_FILE = ".citewiseignore"
"""The ignore file at the top of a folder, in gitignore syntax."""


@dataclass(frozen=True)
class Selection:
    """The command's patterns (gitignore syntax) for the files of a folder: with `include`, only files
    that match one of them; never files that match one of `exclude`."""

    include: Sequence[str] = ()
    exclude: Sequence[str] = ()


@dataclass
class Scan:
    """What a scan found: objects to ingest, the folder prefixes it covered, and what it passed over."""

    objects: list[SourceObject] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (document path, "CODE: reason")
    excluded: Counter[str] = field(default_factory=Counter)
    """Files left out, by the rule that left them out (`--exclude PATTERN`, `.citewiseignore: PATTERN`...)."""


class _Rules:
    """Which rule, if any, leaves a file of one folder out: its ignore file, then `--exclude`, then
    `--include` (a file the ignore file re-includes with `!` can still be excluded by the command)."""

    def __init__(self, root: Path, selection: Selection) -> None:
        ignore_file = root / IGNORE_FILE
        lines = ignore_file.read_text(encoding="utf-8").splitlines() if ignore_file.is_file() else []
        self.ignored = _spec(lines, str(ignore_file))
        self.excluded = _spec(selection.exclude, "--exclude")
        self.included = _spec(selection.include, "--include") if selection.include else None

    def left_out_by(self, relative: str) -> str | None:
        """The rule that leaves out the file at `relative` (a POSIX path inside the folder), else None."""
        for spec, label in ((self.ignored, f"{IGNORE_FILE}: "), (self.excluded, "--exclude ")):
            found = spec.check_file(relative)
            if found.include and found.index is not None:
                return label + str(spec.patterns[found.index].pattern)
        if self.included is not None and not self.included.match_file(relative):
            return "--include (matched none)"
        return None


def _spec(lines: Sequence[str], origin: str) -> GitIgnoreSpec:
    """The patterns as git reads them; ValidationError naming `origin` for one git would refuse (`!`)."""
    try:
        return GitIgnoreSpec.from_lines(lines)
    except ValueError as exc:  # pathspec's GitIgnorePatternError names the pattern
        raise ValidationError(f"{origin}: invalid pattern ({exc})") from exc


def scan(
    paths: list[Path], tenant_id: str, owner: str, visibility: Visibility, selection: Selection | None = None
) -> Scan:
    """Source objects for every supported file under `paths` (hidden files and folders are ignored, and so
    are the files a folder's ignore file or `selection` leaves out)."""
    result = Scan()
    for root in paths:
        if not root.exists():
            raise ValidationError(f"no such file or folder: {root}")
        root = root.resolve()
        base = root.parent
        if root.is_dir():
            result.prefixes.append(f"{root.name}/")
            rules = _Rules(root, selection or Selection())
            candidates = []
            for file in sorted(_visible_files(root)):
                rule = rules.left_out_by(file.relative_to(root).as_posix())
                if rule is None:
                    candidates.append(file)
                elif not file.name.endswith(SIDECAR_SUFFIX):
                    result.excluded[rule] += 1
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
