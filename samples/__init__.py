"""The sample corpus and questions of `citewise demo`, installed as the package `citewise_samples`.

`corpus/` holds the documents (Markdown, HTML with a sidecar, and a PDF that `build_runbook_pdf.py`
lays out) and `questions.json` the questions the demo asks of them.
"""
