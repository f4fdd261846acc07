"""Rebuild the SQuAD 2.0 sample bundled for `citewise eval --answers` (samples/squad/, see its NOTICE.md).

Usage: python -m benchmarks.squad_sample --squad PATH/dev-v2.0.json

Whole articles, unchanged and in the file's order, from the official dev set or the CS224N half of it
(github.com/chrischute/squad, data/dev-v2.0.json), written compactly and xz-compressed. Three articles
fall in each part of the split (`citewise_local.answers.split_of`), on different subjects, so that what
is tuned on one part is confirmed on subjects it never saw.
"""

from __future__ import annotations

import argparse
import json
import lzma
from pathlib import Path

from citewise_local import packaged
from citewise_local.answers import split_of

ARTICLES = {
    "tune": ("Normans", "Computational_complexity_theory", "Immune_system"),
    "check": ("Steam_engine", "Scottish_Parliament", "Force"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", type=Path, required=True, help="a SQuAD 2.0 file holding the articles")
    parser.add_argument("--out", type=Path, default=packaged.squad_sample(), help="default: the bundled sample")
    args = parser.parse_args()
    wanted = {title: part for part, titles in ARTICLES.items() for title in titles}
    misplaced = [title for title, part in wanted.items() if split_of(title) != part]
    if misplaced:
        raise SystemExit(f"in the other part of the split: {', '.join(misplaced)}")
    squad = json.loads(args.squad.read_text(encoding="utf-8"))
    kept = [article for article in squad["data"] if article["title"] in wanted]
    missing = set(wanted) - {article["title"] for article in kept}
    if missing:
        raise SystemExit(f"{args.squad} lacks {', '.join(sorted(missing))}")
    text = json.dumps({"version": squad["version"], "data": kept}, ensure_ascii=False, separators=(",", ":"))
    args.out.write_bytes(lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))
    print(f"{args.out}: {len(kept)} articles, {args.out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
