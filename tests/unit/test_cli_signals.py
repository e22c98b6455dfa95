"""SIGINT, SIGTERM and SIGHUP as exceptions while a command runs (`graphrunner.cli.signals`)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import click
import pytest

from graphrunner.cli.signals import (
    Terminated,
    cancelled_on_signals,
    exit_code,
    exit_on_signals,
    how_stopped,
    signals_raised,
)


@pytest.fixture(autouse=True)
def own_handlers() -> Iterator[None]:
    """Whatever a test does to the handlers, the ones pytest had are back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def deliver(signum: int) -> None:
    """Send `signum` to this process: `os.kill` runs the handler before it returns."""
    os.kill(os.getpid(), signum)


@pytest.mark.parametrize(
    ("signum", "exc_type", "code", "word"),
    [
        (signal.SIGTERM, Terminated, 143, "terminated"),
        (signal.SIGHUP, Terminated, 129, "hung up"),
        (signal.SIGINT, KeyboardInterrupt, 130, "interrupted"),
    ],
)
def test_a_signal_raises_in_the_block(
    signum: int, exc_type: type[BaseException], code: int, word: str
) -> None:
    with pytest.raises(exc_type) as caught, signals_raised():
        deliver(signum)
    assert isinstance(caught.value, KeyboardInterrupt)
    assert exit_code(caught.value) == code
    assert how_stopped(caught.value) == word


def test_signals_after_the_first_are_ignored_until_the_block_ends() -> None:
    done: list[str] = []
    with pytest.raises(Terminated), signals_raised():
        try:
            deliver(signal.SIGTERM)
        finally:  # the clean-up: a second signal must not cut it short
            deliver(signal.SIGTERM)
            deliver(signal.SIGINT)
            done.append("cleaned up")
    assert done == ["cleaned up"]


def test_the_previous_handlers_are_restored() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with signals_raised():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_an_ignored_signal_stays_ignored() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    with signals_raised():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        deliver(signal.SIGHUP)
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_exit_on_signals_exits_with_128_plus_the_signal(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(click.exceptions.Exit) as caught, exit_on_signals():
        deliver(signal.SIGTERM)
    assert caught.value.exit_code == 143
    assert capsys.readouterr().err == "error: terminated\n"


def test_in_an_event_loop_a_signal_cancels_the_work_then_raises() -> None:
    cleaned: list[str] = []

    async def work() -> str:
        asyncio.get_running_loop().call_later(0.01, os.kill, os.getpid(), signal.SIGTERM)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            await asyncio.sleep(0)  # the clean-up may await
            deliver(signal.SIGTERM)  # a second signal does not cut it short
            cleaned.append("cleaned up")
            raise
        return "finished"

    with signals_raised():
        before = signal.getsignal(signal.SIGTERM)
        with pytest.raises(Terminated) as caught:
            asyncio.run(cancelled_on_signals(work()))
        assert signal.getsignal(signal.SIGTERM) is before
    assert caught.value.signum == signal.SIGTERM
    assert cleaned == ["cancelled", "cleaned up"]


def test_in_an_event_loop_without_a_signal_the_result_comes_back() -> None:
    async def work() -> str:
        await asyncio.sleep(0)
        return "finished"

    assert asyncio.run(cancelled_on_signals(work())) == "finished"
