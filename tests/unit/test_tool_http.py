"""The `http` tool against a real local HTTP server, and its address policy.

Names resolve through a stub (`resolved`), and every connection is checked to be to loopback
(`connected`): no test sends traffic anywhere else, refused targets included.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpcore
import pytest

from graphrunner import Graph
from graphrunner.errors import ConfigurationError, ToolError
from graphrunner.settings import Settings
from graphrunner.tools import ToolPolicy
from graphrunner.tools.addresses import AddressPolicy, judged_addresses, literal_address
from graphrunner.tools.base import ToolContext
from graphrunner.tools.builtin import pinned
from graphrunner.tools.builtin.http import MAX_REDIRECTS, HttpTool

CONTEXT = ToolContext(run_id="r1", graph_id="g", node="n", step=1)
SLOW_SECONDS = 1.0
REDIRECTS = {
    "/redirect": "/json",
    "/loop": "/loop",
    "/to-metadata": "http://169.254.169.254/latest/meta-data/",
}


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
                "host": self.headers.get("Host"),
            },
        )

    def redirect_target(self, path: str) -> str | None:
        """Where `path` redirects to, or None; `/to/HOST/PATH` is `http://HOST:<this port>/PATH`."""
        if path.startswith("/to/"):
            host, _, rest = path.removeprefix("/to/").partition("/")
            return f"http://{host}:{self.server.server_address[1]}/{rest}"
        return REDIRECTS.get(path)

    def redirect(self, location: str) -> None:
        """Send a 302 to `location`."""
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

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
        elif (location := self.redirect_target(path)) is not None:
            self.redirect(location)
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


# What the stub resolver answers; any other name does not resolve (the suite never asks a real DNS).
NAMES = {
    "svc.example": ["127.0.0.1"],
    "metadata.example": ["169.254.169.254"],
    "mixed.example": ["127.0.0.1", "169.254.169.254"],
    "mapped.example": ["::ffff:169.254.169.254"],
}


@pytest.fixture(autouse=True)
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stub the http tool's resolver with `NAMES`; the names it was asked for, in order."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        if host not in NAMES:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not a name in this test")
        return NAMES[host]

    monkeypatch.setattr(pinned, "resolve", resolve)
    return asked


@pytest.fixture(autouse=True)
def connected(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses the tool opened connections to; connecting anywhere but loopback fails the test."""
    addresses: list[str] = []
    connect = httpcore.AnyIOBackend.connect_tcp

    async def guarded(self: httpcore.AnyIOBackend, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        addresses.append(host)
        assert ipaddress.ip_address(host).is_loopback, f"the test connected to {host}"
        return await connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", guarded)
    return addresses


def with_policy(allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> ToolContext:
    """The test context with the `http` tool's allow and deny lists."""
    return replace(CONTEXT, policy=ToolPolicy(http=AddressPolicy.parse(allow, deny)))


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


def port_of(base_url: str) -> int:
    """The test server's port."""
    return int(base_url.rsplit(":", 1)[1])


def test_a_name_is_connected_at_the_address_it_resolved_to(
    base_url: str, resolved: list[str], connected: list[str]
) -> None:
    url = f"http://svc.example:{port_of(base_url)}/echo"
    assert run({"url": url})["data"]["host"] == f"svc.example:{port_of(base_url)}"
    assert (resolved, connected) == (["svc.example"], ["127.0.0.1"])


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://metadata.example/latest/meta-data/", "host 'metadata.example' at 169.254.169.254"),
        ("http://169.254.169.254/latest/meta-data/", "address 169.254.169.254"),
        ("http://2852039166/", "address 169.254.169.254"),  # the decimal form of it
        ("http://0xa9.0xfe.0xa9.0xfe/", "address 169.254.169.254"),
        ("http://[::ffff:169.254.169.254]/", "it carries 169.254.169.254, link-local"),
        ("http://mapped.example/", "it carries 169.254.169.254, link-local"),
        ("http://[64:ff9b::a9fe:a9fe]/", "it carries 169.254.169.254, link-local"),  # NAT64
        ("http://[fe80::1]/", "address fe80::1: link-local (fe80::/10)"),
        ("http://[fd00:ec2::254]/", "AWS instance metadata"),
        ("http://mixed.example/", "host 'mixed.example' at 169.254.169.254"),
        ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata name"),
        ("http://Metadata.Google.Internal./", "cloud metadata name"),
        ("http://0.0.0.0:1/", "reaches the worker itself"),
    ],
)
def test_link_local_and_metadata_are_refused_before_any_connection(
    url: str, needle: str, connected: list[str]
) -> None:
    err = error_of({"url": url})
    assert (err.classification, err.error_type) == ("permanent", "AddressRefused")
    assert str(err).startswith(f"tool 'http': GET {url} refused: ")
    assert needle in str(err)
    assert "refused always" in str(err)
    assert connected == []


