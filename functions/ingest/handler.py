"""The ingest function: SQS batches of S3 notifications through the pipeline (`citewise.handlers`)."""

from citewise.handlers import ingest_handler

lambda_handler = ingest_handler()
