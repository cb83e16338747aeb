"""The S3 backend: a store in a bucket, with conditional writes for commits and leases for
locks. Its client helpers (``client``) depend on nothing above them; boto3 is imported only
when a bucket store is opened."""
