"""The ingest function: SQS batches of S3 notifications through the pipeline (`citewise.runtime.ingest_handler`).

Settings: `IngestSettings` (the bucket, the registry, the index, the embedder). Adapters, built with the
first batch: the blob store, the registry, the index and the embedder, as the ingestor. Powertools
logger, metrics and tracer around a `BatchProcessor` with partial batch failures.
"""

from citewise.runtime.coldstart import init_phase

with init_phase():
    from citewise.runtime.ingest_handler import ingest_handler

    lambda_handler = ingest_handler()
