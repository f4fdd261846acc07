"""Boilerplate removal on real documentation pages: citewise's HTML parser on the raw page against the
main content that `extract_page` (trafilatura) hands it, and readability-lxml when it is installed.

Usage: python -m benchmarks.web_extraction [ROOT] [--every N]

ROOT is a folder of pages that mark their main content with `role="main"`, as Sphinx and MkDocs' own
theme do (default: Python 3.11's documentation, every 10th page, and MkDocs' documentation, every page,
as `tests.doubles.docsite` downloads them). Each page splits into main text and everything else
(navigation, side bar, breadcrumbs, footer): the truth. For each extractor and page,
words are counted (lower case, `\\w+`) as multisets: "main lost" is the share of the main text's words
missing from the output, "boilerplate kept" the share of the other words the output still has (output
words beyond the main text's count, matched against the boilerplate's). Figures are over all words of the
sample (pages weigh by their length), then the median page.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from lxml import html as lxml_html

from citewise.ingest.parsing.html import parse_html
from citewise.ingest.web_pages import extract_page
from citewise.ports.web import FetchedPage, FetchOutcome

_WORDS = re.compile(r"\w+")
_NOT_TEXT = ("script", "style", "noscript", "template")


def words(text: str) -> Counter[str]:
    return Counter(word.lower() for word in _WORDS.findall(text))


def truth(raw: str) -> tuple[Counter[str], Counter[str]] | None:
    """(main words, boilerplate words) of a Sphinx page, None when it marks no main content."""
    tree = lxml_html.fromstring(raw)
    for element in tree.xpath("//script|//style|//noscript|//template|//head|//a[contains(@class,'headerlink')]"):
        element.drop_tree()
    mains = tree.xpath("//*[@role='main']")
    if not mains:
        return None
    main = words(mains[0].text_content())
    body = tree.find("body")
    everything = words((body if body is not None else tree).text_content())
    return main, everything - main


def citewise_raw(raw: bytes, url: str) -> str:
    return parse_html(raw.decode("utf-8"), "page.html").text


def citewise_extracted(raw: bytes, url: str) -> str:
    page = FetchedPage(url, url, FetchOutcome.FETCHED, 200, raw, "text/html")
    return parse_html(extract_page(page).body.decode("utf-8"), "page.html").text


def readability(raw: bytes, url: str) -> str:
    from readability import Document  # type: ignore[import-not-found]  # optional: measured when installed

    return parse_html(str(Document(raw.decode("utf-8"), url=url).summary()), "page.html").text


def score(output: Counter[str], main: Counter[str], boilerplate: Counter[str]) -> tuple[int, int]:
    """(main words lost, boilerplate words kept)."""
    kept_main = output & main
    extra = output - kept_main
    return (main - kept_main).total(), (extra & boilerplate).total()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, help="a folder of HTML pages marking role=main")
    parser.add_argument("--every", type=int, default=10, help="with ROOT: every Nth page, in path order (default 10)")
    args = parser.parse_args()
    if args.root is not None:
        measure(args.root, args.every)
        return
    from tests.doubles.docsite import documentation

    measure(documentation("python"), 10)
    measure(documentation("mkdocs"), 1)


def measure(root: Path, every: int) -> None:
    """Print the table of one site."""
    extractors: dict[str, Callable[[bytes, str], str]] = {
        "citewise parser, raw page (today)": citewise_raw,
        "extract_page (trafilatura) + parser": citewise_extracted,
    }
    try:
        import readability as _readability  # type: ignore[import-not-found]  # noqa: F401

        extractors["readability-lxml + parser"] = readability
    except ImportError:
        pass
    pages = sorted(root.rglob("*.html"))[::every]
    totals = {name: [0, 0, 0.0] for name in extractors}
    per_page: dict[str, list[tuple[float, float]]] = {name: [] for name in extractors}
    main_total = boilerplate_total = measured = 0
    for path in pages:
        raw = path.read_bytes()
        split = truth(raw.decode("utf-8"))
        if split is None or not split[0]:
            continue
        main_words, boilerplate = split
        measured += 1
        main_total += main_words.total()
        boilerplate_total += boilerplate.total()
        url = f"https://docs.example/{path.relative_to(root)}"
        for name, extract in extractors.items():
            started = time.perf_counter()
            output = words(extract(raw, url))
            totals[name][2] += time.perf_counter() - started
            lost, kept = score(output, main_words, boilerplate)
            totals[name][0] += lost
            totals[name][1] += kept
            per_page[name].append((lost / main_words.total(), kept / max(boilerplate.total(), 1)))
    share = boilerplate_total / (main_total + boilerplate_total)
    print(
        f"\n{measured} pages of {root} (every {every}): {main_total} main words, "
        f"{boilerplate_total} boilerplate words ({share:.1%} of all)"
    )
    print("| extractor | main text lost | boilerplate kept | median page: lost / kept | ms per page |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in extractors:
        lost, kept, seconds = totals[name]
        median_lost = statistics.median(page[0] for page in per_page[name])
        median_kept = statistics.median(page[1] for page in per_page[name])
        print(
            f"| {name} | {lost / main_total:.1%} | {kept / boilerplate_total:.1%} | "
            f"{median_lost:.1%} / {median_kept:.1%} | {1000 * seconds / measured:.0f} |"
        )


if __name__ == "__main__":
    main()
