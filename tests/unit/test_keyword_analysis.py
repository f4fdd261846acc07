"""The local keyword analyzer: the terms OpenSearch's `citewise_english` analyzer makes (Snowball English)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import Caller
from citewise.domain.textutil import keyword_text
from citewise_local.analysis import ENGLISH_STOPWORDS, keyword_terms
from citewise_local.index import SCHEMA_VERSION, LocalIndex
from tests.contract.test_index_contract import make_chunk

EMBEDDER = HashingEmbedder(32)


def test_terms_are_snowball_english_stems_of_the_folded_words() -> None:
    # Porter2 outputs, as Lucene's SnowballFilter (language English) gives them
    assert keyword_terms("Connected connections GENEROUSLY studies running") == [
        "connect",
        "connect",
        "generous",
        "studi",
        "run",
    ]


def test_possessives_go_and_single_letters_and_digits_stay_as_the_standard_tokenizer_keeps_them() -> None:
    assert keyword_terms("The patient's vitamin D in type 2") == ["patient", "vitamin", "d", "type", "2"]
    assert keyword_terms("ALICE\u2019S notes") == ["alic", "note"]


def test_the_stop_set_is_lucenes_english_set_and_nothing_else() -> None:
    assert len(ENGLISH_STOPWORDS) == 33
    assert keyword_terms("the and of to will with") == []
    # Words of longer stop lists (the old one here dropped these) are searchable, as on OpenSearch
    assert keyword_terms("what which should") == ["what", "which", "should"]


def test_the_heading_counts_twice_in_the_keyword_text() -> None:
    assert keyword_text("Guide", ("Guide", "Install"), "Run make.") == "Guide > Install\nGuide > Install\nRun make."
    assert keyword_text("", (), "Run make.") == "Run make."


def test_a_schema_2_local_index_is_migrated_in_place_without_reingesting(tmp_path: Path) -> None:
    # Given a local index whose keyword table holds schema-2 terms (the light stemmer's) and says so
    path = tmp_path / "index.db"
    index = LocalIndex(path)
    index.ensure(EMBEDDER.name, EMBEDDER.dimension)
    chunk = make_chunk("acme", "doc", 0, "Connections are pooled per worker.", title="Pool")
    index.replace_document("acme", "doc", [chunk], EMBEDDER.embed_documents([chunk.text]))
    index.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM chunks_fts")
        conn.execute("INSERT INTO chunks_fts (rowid, terms) SELECT id, 'stale' FROM chunks")
        conn.execute("UPDATE index_meta SET value = '2' WHERE key = 'schema'")
    caller = Caller(tenant_id="acme", user_id="alice")

    # When it is opened and ensured by this version
    index = LocalIndex(path)
    index.ensure(EMBEDDER.name, EMBEDDER.dimension)

    # Then the keyword table is rebuilt from the stored chunks (Snowball: connected ~ connections) and the
    # schema recorded, while the chunk and its vector are untouched
    assert [hit.chunk.chunk_id for hit in index.keyword_search(caller, "connected", None, 5)] == ["acme-doc-00000"]
    assert index.keyword_search(caller, "stale", None, 5) == []
    found = index.vector_search(caller, EMBEDDER.embed_query(chunk.text), None, 5)
    assert [hit.chunk.chunk_id for hit in found] == ["acme-doc-00000"]
    index.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM index_meta WHERE key = 'schema'").fetchone() == (SCHEMA_VERSION,)
