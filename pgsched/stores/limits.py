"""The limits' store: queues (their limits, pauses and what waits in them) and tenant
quotas (migrations 0021 and 0024; docs/limits.md).

Every change goes through a public SQL function (``pgsched.queue_pause_v1``,
``queue_resume_v1``, ``queue_set_limits_v1``, ``tenant_set_quotas_v1``), which decides
whom the session may act for: a tenant's own logins and the web acting for it change its
queues; quotas are the installation's. Each function here is one transaction and checks
its input first, raising ValidationError naming the field and value; NotFound for an
unknown tenant or queue; PermissionDenied when the database refuses the login.

Changes that leave a field as it is take :data:`UNSET` for it; ``None`` means no limit.
"""

from __future__ import annotations

import enum
from typing import Any, Final

from .. import limits as rules
from ..db import Database, Row, Session
from ..errors import NotFound, ValidationError
from ..task_checks import check_name


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: "leave this field as it is" (the default of every change)
UNSET: Final = _Unset.UNSET

INT_MAX = rules.INT_MAX
BIGINT_MAX = rules.BIGINT_MAX
MAX_REASON = 500

#: the quotas of a tenant and their bounds: (lowest, highest); weight has no "none"
QUOTAS: Final = rules.QUOTA_BOUNDS


def _count(field: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        unset = "" if field == "weight" else ", or null for no limit"
        raise ValidationError(field, value, f"must be an integer from {low} to {high}{unset}")
    return value


def _period(value: object) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    low, high = rules.MIN_RATE_PERIOD_SECONDS, rules.MAX_RATE_PERIOD_SECONDS
    if not ok or not low <= value <= high:  # type: ignore[operator]
        raise ValidationError(
            "rate_period_seconds", value, f"must be seconds {rules.RATE_PERIOD_RANGE}"
        )
    return float(value)  # type: ignore[arg-type]


def _names(tenant: str, name: str) -> None:
    check_name("tenant", tenant)
    check_name("queue", name)


def queues(db: Database | Session, tenant: str | None = None) -> list[Row]:
    """One dict per queue of ``tenant`` (None: every tenant the session sees) that has a
    row, work or a live worker, by tenant and name: ``tenant``, ``name``, ``max_running``,
    ``rate_limit`` (starts per ``rate_period_seconds``), ``paused_at`` (UTC),
    ``paused_by`` (``"login ROLE"``, ``"user NAME"``, ``"token ID"``), ``pause_reason``
    (None when not paused or none given), ``running``, ``ready`` (pending and due),
    ``waiting`` (of the ready, those a limit holds back), ``workers`` (live ones serving
    it). Limits None: none."""
    if tenant is not None:
        check_name("tenant", tenant)
    with db.transaction() as tx:
        return tx.many("limits_queue_list", tenant=tenant, name=None)


def queue(db: Database | Session, tenant: str, name: str) -> Row:
    """Queue ``name`` of ``tenant``, as :func:`queues` gives it. Raises NotFound when it
    has no row, no work and no worker (a queue exists as soon as a task names it)."""
    _names(tenant, name)
    with db.transaction() as tx:
        return _listed(tx, tenant, name)


def queue_pause(
    db: Database | Session, tenant: str, name: str, reason: str | None, by: str | None = None
) -> Row:
    """Pause queue ``name`` of ``tenant``: claims take nothing from it until it is resumed
    (what runs goes on). A queue with no row gets one. ``reason`` (at most 500 characters)
    is shown with the waiting work; ``by`` (``"user NAME"``, ``"token ID"``) only from
    the web or an installation-wide login, else the login is recorded. Pausing a paused
    queue keeps when and by whom, and takes a new reason. Returns :func:`queue`."""
    _names(tenant, name)
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
        raise ValidationError("reason", reason, f"must be text of at most {MAX_REASON} characters")
    with db.transaction() as tx:
        tx.one("limits_queue_pause", tenant=tenant, name=name, reason=reason, by=by)
        return _listed(tx, tenant, name)


def queue_resume(db: Database | Session, tenant: str, name: str, by: str | None = None) -> Row:
    """Resume queue ``name`` of ``tenant`` (nothing changes if it is not paused) and wake
    the tenant's workers at commit. ``by``: as for :func:`queue_pause` (checked, not kept).
    Returns :func:`queue`."""
    _names(tenant, name)
    queue(db, tenant, name)  # NotFound: no such queue, nothing to resume (every face alike)
    with db.transaction() as tx:
        row = tx.one("limits_queue_resume", tenant=tenant, name=name, by=by)
        return _listed(tx, tenant, name, row)


def queue_set_limits(
    db: Database | Session,
    tenant: str,
    name: str,
    *,
    max_running: int | _Unset | None = UNSET,
    rate_limit: int | _Unset | None = UNSET,
    rate_period_seconds: float | _Unset | None = UNSET,
) -> Row:
    """Set limits of queue ``name`` of ``tenant``: ``max_running`` (executions at once,
    across every worker), ``rate_limit`` starts per ``rate_period_seconds`` (a sliding
    window). UNSET leaves a field; None removes the limit (a rate limit and its period go
    together: None for either removes both; one of them alone changes a queue that has
    both). Limits are integers from 1; the period is seconds, from 0.001 to 366 days
    (:data:`pgsched.limits.RATE_PERIOD_RANGE`).
    Wakes the tenant's workers at commit. Returns :func:`queue`."""
    _names(tenant, name)
    clear: list[str] = []
    args: dict[str, Any] = {"max_running": None, "rate_limit": None, "rate_period_seconds": None}
    if max_running is None:
        clear.append("max_running")
    elif max_running is not UNSET:
        args["max_running"] = _count("max_running", max_running, 1, INT_MAX)
    if rate_limit is None or rate_period_seconds is None:
        if rate_limit not in (None, UNSET) or rate_period_seconds not in (None, UNSET):
            field = "rate_limit" if rate_limit is None else "rate_period_seconds"
            raise ValidationError(
                field, None, "removes the rate limit, so the other one must be None or UNSET"
            )
        clear.append("rate_limit")
    else:
        if rate_limit is not UNSET:
            args["rate_limit"] = _count("rate_limit", rate_limit, 1, INT_MAX)
        if rate_period_seconds is not UNSET:
            args["rate_period_seconds"] = _period(rate_period_seconds)
    with db.transaction() as tx:
        if (args["rate_limit"] is None) != (args["rate_period_seconds"] is None):
            # one half of a rate limit: the queue must have the other (the function checks
            # again, under the row's lock; this says it in the caller's terms)
            rows = tx.many("limits_queue_list", tenant=tenant, name=name)
            has = rows[0] if rows else {"rate_limit": None, "rate_period_seconds": None}
            if has["rate_limit"] is None:
                given = "rate_limit" if args["rate_limit"] is not None else "rate_period_seconds"
                other = "rate_period_seconds" if given == "rate_limit" else "rate_limit"
                raise ValidationError(
                    given, args[given], f"needs {other} too: queue {name!r} has no rate limit"
                )
        tx.one("limits_queue_set_limits", tenant=tenant, name=name, clear=clear, **args)
        return _listed(tx, tenant, name)


def tenant_quotas(db: Database | Session, tenant: str) -> Row:
    """``tenant``'s quotas beside its use: ``max_running`` / ``running`` (executions at
    once, counted from the rows), ``max_starts_per_hour`` / ``hour_starts`` (this clock
    hour, UTC), ``max_compute_minutes_per_month`` / ``compute_minutes`` (this calendar
    month, UTC, as last measured: ``measured_at``), ``max_log_bytes`` / ``log_bytes``,
    ``weight`` (its share of a claim, 1 to 100), ``over`` (the slow quotas it is over:
    ``compute_minutes``, ``log_bytes``). Quotas None: none. A tenant's login reads its
    own only (PermissionDenied otherwise); NotFound for no such tenant."""
    check_name("tenant", tenant)
    with db.transaction() as tx:
        row = tx.one("limits_tenant_quotas", tenant=tenant)
        assert row is not None  # tenant_usage_v1 raises no_data_found
        return row


def tenant_set_quotas(db: Database | Session, tenant: str, **changes: int | None) -> Row:
    """Set quotas of ``tenant``: any of ``max_running``, ``max_starts_per_hour``,
    ``max_compute_minutes_per_month``, ``max_log_bytes`` (integers from 0; 0: starts
    nothing; None: no quota) and ``weight`` (1 to 100). Keys not given are left. Only an
    installation-wide login (or the web acting for every tenant) may; PermissionDenied
    otherwise. Wakes the tenant's workers at commit. Returns :func:`tenant_quotas`."""
    check_name("tenant", tenant)
    args: dict[str, Any] = dict.fromkeys(QUOTAS)
    clear: list[str] = []
    for field, value in changes.items():
        if field not in QUOTAS:
            raise ValidationError(field, value, f"is not a quota ({', '.join(QUOTAS)})")
        if value is UNSET:
            continue
        if value is None:
            if field == "weight":
                raise ValidationError("weight", None, "must be an integer from 1 to 100")
            clear.append(field)
        else:
            args[field] = _count(field, value, *QUOTAS[field])
    with db.transaction() as tx:
        tx.one("limits_tenant_set_quotas", tenant=tenant, clear=clear, **args)
        row = tx.one("limits_tenant_quotas", tenant=tenant)
        assert row is not None
        return row


def _listed(tx: Session, tenant: str, name: str, fallback: Row | None = None) -> Row:
    """The queue_list row of one queue; for a queue with nothing to list, ``fallback`` (a
    pgsched.queue row) with no work and no workers, else NotFound."""
    rows = tx.many("limits_queue_list", tenant=tenant, name=name)
    if rows:
        return rows[0]
    if fallback is None:
        raise NotFound(
            f"queue: no queue {name!r} in tenant {tenant!r} (no limits, no work, no worker)"
        )
    keep = ("tenant", "name", "max_running", "rate_limit", "rate_period_seconds")
    pause = ("paused_at", "paused_by", "pause_reason")
    return {
        **{k: fallback[k] for k in keep + pause},
        "running": 0,
        "ready": 0,
        "waiting": 0,
        "workers": 0,
    }


def tenants_at_quota(db: Database | Session) -> list[Row]:
    """The tenants (of those the session sees) a quota holds now, by name: ``tenant``,
    ``max_running``, ``running``, ``max_starts_per_hour``, ``hour_starts``, ``over``, and
    ``at``: the quotas reached (``max_running``, ``max_starts_per_hour``,
    ``compute_minutes``, ``log_bytes``). For ``pgsched status``."""
    return db.many("limits_tenants_at_quota")


def paused_queues(db: Database | Session) -> list[Row]:
    """The paused queues of every tenant the session sees, by tenant and name: ``tenant``,
    ``name``, ``paused_at``, ``paused_by``, ``pause_reason``, ``ready`` (pending and due:
    what waits on the pause). For ``pgsched status``."""
    return db.many("limits_paused_queues")


def wait_reason(db: Database | Session, tenant: str, execution_id: int) -> str | None:
    """Why pending execution ``execution_id`` of ``tenant`` has not started
    (``pgsched_internal.pending_reason_v1``, docs/limits.md lists the texts): its retry
    backoff, its due time, the limit that holds it (``queue imports is paused: vendor
    maintenance``), or no live worker serving its queue; None when nothing holds it, or it
    is not pending."""
    row = db.one("limits_wait_reason", id=execution_id, tenant=tenant)
    return row["reason"] if row else None


def wait_reasons(db: Database | Session, tenant: str, ids: list[int]) -> dict[int, str]:
    """:func:`wait_reason` for many executions of ``tenant`` in one statement: id -> reason,
    for those of ``ids`` that something holds (a listing's pending rows)."""
    if not ids:
        return {}
    return {r["id"]: r["reason"] for r in db.many("limits_wait_reasons", ids=ids, tenant=tenant)}
