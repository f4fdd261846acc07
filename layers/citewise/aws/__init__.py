"""The AWS adapters (S3, DynamoDB, OpenSearch, Bedrock) and the shared client configuration. Each
imports only `domain` and `ports`, and is imported only by `runtime.services` when chosen."""
