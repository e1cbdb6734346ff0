"""S3 through boto3: the client and its settings, conditional writes, uploads streamed in
parts, and botocore's errors translated into ours once."""
