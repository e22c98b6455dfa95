"""The private RabbitMQ node fixture says how to install rabbitmq-server when it is missing."""

from __future__ import annotations

import pytest
import rabbitmq_node
from rabbitmq_node import RabbitMQUnavailable, server_script


def test_a_missing_rabbitmq_server_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setattr(rabbitmq_node, "SCRIPTS", ())
    monkeypatch.setattr(rabbitmq_node, "WRAPPERS", ())
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RabbitMQUnavailable, match="apt-get install rabbitmq-server"):
        server_script()
