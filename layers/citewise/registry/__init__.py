"""DocumentRegistry port and its adapters. See `base.DocumentRegistry`."""

from citewise.registry.base import DocumentPage, DocumentRegistry

__all__ = ["DocumentPage", "DocumentRegistry"]
