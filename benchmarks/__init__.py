"""`make bench`: measurements of citewise on this machine. `python -m benchmarks.run` runs them all.

One module per measurement, each with a `run()` that returns a `common.Section`; `run.py` prints them
as one table and writes `benchmarks/results/latest.json`. Nothing else is written into the repository.
"""
