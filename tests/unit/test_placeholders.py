"""Servers refuse the example files' placeholder passwords at start (issue 24)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from graphrunner.cli import main
from graphrunner.placeholders import is_placeholder, url_password


@pytest.mark.parametrize("command", [["worker"], ["beat"]])
@pytest.mark.parametrize("password", ["change-me", "CHANGE-ME", "changeme"])
def test_worker_and_beat_refuse_a_redis_password_left_at_the_placeholder(
    command: list[str], password: str
) -> None:
    env = {"GRAPHRUNNER_REDIS_URL": f"redis://:{password}@127.0.0.1:1/0"}
    result = CliRunner().invoke(main, command, env=env)
    assert result.exit_code == 2, result.output
    assert "GRAPHRUNNER_REDIS_URL still holds the example password" in result.stderr


def test_placeholders_are_recognised_and_real_secrets_are_not() -> None:
    assert url_password("redis://:change%2Dme@redis:6379/0") == "change-me"
    assert url_password("redis://redis:6379/0") == "" and url_password("redis://[bad") == ""
    assert is_placeholder(" Change-Me ") and not is_placeholder("kH3v-change-me-9x")
