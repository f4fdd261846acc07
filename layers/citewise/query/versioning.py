"""The version preference: a question about a version ranks the documents valid for it first.

"How do I cancel a task group in Python 3.12?" names 3.12 (`ports.router.version_mentions`). A document
valid for it (`domain.versions.valid_for`: its `version` on the 3.12 line, not `introduced_in` after 3.12,
not `deprecated_in` before it) ranks before one that is not; a document that declares no version counts as
valid. A preference, not a filter: the others keep their order after the valid ones, so a question whose
version no document matches (or a number misread as a version: "the 1.2.0 rollout") still gets its best
answers, and nothing the router reads can empty a result. It applies to the candidates of the ranking (the whole fused
depth, 100 a list by default), after ranking signals and the reranker, before pins and the cut.
"""

from __future__ import annotations

from citewise.domain.models import VersionPreference
from citewise.domain.versions import declared_versions, parse_version, valid_for
from citewise.ports.router import VersionMention
from citewise.query.candidates import Candidate


def prefer_valid(
    ranked: list[Candidate], mentions: list[VersionMention]
) -> tuple[list[Candidate], VersionPreference | None]:
    """`ranked` with the candidates valid for one of the mentioned versions first (each group in its order),
    and the report; `ranked` as it is and None when no version is named or no candidate declares one (the
    tenant's documents carry no versions: nothing to prefer, nothing to report)."""
    if not mentions:
        return ranked, None
    asked = [parse_version(mention.version) for mention in mentions]
    valid: list[Candidate] = []
    invalid: list[Candidate] = []
    declaring = False
    for candidate in ranked:
        declared = declared_versions(candidate.chunk.document.attributes)
        declaring = declaring or bool(declared)
        (valid if any(valid_for(declared, version) for version in asked) else invalid).append(candidate)
    if not declaring:
        return ranked, None
    report = VersionPreference(
        versions=[mention.version for mention in mentions],
        phrases=[mention.phrase for mention in mentions],
        demoted_documents=list(dict.fromkeys(candidate.doc_id for candidate in invalid)),
    )
    return valid + invalid, report
