"""A real S3-compatible server for tests: moto's, in a thread on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def s3_bucket() -> Iterator[tuple[str, dict[str, Any]]]:
    """(s3:// URL of a new empty bucket, the storage options that reach it: LanceDB's keys). Moto's
    servers in one process share their state, so every call gets a bucket of its own."""
    import uuid

    import boto3
    from moto.server import ThreadedMotoServer

    bucket = f"ragstack-{uuid.uuid4().hex[:12]}"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        options = {
            "aws_endpoint": endpoint,
            "aws_access_key_id": "test",
            "aws_secret_access_key": "test",
            "aws_region": "us-east-1",
            "allow_http": "true",
        }
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        ).create_bucket(Bucket=bucket)
        yield f"s3://{bucket}", options
    finally:
        server.stop()


@contextmanager
def s3_storage() -> Iterator[dict[str, Any]]:
    """The `storage` config section that puts LanceDB and the lexical snapshots in a new bucket
    (replicas poll every 0.2 s)."""
    with s3_bucket() as (url, options):
        yield {
            "lancedb_uri": f"{url}/lancedb",
            "options": options,
            "lexical_snapshots": f"{url}/lexical",
            "snapshot_poll_s": 0.2,
        }
