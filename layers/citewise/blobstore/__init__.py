"""BlobStore port and its adapters. See `base.BlobStore`."""

from citewise.blobstore.base import BlobStore, PresignedUpload

__all__ = ["BlobStore", "PresignedUpload"]
