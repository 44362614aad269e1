"""Trigger rules: what a waiting node does once its upstream nodes have ended, under the
DAG's failure policy (Airflow's TriggerRuleDep). Pure; the SQL engine's ``dag_decide_v1``
is proven equal to :func:`decide` on every combination (tests/db/test_dag_engine.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TriggerRule(StrEnum):
    """When a node runs, given how its upstream nodes ended: Airflow's trigger rules
    (airflow.utils.trigger_rule.TriggerRule), the ones pgsched runs (``dag_node.trigger_rule``)."""

    ALL_SUCCESS = "all_success"
    ALL_DONE = "all_done"
    ALL_FAILED = "all_failed"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    NONE_FAILED = "none_failed"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"


class FailurePolicy(StrEnum):
    """What a node's failure does to the rest of its run (``dag.failure_policy``): see
    :func:`decide`."""

    SKIP_DOWNSTREAM = "skip_downstream"
    FAIL_ALL = "fail_all"
    CONTINUE = "continue"


TRIGGER_RULES = tuple(r.value for r in TriggerRule)
FAILURE_POLICIES = tuple(p.value for p in FailurePolicy)
# The rules that wait for upstream success (Airflow's meaning): under the ``continue``
# policy a failed upstream node counts as a success for each of them (see decide).
SUCCESS_RULES = tuple(
    r.value
    for r in (
        TriggerRule.ALL_SUCCESS,
        TriggerRule.ONE_SUCCESS,
        TriggerRule.NONE_FAILED,
        TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
    )
)


@dataclass(frozen=True)
class Upstream:
    """How a node's upstream nodes stand: how many there are, and how many ended in each
    state (``upstream_failed``: skipped because of a failure further up)."""

    total: int
    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    upstream_failed: int = 0

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.skipped + self.upstream_failed


def decide(rule: str, up: Upstream, failure_policy: str = "skip_downstream") -> str:
    """What a waiting node does now, given its trigger rule and its upstream nodes: ``run``,
    ``wait`` (not decidable yet), ``skipped`` or ``upstream_failed`` (skipped because
    something upstream failed). Airflow's TriggerRuleDep with flag_upstream_failed:
    a rule is decided as soon as the states seen settle it, not only when every upstream
    node is done. A node without upstream nodes runs.

    ``failure_policy`` ``continue`` lets downstream of a failure run: for every rule that
    waits for success (SUCCESS_RULES: ``all_success``, ``one_success``, ``none_failed``,
    ``none_failed_min_one_success``) a failed or upstream_failed node counts as succeeded,
    so ``one_success`` runs as soon as one upstream node has ended other than skipped. The
    rules that wait for failures (``all_failed``, ``one_failed``) or for anything
    (``all_done``) keep their meaning. Skips still propagate, so a branch not taken stays
    not taken. ``skip_downstream`` and ``fail_all`` use Airflow's rules as they are
    (``fail_all`` also cancels the rest of the run, which is the engine's business).

    Decisions are eager, as in Airflow: ``all_success`` with one upstream skipped is
    ``skipped`` at once, even if another upstream node fails later.

    Raises ValueError for an unknown rule or policy.
    """
    if rule not in TRIGGER_RULES:
        raise ValueError(f"trigger rule {rule!r} is not one of {', '.join(TRIGGER_RULES)}")
    if failure_policy not in FAILURE_POLICIES:
        raise ValueError(
            f"failure policy {failure_policy!r} is not one of {', '.join(FAILURE_POLICIES)}"
        )
    if up.total == 0:
        return "run"
    if failure_policy == "continue" and rule in SUCCESS_RULES:
        up = Upstream(up.total, up.succeeded + up.failed + up.upstream_failed, 0, up.skipped, 0)
    all_done = up.done == up.total
    failures = up.failed + up.upstream_failed
    if rule == "all_success":
        if failures:
            return "upstream_failed"
        if up.skipped:
            return "skipped"
        return "run" if up.succeeded == up.total else "wait"
    if rule == "all_failed":
        if up.succeeded or up.skipped:
            return "skipped"
        return "run" if all_done else "wait"
    if rule == "all_done":
        return "run" if all_done else "wait"
    if rule == "one_success":
        if up.succeeded:
            return "run"
        if not all_done:
            return "wait"
        return "upstream_failed" if failures else "skipped"
    if rule == "one_failed":
        if failures:
            return "run"
        return "skipped" if all_done else "wait"
    if rule == "none_failed":
        if failures:
            return "upstream_failed"
        return "run" if all_done else "wait"
    # none_failed_min_one_success
    if failures:
        return "upstream_failed"
    if not all_done:
        return "wait"
    return "run" if up.succeeded else "skipped"
