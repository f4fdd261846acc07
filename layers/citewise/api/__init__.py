"""The v1 REST API: routes, identity, error bodies and observability shared by the Lambda handlers."""
