"""The scheduler: turns due schedules into executions, and keeps history partitions in
shape. Any number may run; one leads. Correctness does not rest on leadership: an
execution is unique on (task, scheduled time), so a second leader would hit the
constraint, not run a fire twice.

Its parts, each a module (docs/architecture.md, "Scheduler"):

- :mod:`.leadership`: the leader lock, elections and term fencing (the term key,
  :func:`internal_key`):
  every transaction that creates or requeues anything under a term first takes the term
  key shared and checks that its term is current; an election ends the sessions holding
  it, takes it exclusively, and only then records the new term. An old leader, frozen
  mid-tick or slow to notice, creates nothing once the new term has begun (:class:`TermOver`).
  The pool's transactions idle for ``leader_timeout`` are ended by the server, so a frozen
  scheduler's locks do not outlive the time after which it counts as hung.
- :mod:`.tick` fires what is due, with the misfire policies of :mod:`.catch_up` (pure).
- The leader's services, each started and stopped with its term (:mod:`pgsched.service`):
  :mod:`.rescue` (dead workers' executions, every ``rescue_interval``), :mod:`.partitions`,
  :mod:`.worker_prune`, :mod:`.observe` (statistics, alerts) and the webhook sender
  (:class:`pgsched.webhooks.Sender`).
- :mod:`.process`: one scheduler process (:class:`Scheduler`), built by :mod:`pgsched.node`.
"""

from .catch_up import CatchUp, Misfire, catch_up
from .leadership import LeaderHeartbeat, TermOver, elect, fence, internal_key
from .observe import AlertDetection, StatsRollUp
from .partitions import Partitions, maintain_partitions
from .process import Scheduler, SchedulerConfig
from .rescue import Rescue, rescue
from .tick import tick
from .worker_prune import WorkerPrune, prune_workers

__all__ = [
    "AlertDetection",
    "CatchUp",
    "LeaderHeartbeat",
    "Misfire",
    "Partitions",
    "Rescue",
    "Scheduler",
    "SchedulerConfig",
    "StatsRollUp",
    "TermOver",
    "WorkerPrune",
    "catch_up",
    "elect",
    "fence",
    "internal_key",
    "maintain_partitions",
    "prune_workers",
    "rescue",
    "tick",
]
