"""An OTLP/HTTP sink for `benchmarks.steps --otel`: takes what the workers export and keeps
nothing but counts, as a collector's receiver would take it, in a process of its own.

    python -m benchmarks.otlp_sink PORT     # answers POST /v1/traces and /v1/metrics on 127.0.0.1:PORT
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

received = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    """Reads the body, answers 200 with an empty protobuf answer."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        received["requests"] += 1
        received["bytes"] += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # the bench reads what was received
        text = f"{received['requests']} {received['bytes']}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink)
    server.serve_forever()


if __name__ == "__main__":
    main()
