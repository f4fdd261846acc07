"""What a Lambda function runs around the logic: settings per function, the lazy wiring of adapters,
observability, and the ingest and index-bootstrap entry points."""
