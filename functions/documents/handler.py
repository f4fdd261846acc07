"""The documents function: documents, uploads, health and the OpenAPI document (`citewise.api.documents`)."""

from citewise.api.documents import add_document_routes
from citewise.api.handler import api_handler

lambda_handler = api_handler(add_document_routes)
