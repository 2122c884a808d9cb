"""A client that hangs up: sends one signed AWS request over a raw socket, stops at a chosen point, says "ready"
and waits there for the test to SIGKILL it.

``python hangup_client.py ENDPOINT SERVICE METHOD PATH TARGET BODY_FILE WHEN``; WHEN is ``mid-body`` (headers and
half the body sent, the rest never comes) or ``mid-answer`` (whole request sent, the first bytes of the answer
read, the rest left unread with a small receive buffer, so the server is still writing when the client dies).
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SET_HERE = frozenset({"host", "content-length"})


def signed_request(endpoint: str, service: str, method: str, path: str, target: str, body: bytes) -> bytes:
    headers = {"Content-Type": "application/x-amz-json-1.1"} if target else {}
    if target:
        headers["X-Amz-Target"] = target
    request = AWSRequest(method=method, url=endpoint + path, data=body or None, headers=headers)
    auth = S3SigV4Auth if service == "s3" else SigV4Auth
    auth(Credentials("testing", "testing"), service, "us-east-1").add_auth(request)
    prepared = request.prepare()
    host = urlsplit(endpoint).netloc
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in prepared.headers.items() if name.lower() not in SET_HERE]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def main() -> None:
    endpoint, service, method, path, target, body_file, when = sys.argv[1:8]
    body = Path(body_file).read_bytes() if body_file != "-" else b""
    head = signed_request(endpoint, service, method, path, target, body)
    parts = urlsplit(endpoint)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port))
    if when == "mid-body":
        sock.sendall(head + body[: len(body) // 2])
    else:
        sock.sendall(head + body)
        first = sock.recv(1024)
        assert first.startswith(b"HTTP/1.1 200"), first[:200]
    print("ready", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
