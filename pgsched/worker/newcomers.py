"""Tenants to claim for at once (:class:`Newcomers`): named by ``pgsched_execution``
notifications while the worker's buffer holds nothing of theirs.

Beside another tenant's flood a worker's buffer is full, and it claims again only when half
its prefetch has drained; a run of a tenant it holds nothing of would wait for that. The
claimer instead claims one row of that tenant alone, at once (the buffer's round then
starts it at the next free slot: :func:`pgsched.worker.holdings.buffer_in_order`). Any
login may NOTIFY (docs/security.md), so the names are bounded: at most one such claim per
``GAP`` seconds, at most ``KEPT`` names waiting, and a tenant whose claim took nothing is
not asked again for a poll interval (its work is claimed the usual way meanwhile). Pure:
times are ``time.monotonic()`` seconds passed in.
"""

from __future__ import annotations

GAP = 0.05  # seconds between claims for newcomers
KEPT = 64  # names kept waiting at most


class Newcomers:
    """The names waiting, in the order they came; ``quiet_for``: seconds a tenant whose
    claim took nothing is left alone (the worker's poll interval)."""

    def __init__(self, quiet_for: float) -> None:
        self.quiet_for = quiet_for
        self._waiting: dict[str, None] = {}
        self._quiet: dict[str, float] = {}  # tenant -> when it may be asked again
        self.last = float("-inf")  # when the last newcomer's claim was sent

    def __len__(self) -> int:
        return len(self._waiting)

    def wants(self, tenant: str, now: float) -> bool:
        """Whether a notification naming ``tenant`` may make it a newcomer (it is not
        waiting already, not left alone, and there is room)."""
        return (
            bool(tenant)
            and tenant not in self._waiting
            and len(self._waiting) < KEPT
            and self._quiet.get(tenant, float("-inf")) <= now
        )

    def add(self, tenant: str) -> None:
        self._waiting[tenant] = None

    def clear(self) -> None:
        """A claim of the usual kind is going out: the fair share takes them in turn."""
        self._waiting.clear()

    def take(self, now: float) -> str | None:
        """The next tenant to claim one row of now, or None (none waiting, or within GAP of
        the last such claim)."""
        if not self._waiting or now < self.last + GAP:
            return None
        tenant = next(iter(self._waiting))
        del self._waiting[tenant]
        self.last = now
        return tenant

    def found_nothing(self, tenant: str, now: float) -> None:
        """``tenant``'s claim took nothing: left alone for ``quiet_for`` seconds."""
        self._quiet = {t: at for t, at in self._quiet.items() if at > now}
        self._quiet[tenant] = now + self.quiet_for

    def wait(self, now: float, timeout: float) -> float:
        """``timeout`` cut to when the next newcomer's claim may go (seconds)."""
        if not self._waiting:
            return timeout
        return min(timeout, max(self.last + GAP - now, 0.001))
