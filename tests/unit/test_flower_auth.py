"""Flower's guard without a Flower: credentials as bytes, loopback names, and which routes only read."""

from __future__ import annotations

import base64

import pytest

from graphrunner.basic_auth import is_loopback_host, is_loopback_ip
from graphrunner.cli.flower_auth import (
    READ_ONLY,
    FlowerAuthError,
    basic_credential_ok,
    check_options,
    read_only_route,
)

# Flower's routes that change the cluster: refused unless --allow-control (Flower 2.2's urls.py)
CONTROL = {
    "flower.api.control.WorkerShutDown",
    "flower.api.control.WorkerPoolRestart",
    "flower.api.control.WorkerPoolGrow",
    "flower.api.control.WorkerPoolShrink",
    "flower.api.control.WorkerPoolAutoscale",
    "flower.api.control.WorkerQueueAddConsumer",
    "flower.api.control.WorkerQueueCancelConsumer",
    "flower.api.control.TaskRevoke",
    "flower.api.control.TaskTimout",
    "flower.api.control.TaskRateLimit",
    "flower.api.tasks.TaskApply",
    "flower.api.tasks.TaskAsyncApply",
    "flower.api.tasks.TaskSend",
    "flower.api.tasks.TaskAbort",
}
OPEN = {"flower.views.auth.LoginHandler", "flower.views.auth.LogoutHandler", "tornado.web.StaticFileHandler"}


def basic(credential: bytes) -> str:
    return "Basic " + base64.b64encode(credential).decode()


def flower_routes() -> dict[str, type]:
    from flower.urls import handlers

    kinds = [getattr(route, "handler_class", None) or route[1] for route in handlers]
    return {f"{k.__module__}.{k.__qualname__}": k for k in kinds}


def test_every_flower_route_is_classified() -> None:
    """A Flower that adds a route fails here: say whether it only reads (it is refused until then)."""
    assert set(flower_routes()) == set(READ_ONLY) | CONTROL | OPEN


def test_control_routes_are_refused_and_read_routes_only_read() -> None:
    routes = flower_routes()
    for name in CONTROL:
        for method in ("POST", "GET", "PUT", "DELETE", "PATCH", "OPTIONS"):
            assert not read_only_route(routes[name], method), (name, method)
    for name in READ_ONLY:
        assert read_only_route(routes[name], "GET")
        assert not read_only_route(routes[name], "DELETE")
    assert read_only_route(routes["flower.views.tasks.TasksDataTable"], "POST")
    assert not read_only_route(routes["flower.api.tasks.ListTasks"], "POST")
    assert read_only_route(routes["flower.views.auth.LogoutHandler"], "GET")


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        (basic(b"ops:pw"), True),
        (basic(b"dev:p:w"), True),  # a colon in the password
        (basic("ana:pässwörd".encode()), True),  # a non-ASCII password, as UTF-8
        ("basic " + base64.b64encode(b"ops:pw").decode(), True),
        (basic(b"ops:pw2"), False),
        (basic("ops:pä".encode()), False),
        (basic("ana:pässwörd".encode("latin-1")), False),  # not UTF-8
        (basic(b"opspw"), False),  # no colon
        (basic(b""), False),
        ("Basic ZGV2OnA6dw", False),  # dev:p:w, its padding missing
        ("Basic @@@", False),
        ("Basic é", False),  # a non-ASCII header
        ("Bearer " + base64.b64encode(b"ops:pw").decode(), False),
        ("", False),
    ],
)
def test_basic_credentials_compare_as_bytes(header: str, ok: bool) -> None:
    assert basic_credential_ok(header, ["ops:pw", "dev:p:w", "ana:pässwörd"]) is ok


def test_loopback_is_an_ip_for_the_address_and_a_name_or_ip_for_the_host() -> None:
    assert all(is_loopback_ip(a) for a in ("127.0.0.1", "127.8.9.10", "::1"))
    assert not any(
        is_loopback_ip(a) for a in ("127.evil.example", "localhost", "10.0.0.5", "0.0.0.0", "::", "")
    )
    assert all(is_loopback_host(h) for h in ("localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "[::1]"))
    assert not any(
        is_loopback_host(h) for h in ("rebound.example", "127.0.0.1.nip.io", "localhost.", "[::]", "")
    )


@pytest.mark.usefixtures("flower_options")
@pytest.mark.parametrize(
    ("args", "no_auth", "message"),
    [
        (["--basic-auth=ops:change-me"], False, "placeholder"),
        (["--basic-auth=ops:real,dev:CHANGEME"], False, "placeholder"),
        (["--basic-auth=ops:real"], True, "not both"),
        (["--address=127.evil.example"], True, "loopback IP only"),
        (["--address=0.0.0.0"], True, "loopback IP only"),
    ],
)
def test_flower_options_refused(args: list[str], no_auth: bool, message: str) -> None:
    with pytest.raises(FlowerAuthError, match=message):
        check_options(args, no_auth=no_auth)


@pytest.mark.usefixtures("flower_options")
def test_no_auth_on_ipv6_loopback() -> None:
    assert check_options(["--address=::1"], no_auth=True) == ["--address=::1"]
