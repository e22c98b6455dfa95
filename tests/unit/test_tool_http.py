"""The `http` tool against a real local HTTP server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from graphrunner.errors import ToolError
from graphrunner.tools.base import ToolContext
from graphrunner.tools.builtin.http import HttpTool

CONTEXT = ToolContext(run_id="r1", graph_id="g", node="n", step=1)
SLOW_SECONDS = 1.0


class Handler(BaseHTTPRequestHandler):
    """Canned answers by path."""

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""

    def reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        """Send one complete response."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Served-By", "test")
        self.end_headers()
        self.wfile.write(body)

    def reply_json(self, status: int, data: Any) -> None:
        """Send JSON."""
        self.reply(status, json.dumps(data).encode(), "application/json; charset=utf-8")

    def echo(self) -> None:
        """Answer with what was received."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode() if length else ""
        self.reply_json(
            200,
            {
                "method": self.command,
                "query": parse_qs(urlsplit(self.path).query),
                "body": raw,
                "content_type": self.headers.get("Content-Type"),
                "x_test": self.headers.get("X-Test"),
            },
        )

    def route(self) -> None:
        """Dispatch on the path."""
        path = urlsplit(self.path).path
        if path == "/json":
            self.reply_json(200, {"ok": True, "items": [1, 2]})
        elif path == "/text":
            self.reply(200, b"hello")
        elif path == "/bad-json":
            self.reply(200, b"{not json", "application/json")
        elif path == "/problem":
            self.reply(200, b'{"title": "x"}', "application/problem+json")
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/json")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/missing":
            self.reply(404, b"no such thing")
        elif path == "/error":
            self.reply(500, b"boom")
        elif path == "/busy":
            self.reply(429, b"slow down")
        elif path == "/slow":
            time.sleep(SLOW_SECONDS)
            self.reply(200, b"late")
        else:
            self.echo()

    do_GET = do_POST = do_PUT = do_DELETE = route


class QuietServer(ThreadingHTTPServer):
    """A server that does not print the broken pipes of abandoned requests."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore handler errors (clients that gave up)."""


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1, port chosen by the OS."""
    server = QuietServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def run(params: dict[str, Any], context: ToolContext = CONTEXT) -> Any:
    """Run the tool to completion."""
    return asyncio.run(HttpTool().run(params, context))


def error_of(params: dict[str, Any], context: ToolContext = CONTEXT) -> ToolError:
    """The ToolError the tool raises for `params`."""
    with pytest.raises(ToolError) as info:
        run(params, context)
    return info.value


def test_get_json(base_url: str) -> None:
    result = run({"url": f"{base_url}/json"})
    assert set(result) == {"status", "headers", "data", "success", "duration_ms"}
    assert result["status"] == 200
    assert result["data"] == {"ok": True, "items": [1, 2]}
    assert result["success"] is True
    assert result["headers"]["x-served-by"] == "test"
    assert all(name == name.lower() for name in result["headers"])
    assert isinstance(result["duration_ms"], int)


def test_get_text(base_url: str) -> None:
    result = run({"url": f"{base_url}/text"})
    assert (result["status"], result["data"]) == (200, "hello")


def test_json_content_type_that_does_not_parse_is_text(base_url: str) -> None:
    assert run({"url": f"{base_url}/bad-json"})["data"] == "{not json"


def test_plus_json_content_type_is_parsed(base_url: str) -> None:
    assert run({"url": f"{base_url}/problem"})["data"] == {"title": "x"}


def test_post_json_is_echoed(base_url: str) -> None:
    result = run({"method": "post", "url": f"{base_url}/echo", "json": {"a": [1, "b"]}})
    data = result["data"]
    assert data["method"] == "POST"
    assert json.loads(data["body"]) == {"a": [1, "b"]}
    assert data["content_type"] == "application/json"


def test_body_headers_and_query(base_url: str) -> None:
    result = run(
        {
            "method": "PUT",
            "url": f"{base_url}/echo",
            "body": "raw text",
            "headers": {"X-Test": "yes", "Content-Type": "text/plain"},
            "params": {"q": "a b", "n": 2, "tags": ["x", "y"]},
        }
    )
    data = result["data"]
    assert (data["method"], data["body"], data["x_test"]) == ("PUT", "raw text", "yes")
    assert data["query"] == {"q": ["a b"], "n": ["2"], "tags": ["x", "y"]}


def test_redirects_are_followed_by_default(base_url: str) -> None:
    assert run({"url": f"{base_url}/redirect"})["data"] == {"ok": True, "items": [1, 2]}


def test_redirects_not_followed(base_url: str) -> None:
    result = run({"url": f"{base_url}/redirect", "follow_redirects": False})
    assert (result["status"], result["success"]) == (302, True)
    assert result["headers"]["location"] == "/json"


@pytest.mark.parametrize(
    ("path", "status", "classification"),
    [("/missing", 404, "permanent"), ("/error", 500, "transient"), ("/busy", 429, "transient")],
)
def test_error_status_with_check(base_url: str, path: str, status: int, classification: str) -> None:
    url = f"{base_url}{path}"
    err = error_of({"url": url, "method": "delete"})
    assert (err.classification, err.error_type) == (classification, f"HTTP{status}")
    assert "DELETE" in str(err)
    assert url in str(err)
    assert str(status) in str(err)


@pytest.mark.parametrize(("path", "status"), [("/missing", 404), ("/error", 500), ("/busy", 429)])
def test_error_status_without_check(base_url: str, path: str, status: int) -> None:
    result = run({"url": f"{base_url}{path}", "check": False})
    assert (result["status"], result["success"]) == (status, False)


def test_remote_timeout(base_url: str) -> None:
    started = time.monotonic()
    err = error_of({"url": f"{base_url}/slow", "timeout": 0.2})
    assert time.monotonic() - started < SLOW_SECONDS
    assert (err.classification, err.error_type) == ("transient", "RemoteTimeout")


def test_context_timeout_applies(base_url: str) -> None:
    context = ToolContext(run_id="r1", graph_id="g", node="n", step=1, timeout=0.2)
    started = time.monotonic()
    err = error_of({"url": f"{base_url}/slow", "timeout": 10}, context)
    assert time.monotonic() - started < SLOW_SECONDS
    assert err.error_type == "RemoteTimeout"


def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = error_of({"url": f"http://127.0.0.1:{port}/"})
    assert (err.classification, err.error_type) == ("transient", "ConnectionError")


@pytest.mark.parametrize("url", ["ftp://example.com/file", "not a url", "http://[::1/x"])
def test_bad_url_is_validation(url: str) -> None:
    err = error_of({"url": url})
    assert err.classification == "validation"


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({}, "url"),
        ({"url": "http://x", "bogus": 1}, "bogus"),
        ({"url": "http://x", "json": {}, "body": "x"}, "not both"),
        ({"url": "http://x", "method": "GE T"}, "method"),
        ({"url": "http://x", "params": {"a": {"nested": 1}}}, "params"),
        ({"url": "http://x", "timeout": -1}, "timeout"),
    ],
)
def test_bad_params_are_validation(params: dict[str, Any], needle: str) -> None:
    err = error_of(params)
    assert (err.classification, err.error_type) == ("validation", "InvalidParams")
    assert needle in str(err)
