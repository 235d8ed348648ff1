"""The object-storage adapter: segments and other immutable files in an S3 bucket (the ``s3`` extra)."""
