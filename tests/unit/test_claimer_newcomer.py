"""The claimer claims at once for a tenant it holds nothing of (pgsched/worker/claimer.py,
``_claim_now``): a notification naming another tenant than the buffer's brings a claim of
one even with the buffer full, so that tenant's run waits for a slot, not for the flood's
prefetch to drain (the fairness benchmark); a notification of the buffer's own tenant, or
an anonymous one, claims only when the buffer has room."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pgsched.worker.claimer import Claimer
from pgsched.worker.config import WorkerConfig
from pgsched.worker.holdings import Holdings
from pgsched.worker.newcomers import GAP as NEWCOMER_GAP
from pgsched.worker.newcomers import KEPT as NEWCOMERS_KEPT

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def full_of(tenant: str, n: int = 40) -> Claimer:
    config = WorkerConfig(tenants=None, concurrency=4, prefetch=20)
    holdings = Holdings(config)
    holdings.avg_run = 0.001  # short handlers: the prefetch at its cap
    holdings.running = 4
    holdings.add([{"id": i, "priority": 5, "run_at": T0, "tenant": tenant} for i in range(n)])
    claimer = Claimer(None, config, holdings, None, lambda: 1)  # type: ignore[arg-type]
    claimer._maybe_more = False
    return claimer


def test_a_full_buffer_claims_nothing_more_for_its_own_tenant():
    claimer = full_of("a")
    claimer._notified("pgsched_execution", "a")
    assert claimer._claim_now() == (0, None, False)
    claimer._notified("pgsched_execution", "")  # a retry, a hand-back: anyone's
    assert claimer._claim_now() == (0, None, False)


def test_a_tenant_the_buffer_holds_nothing_of_is_claimed_for_at_once_alone_and_once():
    claimer = full_of("a")
    claimer._notified("pgsched_execution", "b")
    assert claimer._claim_now() == (1, ["b"], True)  # b's row only, never a's
    assert claimer._claim_now() == (0, None, False)  # one claim per notification


def test_newcomer_claims_are_spaced_and_one_found_empty_is_left_alone():
    """Any login may NOTIFY: a flood of names brings one claim per NEWCOMER_GAP, and a
    tenant whose claim found nothing is not asked again for a poll interval."""
    claimer = full_of("a")
    for name in ("b", "c", "d"):
        claimer._notified("pgsched_execution", name)
    assert claimer._claim_now() == (1, ["b"], True)
    assert claimer._claim_now() == (0, None, False)  # within the gap
    claimer._newcomers.last -= NEWCOMER_GAP
    assert claimer._claim_now() == (1, ["c"], True)
    claimer._newcomers.found_nothing("c", time.monotonic())
    claimer._notified("pgsched_execution", "c")
    claimer._newcomers.last -= NEWCOMER_GAP
    assert claimer._claim_now() == (1, ["d"], True)
    claimer._newcomers.last -= NEWCOMER_GAP
    assert claimer._claim_now() == (0, None, False)  # c left alone
    for i in range(1000):
        claimer._notified("pgsched_execution", f"t{i}")
    assert len(claimer._newcomers) == NEWCOMERS_KEPT


def test_a_worker_that_does_not_serve_the_tenant_ignores_it():
    claimer = full_of("a")
    claimer.config.tenants = ("a",)
    claimer._notified("pgsched_execution", "b")
    assert claimer._claim_now() == (0, None, False)
