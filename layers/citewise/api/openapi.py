"""The OpenAPI document of every v1 route: served at /v1/openapi.json and checked in as docs/openapi.json.

`python -m citewise.api.openapi > docs/openapi.json` (`make openapi`) rewrites the checked-in copy; a test
fails when it differs from what the code generates.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from citewise.api.app import openapi_document
from citewise.api.documents import add_document_routes, upload_request_schema
from citewise.api.query import add_query_routes


@cache
def full_document() -> dict[str, Any]:
    """The document of both API functions' routes, built once per process, with the upload rules the
    request model leaves to the functions that enforce them."""
    document = openapi_document(add_query_routes, add_document_routes)
    upload_request_schema(document["components"]["schemas"]["UploadRequest"])
    return document


def render() -> str:
    """The document as the checked-in file holds it: sorted keys, two-space indent, final newline."""
    return json.dumps(full_document(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(render(), end="")
