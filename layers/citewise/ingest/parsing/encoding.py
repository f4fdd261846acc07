"""Bytes of a text document (txt, md, html) -> clean str, whatever encoding the uploader used."""

from __future__ import annotations

import codecs
import re

from charset_normalizer import from_bytes

from citewise.ingest.parsing.failures import parse_error

# UTF-32 BOMs first: the UTF-32-LE BOM starts with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Windows-1252 is by far the most common legacy encoding of Western text; short samples give
# charset-normalizer no statistical signal and it then picks among equals (e.g. cp1250) arbitrarily.
_PREFERRED_LEGACY = "cp1252"
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f]")
_NEWLINES = re.compile(r"\r\n?")
# Real text may carry the odd stray control byte or bad byte; binary files are full of them.
_MAX_JUNK_RATIO = 0.05
_MAX_JUNK_ANYWAY = 8
_JUNK = re.compile(r"[\x00-\x08\x0e-\x1f\ufffd]")


def clean_text(text: str) -> str:
    """Normalise newlines to "\\n" and drop C0 controls other than "\\n" and "\\t"."""
    return _CONTROLS.sub("", _NEWLINES.sub("\n", text))


def decode_text(data: bytes, filename: str) -> str:
    """Decode a text document: BOM, then strict UTF-8, then charset-normalizer's best guess.

    Never raises a codec error: undecodable bytes become U+FFFD. Raises ParseError when the bytes are
    clearly not text (undecodable, or full of NULs and control bytes), because indexing a binary file
    as text only pollutes search results.
    """
    text = _decode(data, filename)
    junk = len(_JUNK.findall(text))
    if junk > max(_MAX_JUNK_ANYWAY, _MAX_JUNK_RATIO * len(text)):
        raise parse_error(filename, "it looks like a binary file, not text")
    return clean_text(text)


def _decode(data: bytes, filename: str) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        raise parse_error(filename, "its bytes are not text in any known encoding")
    equally_likely = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
    if any(_PREFERRED_LEGACY in m.could_be_from_charset for m in equally_likely):
        return data.decode(_PREFERRED_LEGACY, errors="replace")
    return data.decode(best.encoding, errors="replace")
