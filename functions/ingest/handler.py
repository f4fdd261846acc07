"""The ingest function: SQS batches of S3 notifications through the pipeline (`citewise.ingest_handler`)."""

from citewise.ingest_handler import ingest_handler

lambda_handler = ingest_handler()
