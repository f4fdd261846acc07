"""Which engine should rank the local index's keywords: SQLite FTS5 (today), bm25s or tantivy?

Two measurements, each engine fed the same analysed terms (`citewise_local.analysis.keyword_terms` of
`textutil.keyword_text`), so only the engine differs:
- quality: BM25-only nDCG@10 on SciFact's train split, its queries cut in two halves by a hash of the
  query id. k1/b are chosen on half A (bm25s, the only one that takes them: FTS5 and tantivy fix
  k1 = 1.2, b = 0.75) and confirmed on half B, which nothing was chosen on;
- latency: p50/p95 of a top-50 keyword search for the large tenant of `query_latency`'s synthetic
  100k-chunk index (half of the chunks), with its tenant and access filter. FTS5 is timed through
  `LocalIndex.keyword_search` (it also reads the 50 chunks back); bm25s and tantivy return ids only.

`python -m benchmarks.keyword_engines --dataset ../shared/datasets/scifact-train` runs both (`--only`
one); it needs the `bench` extra (bm25s, scipy, tantivy), which `make test` does not install.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import tantivy

from benchmarks.query_latency import build
from citewise.domain.models import Caller, Visibility
from citewise.domain.textutil import keyword_text
from citewise_local.analysis import keyword_terms
from citewise_local.evaluation import Dataset, load_beir, ndcg_at_k
from citewise_local.index import LocalIndex

Ranker = Callable[[list[str]], list[int]]
K1_GRID = (0.6, 0.9, 1.2, 1.5, 2.0)
B_GRID = (0.3, 0.5, 0.75, 0.9)


# --- quality ------------------------------------------------------------------------------------


def halves(dataset: Dataset) -> tuple[list[str], list[str]]:
    """The judged queries split in two fixed halves (A: choose settings, B: confirm)."""
    judged = sorted(q for q in dataset.queries if q in dataset.qrels)
    part = [int(hashlib.sha256(q.encode()).hexdigest(), 16) % 2 for q in judged]
    return [q for q, p in zip(judged, part, strict=True) if p == 0], [q for q, p in zip(judged, part, strict=True) if p]


def corpus_terms(dataset: Dataset) -> tuple[list[str], list[list[str]]]:
    """Each document as the local index analyses a one-chunk Markdown document: `# title`, then the text."""
    ids = list(dataset.corpus)
    return ids, [keyword_terms(keyword_text(title, (title,), text)) for title, text in dataset.corpus.values()]


def ndcg(dataset: Dataset, ids: Sequence[str], rank: Ranker, queries: Sequence[str]) -> float:
    return statistics.fmean(
        ndcg_at_k([ids[i] for i in rank(keyword_terms(dataset.queries[q]))], dataset.qrels[q], 10) for q in queries
    )


def fts5_ranker(docs: list[list[str]]) -> Ranker:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0')")
    conn.executemany("INSERT INTO f (rowid, terms) VALUES (?, ?)", ((i, " ".join(d)) for i, d in enumerate(docs)))

    def rank(terms: list[str]) -> list[int]:
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in dict.fromkeys(terms))
        sql = "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 10"
        return [int(r) for (r,) in conn.execute(sql, (match,))]

    return rank


def bm25s_ranker(docs: list[list[str]], k1: float, b: float, weight_mask: Any = None) -> Ranker:
    model = bm25s.BM25(k1=k1, b=b, method="lucene")
    model.index(docs, show_progress=False)
    vocabulary = model.vocab_dict

    def rank(terms: list[str], k: int = 10) -> list[int]:
        known = [t for t in terms if t in vocabulary]
        if not known:
            return []
        found, scores = model.retrieve([known], k=k, show_progress=False, weight_mask=weight_mask)
        return [int(i) for i, s in zip(found[0], scores[0], strict=True) if s > 0]

    return rank


def tantivy_index(docs: list[list[str]], extra: Callable[[int], dict[str, str]] | None = None) -> tantivy.Index:
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("row", stored=True)
    builder.add_text_field("terms", tokenizer_name="whitespace", index_option="freq")
    for name in ("tenant", "visibility", "owner"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    index = tantivy.Index(builder.build())
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for i, terms in enumerate(docs):
        writer.add_document(tantivy.Document(row=i, terms=" ".join(terms), **(extra(i) if extra else {})))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index


def tantivy_ranker(index: tantivy.Index, access: tantivy.Query | None = None, k: int = 10) -> Ranker:
    schema = index.schema

    def rank(terms: list[str]) -> list[int]:
        if not terms:
            return []
        should = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "terms", t)) for t in terms]
        query = tantivy.Query.boolean_query(should)
        if access is not None:
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, access)])
        searcher = index.searcher()
        return [searcher.doc(address)["row"][0] for _, address in searcher.search(query, k).hits]

    return rank


def quality(folder: Path) -> dict[str, Any]:
    dataset = load_beir(folder)
    tune, held_out = halves(dataset)
    ids, docs = corpus_terms(dataset)
    grid = {(k1, b): ndcg(dataset, ids, bm25s_ranker(docs, k1, b), tune) for k1 in K1_GRID for b in B_GRID}
    k1, b = max(grid, key=grid.__getitem__)
    fts5, engine = fts5_ranker(docs), tantivy_ranker(tantivy_index(docs))
    return {
        "queries": {"tune": len(tune), "held_out": len(held_out)},
        "bm25s_grid_on_tune": {f"k1={k}, b={v}": round(s, 4) for (k, v), s in grid.items()},
        "chosen": {"k1": k1, "b": b},
        "held_out_ndcg@10": {
            "fts5 (1.2/0.75)": round(ndcg(dataset, ids, fts5, held_out), 4),
            "tantivy (1.2/0.75)": round(ndcg(dataset, ids, engine, held_out), 4),
            "bm25s (1.2/0.75)": round(ndcg(dataset, ids, bm25s_ranker(docs, 1.2, 0.75), held_out), 4),
            f"bm25s ({k1}/{b}, chosen on A)": round(ndcg(dataset, ids, bm25s_ranker(docs, k1, b), held_out), 4),
        },
        "tune_ndcg@10": {
            "fts5 (1.2/0.75)": round(ndcg(dataset, ids, fts5, tune), 4),
            "tantivy (1.2/0.75)": round(ndcg(dataset, ids, engine, tune), 4),
        },
    }


# --- latency ------------------------------------------------------------------------------------


def _timed(rank: Callable[[str], object], texts: list[str]) -> dict[str, float]:
    rank(texts[0])
    took = []
    for text in texts:
        started = time.perf_counter()
        rank(text)
        took.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(statistics.median(took), 2), "p95_ms": round(statistics.quantiles(took, n=20)[18], 2)}


def latency(built: Path | None = None, total: int = 100_000, queries: int = 200) -> dict[str, Any]:
    """The three engines on `query_latency`'s synthetic index: `built` (a file an earlier run left, to
    skip the build's minutes), or a new one of `total` chunks."""
    caller = Caller(tenant_id="big", user_id="u1")
    rng = random.Random(42)  # noqa: S311 - synthetic data, not security
    texts = [" ".join(f"term{rng.randint(0, 5000)}" for _ in range(rng.randint(2, 6))) for _ in range(queries)]
    with tempfile.TemporaryDirectory() as home:
        index = LocalIndex(built or Path(home) / "index.db")
        index.ensure("hashing-384", 384)
        if built is None:
            build(index, total, random.Random(42))  # noqa: S311
        search = _timed(lambda t: index.keyword_search(caller, t, None, 50), texts)
        figures = {"fts5 (LocalIndex.keyword_search)": search}
        rows = (
            index._reader()
            .execute(  # noqa: SLF001 - the same chunks, for the other engines
                "SELECT c.tenant_id, c.owner, c.visibility, f.terms FROM chunks c JOIN chunks_fts f ON f.rowid = c.id"
            )
            .fetchall()
        )
        index.close()
    docs = [terms.split() for *_, terms in rows]
    allowed = np.array(
        [t == caller.tenant_id and (v == Visibility.SHARED.value or o == caller.user_id) for t, o, v, _ in rows],
        dtype=np.float32,
    )
    prefixed = bm25s_ranker(docs, 1.2, 0.75, weight_mask=allowed)
    prefix = docs[0][0].split("z", 1)[0] + "z" if docs and docs[0] else ""
    figures["bm25s (weight_mask)"] = _timed(lambda t: prefixed([prefix + w for w in keyword_terms(t)]), texts)
    engine = tantivy_index(docs, lambda i: {"tenant": rows[i][0], "owner": rows[i][1], "visibility": rows[i][2]})
    schema = engine.schema
    access = tantivy.Query.const_score_query(
        tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.term_query(schema, "tenant", caller.tenant_id)),
                (
                    tantivy.Occur.Must,
                    tantivy.Query.boolean_query(
                        [
                            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "visibility", "shared")),
                            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "owner", caller.user_id)),
                        ]
                    ),
                ),
            ]
        ),
        0.0,
    )
    ranked = tantivy_ranker(engine, access, k=50)
    figures["tantivy (filter clause)"] = _timed(lambda t: ranked([prefix + w for w in keyword_terms(t)]), texts)
    return {"chunks": len(rows), "tenant_chunks": int(sum(1 for r in rows if r[0] == caller.tenant_id)), **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--only", choices=["quality", "latency"])
    parser.add_argument("--index", type=Path, help="a synthetic index an earlier run built (skips the build)")
    args = parser.parse_args()
    if args.only != "latency":
        print(json.dumps({"quality": quality(args.dataset)}, indent=1), flush=True)
    if args.only != "quality":
        print(json.dumps({"latency": latency(args.index)}, indent=1))


if __name__ == "__main__":
    main()
