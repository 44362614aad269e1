"""What a validated DAG is: :class:`Dag`, its :class:`Node` and :class:`Condition`, and the
:class:`Problem` / :class:`DagErrors` a definition that is not one is reported with. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PgschedError, ValidationError
from ..schedule import Schedule
from ..taskspec import TaskSpec


@dataclass(frozen=True)
class Condition:
    """Run a node only when an upstream result passes: ``field`` is
    ``node.result.path.to.value``; ``test`` one of equals, not_equals, in, exists."""

    field: str
    test: str
    value: Any = None

    @property
    def node(self) -> str:
        return self.field.split(".", 1)[0]


@dataclass(frozen=True)
class Node:
    """One node: its id, the task it runs (a :class:`TaskSpec` named ``dag.node``), its
    upstream node ids, trigger rule and optional condition."""

    id: str
    task: TaskSpec
    depends_on: tuple[str, ...]
    trigger_rule: str = "all_success"
    condition: Condition | None = None


@dataclass
class Dag:
    """A validated DAG. ``order`` lists node ids so that every node comes after its
    upstream nodes; ``levels`` groups them by longest path from a root (nodes of one level
    can run in parallel)."""

    name: str
    schedule: Schedule
    failure_policy: str
    nodes: dict[str, Node]
    order: list[str] = field(default_factory=list)
    levels: list[list[str]] = field(default_factory=list)
    description: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    definition: dict[str, Any] = field(default_factory=dict)  # the parsed file, as JSON

    def downstream(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {n: [] for n in self.nodes}
        for node in self.nodes.values():
            for up in node.depends_on:
                out[up].append(node.id)
        return out


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a DAG definition: ``field`` names the place
    (``nodes[merge].depends_on``, ``schedule``, ``nodes[3].id`` for a node without a
    usable id), ``value`` what was given there, ``reason`` what is wrong with it, and
    ``line`` the 1-based line in the file (None when validating plain data).
    ``str()`` gives ``line 12: nodes[merge].depends_on: 'extract_c' is not a node of this DAG``."""

    field: str
    value: Any
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.field}: {self.value!r} {self.reason}"


class DagErrors(ValidationError):
    """A DAG definition with one or more problems; nothing of it may be applied.

    ``source`` names the file (or ``"DAG definition"`` for plain data) and ``problems``
    lists every :class:`Problem` found, in file order. ``field``, ``value`` and ``reason``
    are those of the first problem, as for a plain :class:`ValidationError`. ``str()`` is
    one line per problem under a heading::

        examples/dags/etl.yaml: 2 problems
          line 16: nodes[merge].depends_on: 'extract_c' is not a node of this DAG
          line 21: nodes[deploy].trigger_rule: 'always' must be one of all_success, ...
    """

    def __init__(self, source: str, problems: Sequence[Problem]):
        if not problems:
            raise ValueError("DagErrors needs at least one problem")
        self.source = source
        self.problems = list(problems)
        first = self.problems[0]
        self.field, self.value, self.reason = first.field, first.value, first.reason
        count = len(self.problems)
        heading = f"{source}: {count} problem{'' if count == 1 else 's'}"
        PgschedError.__init__(self, "\n".join([heading, *(f"  {p}" for p in self.problems)]))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.source, self.problems))
