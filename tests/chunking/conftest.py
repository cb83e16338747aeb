"""The object storage fixtures of tests/backend/s3, for the chunked files stored on S3."""

from backend.s3.conftest import s3_cache, s3_server, s3_url

__all__ = ["s3_cache", "s3_server", "s3_url"]
