"""The query function: POST /v1/query and POST /v1/search (routes in `citewise.api.query`)."""

from citewise.api.handler import api_handler
from citewise.api.query import add_query_routes

lambda_handler = api_handler(add_query_routes)
