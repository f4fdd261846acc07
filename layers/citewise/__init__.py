"""citewise: multi-tenant retrieval-augmented question answering with exact citations."""

__version__ = "0.1.0"
