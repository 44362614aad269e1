"""DAG definitions: read a workflow from YAML or JSON and validate it whole, and the trigger
rules its nodes run by. Pure (no database); the DAG store, :mod:`pgsched.stores.dags`
and :mod:`pgsched.stores.dagruns`, stores and runs them.

A definition::

    name: nightly-etl
    schedule: {cron: "0 2 * * *", timezone: Europe/Berlin}   # or {interval: 1h}, {once: ...}; none if absent
    failure_policy: skip_downstream                          # fail_all, continue
    nodes:
      - id: extract_a
        command: ./extract a                                 # or argv: [...], or python: module:function
      - id: extract_b
        command: ./extract b
      - id: merge
        command: ./merge
        depends_on: [extract_a, extract_b]
        trigger_rule: all_success                            # Airflow's names
      - id: invoice
        python: docs:invoice
        depends_on: [merge]
        condition: {field: merge.result.type, equals: invoice}

Validation reports every problem in the file at once (:class:`DagErrors`), each naming
the node, the field and (for a file) the line: duplicate ids, unknown fields, unknown
dependencies, a node with no handler or several, an unknown trigger rule, bad task
fields, a condition on a node that is not upstream, and cycles (with the path). Each
node is checked on its own, so a bad node does not hide the problems of another; the
graph checks (cycles, conditions) run once every dependency names a node. It is linear
in nodes plus edges (the line numbers too), so a graph of 10,000 nodes validates well
under a second.

The parts: :mod:`.definition` (what a DAG is), :mod:`.loading` (files), :mod:`.validation`
(fields and nodes), :mod:`.graph` (ids, dependencies, cycles), :mod:`.rules` (trigger
rules). This module is their public face.
"""

from __future__ import annotations

from .definition import Condition, Dag, DagErrors, Node, Problem
from .loading import load, parse
from .rules import FAILURE_POLICIES, SUCCESS_RULES, TRIGGER_RULES, Upstream, decide

__all__ = [
    "FAILURE_POLICIES",
    "SUCCESS_RULES",
    "TRIGGER_RULES",
    "Condition",
    "Dag",
    "DagErrors",
    "Node",
    "Problem",
    "Upstream",
    "decide",
    "load",
    "parse",
]
