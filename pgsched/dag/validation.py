"""Validating a DAG given as plain data (the parsed file): the DAG's fields, each node on
its own (so a bad node does not hide another's problems), then the graph checks. Every
problem is collected and raised at once (:class:`~pgsched.dag.definition.DagErrors`). Pure."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..jsontext import check_json_object
from ..schedule import Schedule
from ..taskspec import TaskSpec
from .definition import Condition, Dag, DagErrors, Node, Problem
from .graph import check_graph
from .rules import FAILURE_POLICIES, TRIGGER_RULES

if TYPE_CHECKING:
    from .loading import Lines


CONDITION_TESTS = ("equals", "not_equals", "in", "exists")
_NODE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
_DAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,98}")
_NODE_KEYS = {
    "id",
    "command",
    "argv",
    "python",
    "params",
    "env",
    "timeout",
    "max_attempts",
    "retry_policy",
    "retry_base",
    "retry_max",
    "queue",
    "priority",
    "depends_on",
    "trigger_rule",
    "condition",
}
_DAG_KEYS = {"name", "description", "schedule", "failure_policy", "params", "nodes"}
_SCHEDULE_KINDS = {"cron": "cron", "interval": "interval", "once": "once"}
# TaskSpec field -> node field, for the errors of TaskSpec.validate
_TASK_FIELDS = {
    "command": "command",
    "argv": "argv",
    "python_target": "python",
    "params": "params",
    "timeout_seconds": "timeout",
    "retry_base_seconds": "retry_base",
    "retry_max_seconds": "retry_max",
    "name": "id",
}
# valid stand-ins: once TaskSpec.validate has reported a field, it is replaced by one of
# these and validated again, so every bad field of a node is reported, not just the first
_TASK_STAND_INS: dict[str, Any] = {
    "command": "true",
    "argv": ["true"],
    "python_target": "module:function",
    "params": {},
    "env": {},
    "timeout_seconds": None,
    "max_attempts": 1,
    "retry_policy": "exponential",
    "retry_base_seconds": 10.0,
    "retry_max_seconds": 3600.0,
    "priority": 5,
    "queue": "default",
}


class Problems:
    """Collects problems, with their lines when the definition came from a file."""

    def __init__(self, lines: Lines | None):
        self.lines = lines
        self.items: list[Problem] = []

    def top(self, field: str, value: Any, reason: str) -> None:
        self.items.append(
            Problem(field, value, reason, self.lines.of_top(field) if self.lines else None)
        )

    def node(self, index: int, where: str, path: str, value: Any, reason: str) -> None:
        line = self.lines.of_node(index, path) if self.lines else None
        self.items.append(Problem(f"{where}.{path}" if path else where, value, reason, line))

    def raise_any(self, source: str) -> None:
        if self.items:  # file order; a stable sort keeps the order of one line's problems
            raise DagErrors(source, sorted(self.items, key=lambda p: p.line or 0))


@dataclass
class Draft:
    """A node as far as it could be read: ``id`` the given id if a string (valid or not),
    ``where`` its field prefix, ``depends`` its upstream ids (None if malformed), its
    condition if valid, and ``node`` only if nothing about it is wrong."""

    index: int
    id: str | None
    where: str
    id_ok: bool = False
    depends: tuple[str, ...] | None = None
    condition: Condition | None = None
    node: Node | None = None


def validate(data: Any, lines: Lines | None, source: str) -> Dag:
    """The :class:`Dag` that ``data`` (the parsed definition) describes. ``lines`` places
    problems on the lines of the file named ``source`` (None for plain data). Raises
    DagErrors listing every problem."""
    problems = Problems(lines)
    if not isinstance(data, dict):
        problems.top("dag", _short(data), "must be a mapping with name and nodes")
        raise DagErrors(source, problems.items)
    for key in sorted(set(data) - _DAG_KEYS, key=str):
        problems.top(
            str(key), _short(data[key]), f"is not a DAG field ({', '.join(sorted(_DAG_KEYS))})"
        )
    name = data.get("name")
    if not isinstance(name, str) or not _DAG_NAME.fullmatch(name):
        problems.top("name", name, "must be 1-99 characters: letters, digits and . _ : @ / -")
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        problems.top("description", _short(description), "must be a string")
    policy = data.get("failure_policy", "skip_downstream")
    if policy not in FAILURE_POLICIES:
        problems.top("failure_policy", policy, f"must be one of {', '.join(FAILURE_POLICIES)}")
    schedule = None
    try:
        schedule = _schedule(data.get("schedule"))
    except ValidationError as exc:
        problems.top(
            "schedule.timezone" if exc.field == "timezone" else exc.field, exc.value, exc.reason
        )
    defaults = data.get("params")
    if defaults is None:
        defaults = {}
    try:
        check_json_object("params", defaults)
    except ValidationError as exc:
        problems.top("params", _short(exc.value), exc.reason)
        defaults = {}  # so each node does not report it again
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        problems.top("nodes", _short(raw_nodes), "must be a non-empty list of nodes")
        raw_nodes = []
    task_prefix = name if isinstance(name, str) and _DAG_NAME.fullmatch(name) else "dag"
    drafts = [
        _node(task_prefix, index, raw, defaults, problems) for index, raw in enumerate(raw_nodes)
    ]

    order, levels = check_graph(drafts, problems)
    problems.raise_any(source)
    assert schedule is not None and isinstance(name, str)  # no problems: all were read
    nodes = {d.id: d.node for d in drafts if d.id is not None and d.node is not None}
    return Dag(
        name=name,
        schedule=schedule,
        failure_policy=policy,
        nodes=nodes,
        order=order,
        levels=levels,
        description=description,
        params=dict(defaults),
        definition=json.loads(json.dumps(data, default=str)),
    )


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 80 else text[:77] + "..."


def _schedule(raw: Any) -> Schedule:
    if raw is None or raw == "none":
        return Schedule.parse("none", None, "UTC")
    if not isinstance(raw, dict):
        raise ValidationError(
            "schedule", _short(raw), "must be a mapping like {cron: '0 2 * * *', timezone: UTC}"
        )
    kinds = [k for k in raw if k in _SCHEDULE_KINDS]
    extra = sorted(set(raw) - set(_SCHEDULE_KINDS) - {"timezone"}, key=str)
    if len(kinds) != 1 or extra:
        raise ValidationError(
            "schedule",
            _short(raw),
            "must have exactly one of cron, interval, once (and optionally timezone)",
        )
    tz = raw.get("timezone", "UTC")
    if not isinstance(tz, str):
        raise ValidationError(
            "timezone", tz, "is not an IANA time zone (e.g. 'UTC', 'Europe/Berlin')"
        )
    return Schedule.parse(_SCHEDULE_KINDS[kinds[0]], str(raw[kinds[0]]), tz)


def _node(dag: str, index: int, raw: Any, defaults: dict, problems: Problems) -> Draft:
    """Read node ``index``, recording each of its problems; ``dag`` prefixes its task name."""
    if not isinstance(raw, dict):
        problems.node(
            index, f"nodes[{index}]", "", _short(raw), "must be a mapping with an id and a handler"
        )
        return Draft(index, None, f"nodes[{index}]")
    before = len(problems.items)
    node_id = raw.get("id")
    id_ok = isinstance(node_id, str) and bool(_NODE_ID.fullmatch(node_id))
    draft = Draft(
        index,
        node_id if isinstance(node_id, str) else None,
        f"nodes[{node_id}]" if id_ok else f"nodes[{index}]",
        id_ok,
    )
    where = draft.where
    if not id_ok:
        problems.node(
            index,
            where,
            "id",
            node_id,
            "must be 1-100 characters: letters, digits, _ and -, starting with a letter or _",
        )
    for key in sorted(set(raw) - _NODE_KEYS, key=str):
        problems.node(
            index,
            where,
            str(key),
            _short(raw[key]),
            f"is not a node field ({', '.join(sorted(_NODE_KEYS))})",
        )
    handlers = [k for k in ("command", "argv", "python") if k in raw]
    if len(handlers) != 1:
        problems.node(
            index, where, "handler", handlers, "needs exactly one of command, argv, python"
        )
    depends = raw.get("depends_on", [])
    if isinstance(depends, str):
        depends = [depends]
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        problems.node(index, where, "depends_on", _short(depends), "must be a list of node ids")
    else:
        if len(set(depends)) != len(depends):
            problems.node(index, where, "depends_on", depends, "names a node twice")
        draft.depends = tuple(dict.fromkeys(depends))
    rule = raw.get("trigger_rule", "all_success")
    if rule not in TRIGGER_RULES:
        problems.node(
            index, where, "trigger_rule", rule, f"must be one of {', '.join(TRIGGER_RULES)}"
        )
    draft.condition = _condition(index, where, raw.get("condition"), problems)
    spec = None
    if len(handlers) == 1:
        params = raw.get("params")
        if params is None:  # absent, or `params:` with nothing after it
            params = {}
        spec = TaskSpec(
            name=f"{dag}.{node_id if id_ok else 'node'}",
            handler_kind={"command": "shell", "argv": "argv", "python": "python"}[handlers[0]],
            command=raw.get("command"),
            argv=raw.get("argv"),
            python_target=raw.get("python"),
            params={**defaults, **params} if isinstance(params, dict) else params,
            env=raw.get("env", {}),
            timeout_seconds=raw.get("timeout"),
            max_attempts=raw.get("max_attempts", 1),
            retry_policy=raw.get("retry_policy", "exponential"),
            retry_base_seconds=raw.get("retry_base", 10.0),
            retry_max_seconds=raw.get("retry_max", 3600.0),
            queue=raw.get("queue", "default"),
            priority=raw.get("priority", 5),
        )
        _check_task(index, where, spec, problems)
    if (
        spec is not None
        and len(problems.items) == before
        and draft.id is not None
        and draft.depends is not None
    ):
        draft.node = Node(draft.id, spec, draft.depends, rule, draft.condition)
    return draft


def _check_task(index: int, where: str, spec: TaskSpec, problems: Problems) -> None:
    """Record every field TaskSpec.validate refuses: after each refusal the field gets a
    valid stand-in and validation runs again (at most once per field)."""
    reported: set[str] = set()
    while True:
        try:
            spec.validate()
            return
        except ValidationError as exc:
            problems.node(
                index, where, _TASK_FIELDS.get(exc.field, exc.field), exc.value, exc.reason
            )
            if exc.field not in _TASK_STAND_INS or exc.field in reported:
                return
            reported.add(exc.field)
            spec = dataclasses.replace(spec, **{exc.field: _TASK_STAND_INS[exc.field]})


def _condition(index: int, where: str, raw: Any, problems: Problems) -> Condition | None:
    """The node's condition, or None (recording the problem if there is one)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("field"), str):
        problems.node(
            index,
            where,
            "condition",
            _short(raw),
            "must be a mapping like {field: node.result.key, equals: value}",
        )
        return None
    tests = [t for t in CONDITION_TESTS if t in raw]
    extra = sorted(set(raw) - set(CONDITION_TESTS) - {"field"}, key=str)
    if len(tests) != 1 or extra:
        problems.node(
            index,
            where,
            "condition",
            _short(raw),
            f"needs exactly one of {', '.join(CONDITION_TESTS)}",
        )
        return None
    parts = raw["field"].split(".")
    if len(parts) < 2 or parts[1] != "result" or not all(parts):
        problems.node(
            index,
            where,
            "condition.field",
            raw["field"],
            "must look like node.result or node.result.key.subkey",
        )
        return None
    test = tests[0]
    if test == "in" and not isinstance(raw["in"], list):
        problems.node(index, where, "condition.in", _short(raw["in"]), "must be a list of values")
        return None
    if test == "exists" and raw["exists"] is not True and raw["exists"] is not False:
        problems.node(index, where, "condition.exists", raw["exists"], "must be true or false")
        return None
    try:
        json.dumps(raw[test], allow_nan=False)
    except (TypeError, ValueError):
        problems.node(index, where, f"condition.{test}", _short(raw[test]), "must be a JSON value")
        return None
    return Condition(raw["field"], test, raw[test])