def test_a_metadata_name_is_refused_without_resolving_it(resolved: list[str]) -> None:
    error_of({"url": "http://metadata.google.internal/"})
    assert resolved == []


@pytest.mark.parametrize(
    "path", ["/to/metadata.example/latest/meta-data/", "/to-metadata", "/to/169.254.169.254/"]
)
def test_a_redirect_to_a_refused_address_is_refused(base_url: str, path: str, connected: list[str]) -> None:
    err = error_of({"url": f"{base_url}{path}"})
    assert (err.classification, err.error_type) == ("permanent", "AddressRefused")
    assert "refused at its redirect to http://" in str(err)
    assert "169.254.169.254: link-local (169.254.0.0/16" in str(err)
    assert set(connected) == {"127.0.0.1"}


def test_a_redirect_to_an_allowed_name_is_followed(base_url: str, connected: list[str]) -> None:
    result = run({"url": f"{base_url}/to/svc.example/json"})
    assert result["data"] == {"ok": True, "items": [1, 2]}
    assert connected == ["127.0.0.1", "127.0.0.1"]  # one connection per origin


def test_a_redirect_not_followed_is_not_checked(base_url: str) -> None:
    result = run({"url": f"{base_url}/to-metadata", "follow_redirects": False})
    assert (result["status"], result["headers"]["location"]) == (
        302,
        "http://169.254.169.254/latest/meta-data/",
    )


def test_redirects_are_bounded(base_url: str, connected: list[str]) -> None:
    err = error_of({"url": f"{base_url}/loop"})
    assert (err.classification, err.error_type) == ("permanent", "TooManyRedirects")
    assert f"more than {MAX_REDIRECTS} redirects" in str(err)


@pytest.mark.parametrize(
    ("deny", "url_host", "entry"),
    [
        (("127.0.0.0/8",), "127.0.0.1", "'127.0.0.0/8'"),
        (("127.0.0.1",), "svc.example", "'127.0.0.1'"),
        (("::ffff:127.0.0.0/104",), "127.0.0.1", "'::ffff:127.0.0.0/104'"),
        (("*.EXAMPLE",), "svc.example", "'*.example'"),
    ],
)
def test_the_deny_list_refuses_hosts_and_networks(
    base_url: str, deny: tuple[str, ...], url_host: str, entry: str, connected: list[str]
) -> None:
    err = error_of({"url": f"http://{url_host}:{port_of(base_url)}/json"}, with_policy(deny=deny))
    assert err.error_type == "AddressRefused"
    assert f"matches GRAPHRUNNER_HTTP_DENY entry {entry}" in str(err)
    assert connected == []


def test_a_denied_host_pattern_is_refused_without_resolving_it(base_url: str, resolved: list[str]) -> None:
    error_of({"url": f"http://svc.example:{port_of(base_url)}/"}, with_policy(deny=("svc.*",)))
    assert resolved == []


