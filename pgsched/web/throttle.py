"""Sign-in throttling: too many failed sign-ins for one username or from one client address
within a window, and the next attempt is refused (429 with ``Retry-After``) before any
password is hashed.

An attempt counts as a failure from the moment it is let through until it succeeds (a
success takes its own count back, and clears the username's): a flood of parallel guesses
is throttled as it arrives, not only once the first of them has been hashed and refused.
An attempt refused because hashing was busy still counts against its address, not its
username.

The state is per web process and in memory (several web processes each allow the limit,
and a restart forgets it); it is bounded: at most ``max_keys`` usernames and as many
addresses are remembered, the least recently failed forgotten first, so an attacker
rotating usernames cannot grow it. Each key holds at most its limit of instants. The
window runs on :func:`time.monotonic`: it decides nothing that is stored, only whether
this process answers now.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass(frozen=True)
class Limit:
    """At most ``failures`` failed attempts within ``window`` seconds."""

    failures: int
    window: float


class _Counter:
    """Failure instants per key (a username or an address), at most ``limit.failures`` each,
    for at most ``max_keys`` keys (least recently failed evicted first)."""

    def __init__(self, limit: Limit, max_keys: int):
        self.limit = limit
        self.max_keys = max_keys
        self.keys: OrderedDict[str, deque[float]] = OrderedDict()

    def wait(self, key: str, now: float) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        times = self.keys.get(key)
        if times is None:
            return 0.0
        while times and times[0] <= now - self.limit.window:
            times.popleft()
        if not times:
            del self.keys[key]
            return 0.0
        if len(times) < self.limit.failures:
            return 0.0
        return times[0] + self.limit.window - now

    def add(self, key: str, now: float) -> None:
        times = self.keys.get(key)
        if times is None:
            times = self.keys[key] = deque(maxlen=self.limit.failures)
            while len(self.keys) > self.max_keys:
                self.keys.popitem(last=False)
        else:
            self.keys.move_to_end(key)
        times.append(now)

    def take_back(self, key: str, instant: float) -> None:
        times = self.keys.get(key)
        if times is not None:
            try:
                times.remove(instant)
            except ValueError:  # already past the window, or evicted by newer failures
                pass

    def clear(self, key: str) -> None:
        self.keys.pop(key, None)


class Attempt:
    """One sign-in let through: :meth:`succeeded` takes its failure back."""

    def __init__(self, throttle: SignInThrottle, address: str, username: str, at: float):
        self._throttle, self._address, self._username, self._at = throttle, address, username, at

    def succeeded(self) -> None:
        """The sign-in succeeded: its failure is taken back, the username's forgotten."""
        self._throttle._take_back(self._address, self._username, self._at, clear=True)

    def withdrawn(self) -> None:
        """The password was not checked after all (hashing was busy): the username's count
        is taken back (nobody locks a user out by sending sign-ins at a busy moment), the
        address's kept (it did send them)."""
        self._throttle._take_back("", self._username, self._at, clear=False)


class SignInThrottle:
    """Limits failed sign-ins per username (``per_user``) and per client address
    (``per_address``); ``max_keys`` usernames and addresses remembered at most each.
    Thread-safe (sign-ins run in Starlette's thread pool)."""

    def __init__(
        self,
        per_user: Limit = Limit(5, 300.0),
        per_address: Limit = Limit(20, 60.0),
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._users = _Counter(per_user, max_keys)
        self._addresses = _Counter(per_address, max_keys)
        self._clock = clock
        self._lock = threading.Lock()

    def attempt(self, address: str, username: str = "") -> Attempt | int:
        """Let an attempt from ``address`` for ``username`` ("" for a token) through, counted
        as failed until :meth:`Attempt.succeeded`; or, when a limit is reached, the whole
        seconds to wait (at least 1: what ``Retry-After`` says)."""
        username = username[:200]
        with self._lock:
            now = self._clock()
            wait = self._addresses.wait(address, now)
            if username:
                wait = max(wait, self._users.wait(username, now))
            if wait > 0:
                return max(1, math.ceil(wait))
            self._addresses.add(address, now)
            if username:
                self._users.add(username, now)
            return Attempt(self, address, username, now)

    def address_wait(self, address: str) -> int:
        """Whole seconds before ``address`` may try again (0: now), counting nothing."""
        with self._lock:
            wait = self._addresses.wait(address, self._clock())
        return max(1, math.ceil(wait)) if wait > 0 else 0

    def _take_back(self, address: str, username: str, at: float, *, clear: bool) -> None:
        with self._lock:
            if address:
                self._addresses.take_back(address, at)
            if username and clear:
                self._users.clear(username)
            elif username:
                self._users.take_back(username, at)

    def remembered(self) -> tuple[int, int]:
        """How many ``(usernames, addresses)`` are remembered now (bounded by ``max_keys``)."""
        with self._lock:
            return len(self._users.keys), len(self._addresses.keys)


class SignInGate:
    """ASGI middleware in front of the sessions: a sign-in (``POST /login``, or ``GET
    /login`` with a token) from an address over its limit is answered 429 with
    ``Retry-After`` at once, before its body is read, its session looked up or a page
    rendered; everything else goes on to ``app``."""

    def __init__(self, app: ASGIApp, *, throttle: SignInThrottle):
        self.app = app
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/login":
            signing_in = scope["method"] == "POST" or b"token=" in scope.get("query_string", b"")
            client = scope.get("client")
            wait = self.throttle.address_wait(client[0] if client else "") if signing_in else 0
            if wait:
                body = (
                    f"429: too many failed sign-ins from this address; try again in {wait} s."
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 429,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(wait).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
