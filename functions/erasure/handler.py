"""The erasure function: runs the operator's tenant erasures from its queue (`citewise.runtime.erasure_handler`).

Settings: `ErasureSettings` (the registry, the bucket, the index, its own queue). Adapters: every store an
erasure empties, the erasure log and the queue it re-queues itself through.
"""

from citewise.runtime.coldstart import init_phase

with init_phase():
    from citewise.runtime.erasure_handler import erasure_handler

    lambda_handler = erasure_handler()
