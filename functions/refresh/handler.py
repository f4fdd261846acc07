"""The refresh function: the schedule's tick and the web sources' refreshes (`citewise.runtime.refresh_handler`).

Settings: `RefreshSettings` (the registry table, the bucket, its own queue). Adapters: the source registry,
the web fetcher, the blob store the pages go to (the bucket's notifications bring them to the ingest
function, as any upload) and the queue a run re-queues itself through. No index, no embedder.
"""

from citewise.runtime.coldstart import init_phase

with init_phase():
    from citewise.runtime.refresh_handler import refresh_handler

    lambda_handler = refresh_handler()
