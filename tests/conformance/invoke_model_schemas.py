"""JSON schemas of the Bedrock `InvokeModel` request bodies citewise sends, written from the AWS model
parameter pages (botocore's service model only knows the body as a blob):

- Titan Text Embeddings v2, https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-titan-embed-text.html
  ("V2 Request"): `inputText` required; `dimensions` one of 1024, 512, 256; `normalize` a boolean;
  `embeddingTypes` a list of "float" and/or "binary".
- Cohere Embed v3, https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-embed.html
  ("Request"): `texts` (0 to 96 texts of 0 to 2,048 characters) and `input_type` required;
  `truncate` one of NONE, START, END; `embedding_types` a list (the page names the field without its
  values as read here; they are taken from the Cohere Embed v4 page's list: float, int8, uint8, binary,
  ubinary; citewise sends none).

Fields the pages do not list are refused (`additionalProperties: false`): the model would reject or,
worse, ignore them.
"""

from __future__ import annotations

from typing import Any

TITAN_TEXT_EMBEDDINGS_V2: dict[str, Any] = {
    "type": "object",
    "required": ["inputText"],
    "properties": {
        "inputText": {"type": "string"},
        "dimensions": {"enum": [1024, 512, 256]},
        "normalize": {"type": "boolean"},
        "embeddingTypes": {"type": "array", "items": {"enum": ["float", "binary"]}, "uniqueItems": True},
    },
    "additionalProperties": False,
}

COHERE_EMBED_V3: dict[str, Any] = {
    "type": "object",
    "required": ["texts", "input_type"],
    "properties": {
        "texts": {"type": "array", "maxItems": 96, "items": {"type": "string", "maxLength": 2048}},
        "input_type": {"enum": ["search_document", "search_query", "classification", "clustering"]},
        "truncate": {"enum": ["NONE", "START", "END"]},
        "embedding_types": {
            "type": "array",
            "items": {"enum": ["float", "int8", "uint8", "binary", "ubinary"]},
            "uniqueItems": True,
        },
    },
    "additionalProperties": False,
}

_BY_MODEL = {
    "amazon.titan-embed-text-v2": TITAN_TEXT_EMBEDDINGS_V2,
    "cohere.embed-english-v3": COHERE_EMBED_V3,
    "cohere.embed-multilingual-v3": COHERE_EMBED_V3,
}


def schema_for(model_id: str) -> dict[str, Any] | None:
    """The body schema of a model id (`amazon.titan-embed-text-v2:0`, also behind a cross-region
    profile prefix or in an ARN); None for a model without one here (Converse models, test ids)."""
    name = model_id.rsplit("/", 1)[-1].split(":", 1)[0]
    for known, schema in _BY_MODEL.items():
        if name == known or name.endswith(f".{known}"):
            return schema
    return None
