"""The object storage fixtures of tests/repo, for the chunked files stored on S3."""

from repo.conftest import s3_cache, s3_server, s3_url

__all__ = ["s3_cache", "s3_server", "s3_url"]
