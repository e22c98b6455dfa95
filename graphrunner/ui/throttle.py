"""Failed logins slowed per client: password guessing gets `max_failures` tries a `window`.

A request whose credentials do not match counts as a failure for its client address; once an
address has `max_failures` failures within the last `window` seconds, every request from it that
needs a login is answered `429` with `Retry-After` (even one with the right password) until the
oldest of them is older than the window. A request without credentials (a browser's first, before
it asks for them) is not a failure. Kept in memory, for this process: a restart forgets it. Behind
a proxy every client has the proxy's address, so the proxy is what gets slowed.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_FAILURES = 10
WINDOW = 60.0  # seconds
MAX_CLIENTS = 10_000  # addresses remembered; the least recently failed are forgotten first


class LoginThrottle:
    """Failed logins by client address within a sliding window."""

    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> int | None:
        """Seconds until `client` may try again (at least 1), or None when it may now."""
        with self._lock:
            recent = self._recent(client)
            if recent is None or len(recent) < self.max_failures:
                return None
            return max(1, math.ceil(recent[0] + self.window - self.clock()))

    def failed(self, client: str) -> None:
        """Count a failed login from `client`."""
        with self._lock:
            recent = self._recent(client) or deque(maxlen=self.max_failures)
            recent.append(self.clock())
            self._failures[client] = recent
            self._failures.move_to_end(client)
            while len(self._failures) > MAX_CLIENTS:
                self._failures.popitem(last=False)

    def _recent(self, client: str) -> deque[float] | None:
        """`client`'s failures within the window (older ones dropped), None when there are none."""
        recent = self._failures.get(client)
        if recent is None:
            return None
        horizon = self.clock() - self.window
        while recent and recent[0] <= horizon:
            recent.popleft()
        if not recent:
            del self._failures[client]
            return None
        return recent
