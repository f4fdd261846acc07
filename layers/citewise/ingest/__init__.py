"""How a document comes and goes: parsing, structure-aware chunking, the idempotent ingestion
pipeline, S3 events, upload requests and deletion."""