def test_the_allow_list_admits_only_what_it_names(base_url: str, connected: list[str]) -> None:
    port = port_of(base_url)
    by_name = with_policy(allow=("svc.example",))
    assert run({"url": f"http://svc.example:{port}/json"}, by_name)["status"] == 200
    err = error_of({"url": f"http://127.0.0.1:{port}/json"}, by_name)
    assert err.error_type == "AddressRefused"
    assert "address 127.0.0.1: matches no GRAPHRUNNER_HTTP_ALLOW entry" in str(err)
    by_network = with_policy(allow=("127.0.0.0/8",))
    assert run({"url": f"http://svc.example:{port}/json"}, by_network)["status"] == 200
    assert connected == ["127.0.0.1", "127.0.0.1"]


def test_deny_wins_over_allow_and_nothing_lifts_the_metadata_refusal(base_url: str) -> None:
    context = with_policy(allow=("*", "169.254.0.0/16"), deny=("svc.example",))
    assert (
        error_of({"url": f"http://svc.example:{port_of(base_url)}/"}, context).error_type == "AddressRefused"
    )
    err = error_of({"url": "http://metadata.example/"}, context)
    assert "refused always" in str(err)


@pytest.mark.parametrize(
    ("allow", "deny", "needle"),
    [((), ("10.0.0.0/33",), "GRAPHRUNNER_HTTP_DENY: '10.0.0.0/33'"), (("api.example:443",), (), "ALLOW")],
)
def test_an_entry_that_is_no_host_or_network_is_a_configuration_error(
    allow: tuple[str, ...], deny: tuple[str, ...], needle: str
) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        ToolPolicy.from_settings(Settings(http_allow=allow, http_deny=deny))


def test_a_run_gets_the_lists_of_its_settings(
    base_url: str, graph_of: Callable[[str], Graph], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHRUNNER_HTTP_DENY", "127.0.0.0/8")
    graph = graph_of(
        f"""
        id: http/denied
        config: {{start: get}}
        nodes:
          get: {{action: {{tool: http, params: {{url: "{base_url}/json"}}}}}}
        """
    )
    result = graph.invoke_sync(capabilities=["tool:http"])
    assert result.status == "failed"
    assert result.error is not None and "GRAPHRUNNER_HTTP_DENY entry '127.0.0.0/8'" in result.error.message


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("svc.example", None),
        ("1.example", None),
        ("cafe", None),
    ],
)
def test_literal_addresses_in_every_form_the_resolver_reads(host: str, address: str | None) -> None:
    found = literal_address(host)
    assert (None if found is None else str(found)) == address


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("::ffff:10.0.0.1", "10.0.0.1"),
        ("64:ff9b::a00:1", "10.0.0.1"),
        ("2002:a00:1::1", "10.0.0.1"),
        ("::a00:1", "10.0.0.1"),
        ("::1", None),
        ("2001:db8::1", None),
    ],
)
def test_an_ipv6_address_is_judged_with_the_ipv4_one_it_carries(address: str, carried: str | None) -> None:
    ip = ipaddress.ip_address(address)
    assert judged_addresses(ip) == (ip,) + (() if carried is None else (ipaddress.ip_address(carried),))


@pytest.fixture(scope="module")
def tls_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, list[str]]]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate for `svc.example`: its URL
    by that name, the certificate, and the server names (SNI) clients sent."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1", "-keyout", str(key), "-out", str(cert)),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-subj", "/CN=svc.example", "-addext", "subjectAltName=DNS:svc.example"),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    names: list[str] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)
    server = QuietServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://svc.example:{server.server_address[1]}", cert, names
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_tls_checks_the_name_while_connecting_to_the_pinned_address(
    tls_url: tuple[str, Path, list[str]], connected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cert, names = tls_url
    monkeypatch.setattr(pinned, "_ssl_context", lambda: ssl.create_default_context(cafile=str(cert)))
    result = run({"url": f"{url}/echo"})
    assert result["data"]["host"] == url.removeprefix("https://")
    assert (names[-1], connected) == ("svc.example", ["127.0.0.1"])
    err = error_of({"url": url.replace("svc.example", "127.0.0.1") + "/echo"})
    assert err.error_type == "ConnectionError"  # the certificate is svc.example's, not 127.0.0.1's
    assert "CERTIFICATE_VERIFY_FAILED" in str(err)
