"""The keyword analyzer of the local index: the same terms OpenSearch's `citewise_english` analyzer makes.

On AWS the chunk index analyses its text fields with a custom analyzer (`citewise.aws.opensearch_queries.
ANALYSIS`): the standard tokenizer, the English possessive filter, lower-casing, Lucene's English stop set
(`_english_`) and the Snowball English stemmer (Porter2). This module does the same in Python with
PyStemmer (the Snowball project's own C stemmers), so a query ranks the same chunks first on a laptop and
on a domain. Approximations, all on rare input: words are runs of letters and digits (the Unicode word
break rules of the standard tokenizer also keep `3.14` or `don't` as one token), and no token is cut at
255 characters.

Why Snowball and this stop set rather than the library's light stemmer (`citewise.domain.textutil.stem`,
still used by grounding and the hashing embedder, which need no dependency): measured on SciFact (docs/
evaluation.md, "Keyword ranking") it ranks better, and it is what the OpenSearch side can be told to do.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer

ENGLISH_STOPWORDS = frozenset(
    # Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, which OpenSearch names `_english_`.
    """a an and are as at be but by for if in into is it no not of on or such that the their then there
    these they this to was will with""".split()
)
_WORD_RE = re.compile(r"[^\W_]+")  # letters and digits: also how SQLite's unicode61 tokenizer splits
_POSSESSIVE_RE = re.compile(r"['\u2019]s\b", re.IGNORECASE)  # what Lucene's EnglishPossessiveFilter removes
_local = threading.local()  # a PyStemmer `Stemmer` must not be shared between threads


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    """One word's stem, cached: a corpus repeats its vocabulary, and the cache is cheaper than Snowball."""
    stemmer: Stemmer.Stemmer | None = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    stemmed: str = stemmer.stemWord(word)
    return stemmed


def keyword_terms(text: str) -> list[str]:
    """The analysed terms of `text`, in order: possessives removed, case-folded, stopwords out, stemmed."""
    # casefold, not lower: it folds as SQLite's unicode61 tokenizer does (final sigma, for one).
    words = _WORD_RE.findall(_POSSESSIVE_RE.sub("", text).casefold())
    return [_stem(word) for word in words if word not in ENGLISH_STOPWORDS]
