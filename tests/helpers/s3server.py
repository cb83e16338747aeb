"""A real S3 protocol server on loopback for tests and benchmarks: moto's server mode.

``S3Server`` starts moto in a child process on 127.0.0.1 (a free port), creates a bucket,
and counts the requests it serves by method, so a test or benchmark can say how many PUT, GET,
HEAD, LIST and DELETE requests an operation cost. Requests are served one at a time: moto
checks a condition (``If-None-Match``, ``If-Match``) and then writes in two steps, which a
real provider does atomically; serializing them gives the same atomicity.

Run as a script (``python s3server.py``) it serves until killed, printing its port.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
COUNTS_PATH = "/_snapstore_counts"


def classify(method: str, path: str, query: str) -> str:
    """What an S3 request is, for counting: PUT, GET, HEAD, LIST, DELETE or POST."""
    if method == "GET" and ("list-type" in query or path.rstrip("/").count("/") <= 1):
        return "LIST"
    return method


class _Serialized:
    """A WSGI app run one request at a time, counting requests by kind."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == COUNTS_PATH:
            body = json.dumps(self.counts).encode()
            if environ["REQUEST_METHOD"] == "DELETE":
                self.counts.clear()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        with self.lock:
            kind = classify(environ["REQUEST_METHOD"], path, environ.get("QUERY_STRING", ""))
            self.counts[kind] += 1
            result = self.app(environ, start_response)
            try:
                return list(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


def serve(port: int) -> None:
    """Serve moto's S3 on 127.0.0.1:``port`` (0: any free port) until killed."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = _Serialized(DomainDispatcherApplication(create_backend_app))
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", port, app, threaded=True)
    print(server.server_port, flush=True)
    server.serve_forever()


class S3Server:
    """moto in a child process, with a bucket; ``endpoint`` is its URL. ``min_part_bytes``
    lowers the smallest part a multipart upload accepts (S3's is 5 MiB), so tests can send
    objects in several parts without sending megabytes."""

    def __init__(
        self, bucket: str = "snapstore-test", *, min_part_bytes: int | None = None
    ) -> None:
        self.bucket = bucket
        env = {**os.environ, **CREDENTIALS}
        if min_part_bytes is not None:
            env["S3_UPLOAD_PART_MIN_SIZE"] = str(min_part_bytes)
            env["MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"] = str(16 << 20)
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            self.process.kill()
            raise RuntimeError("the moto server did not start")
        self.port = int(line)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.make_bucket(bucket)

    def env(self) -> dict[str, str]:
        """The environment a client (or a child process) needs to reach this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def url(self, prefix: str) -> str:
        """The store URL of ``prefix`` in the bucket."""
        return f"s3://{self.bucket}/{prefix}"

    def make_bucket(self, bucket: str) -> None:
        """Create a bucket (anonymous requests are accepted by moto)."""
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(request, timeout=10).close()
                return
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def counts(self, *, reset: bool = False) -> Counter[str]:
        """Requests served since the last reset, by kind."""
        method = "DELETE" if reset else "GET"
        request = urllib.request.Request(self.endpoint + COUNTS_PATH, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return Counter(json.loads(response.read()))

    @contextlib.contextmanager
    def counting(self) -> Iterator[Counter[str]]:
        """Count the requests of the block: the counter is filled in when it ends."""
        self.counts(reset=True)
        found: Counter[str] = Counter()
        yield found
        found.update(self.counts())

    def stop(self) -> None:
        """Stop the server."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
