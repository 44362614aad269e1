"""DAG definitions: read a workflow from YAML or JSON and validate it whole. Pure (no
database); running DAGs is built on top of this.

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
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import PgschedError, ValidationError
from .jsontext import check_json_object
from .schedule import Schedule
from .taskspec import TaskSpec

# Airflow's trigger rules (airflow.utils.trigger_rule.TriggerRule), the ones pgsched runs.
TRIGGER_RULES = ("all_success", "all_done", "all_failed", "one_success", "one_failed", "none_failed",
                 "none_failed_min_one_success")
FAILURE_POLICIES = ("skip_downstream", "fail_all", "continue")
# The rules that wait for upstream success (Airflow's meaning): under the ``continue``
# policy a failed upstream node counts as a success for each of them (see decide).
SUCCESS_RULES = ("all_success", "one_success", "none_failed", "none_failed_min_one_success")
CONDITION_TESTS = ("equals", "not_equals", "in", "exists")
_NODE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
_DAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,98}")
_NODE_KEYS = {"id", "command", "argv", "python", "params", "env", "timeout", "max_attempts", "retry_policy",
              "retry_base", "retry_max", "queue", "priority", "depends_on", "trigger_rule", "condition"}
_DAG_KEYS = {"name", "description", "schedule", "failure_policy", "params", "nodes"}
_SCHEDULE_KINDS = {"cron": "cron", "interval": "interval", "once": "once"}
# TaskSpec field -> node field, for the errors of TaskSpec.validate
_TASK_FIELDS = {"command": "command", "argv": "argv", "python_target": "python", "params": "params",
                "timeout_seconds": "timeout", "retry_base_seconds": "retry_base",
                "retry_max_seconds": "retry_max", "name": "id"}
# valid stand-ins: once TaskSpec.validate has reported a field, it is replaced by one of
# these and validated again, so every bad field of a node is reported, not just the first
_TASK_STAND_INS: dict[str, Any] = {
    "command": "true", "argv": ["true"], "python_target": "module:function", "params": {}, "env": {},
    "timeout_seconds": None, "max_attempts": 1, "retry_policy": "exponential", "retry_base_seconds": 10.0,
    "retry_max_seconds": 3600.0, "priority": 5, "queue": "default"}


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


def load(source: str | Path, text: str | None = None) -> Dag:
    """Read and validate a DAG from a ``.yaml``/``.yml``/``.json`` file (or ``text``, named
    by ``source``; YAML is a superset of JSON, so either parses; values are read as
    ``yaml.safe_load`` reads them).

    Raises :class:`DagErrors` listing every problem with its line (a file that does not
    parse is one problem, field ``file``, with line and column in its reason), or
    PgschedError for a file that cannot be read."""
    if text is None:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PgschedError(f"file: cannot read {str(source)!r}: {exc}") from None
    if str(source).lower().endswith(".json"):
        # JSON is read as JSON (``1e3`` is a number, as YAML 1.1 would not have it), and
        # fast: PyYAML's pure-Python parser takes seconds on 10,000 nodes. The node tree
        # is built only when there are problems to place on lines.
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except _NotJson as exc:
            raise DagErrors(str(source), [Problem("file", str(source), f"is not valid JSON: {exc}")]) from None
        except ValueError:
            pass  # YAML's reader reports where the syntax breaks
        else:
            try:
                return _parse(data, None, str(source))
            except DagErrors:
                return _parse(data, _Lines(yaml.compose(text, Loader=yaml.SafeLoader)), str(source))
    loader = yaml.SafeLoader(text)
    try:  # what yaml.safe_load does, keeping the node tree for the line numbers
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = Problem("file", str(source), f"is not valid YAML or JSON{where}: "
                          f"{getattr(exc, 'problem', None) or exc}", mark.line + 1 if mark else None)
        raise DagErrors(str(source), [problem]) from None
    finally:
        loader.dispose()
    return _parse(data, _Lines(root), str(source))


class _NotJson(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value (JSON has no NaN or Infinity)")


def parse(data: Any) -> Dag:
    """Validate a DAG given as plain data (the parsed YAML/JSON: a dict with ``name`` and
    ``nodes``). Raises :class:`DagErrors` (a ValidationError) listing every problem, with
    ``line`` None. See :func:`load`."""
    return _parse(data, None, "DAG definition")


class _Lines:
    """1-based line numbers of the parts of a definition, from PyYAML's node tree: each
    top-level key (and the keys of a top-level mapping, as ``schedule.timezone``), each
    item of ``nodes`` and each key in it (and one level below, as ``condition.field``).
    Linear in the size of the file."""

    def __init__(self, root: yaml.Node | None):
        self.root = root.start_mark.line + 1 if root is not None else None
        self.top: dict[str, int] = {}
        self.nodes: list[tuple[int, dict[str, int]]] = []
        if isinstance(root, yaml.MappingNode):
            self.top = _key_lines(root)
            for key, value in root.value:  # the last "nodes" wins, as in safe_load
                if isinstance(key, yaml.ScalarNode) and key.value == "nodes":
                    items = value.value if isinstance(value, yaml.SequenceNode) else []
                    self.nodes = [(item.start_mark.line + 1, _key_lines(item)) for item in items]

    def of_top(self, path: str) -> int | None:
        """The line of top-level ``path`` (``schedule.cron``), else of its first part,
        else of the document."""
        return self.top.get(path) or self.top.get(path.split(".", 1)[0]) or self.root

    def of_node(self, index: int, path: str) -> int | None:
        """The line of ``path`` in node ``index``, else of its first part, else of the
        node, else of the ``nodes`` key."""
        if index >= len(self.nodes):
            return self.of_top("nodes")
        line, keys = self.nodes[index]
        return (keys.get(path) or keys.get(path.split(".", 1)[0]) or line) if path else line


def _key_lines(node: yaml.Node) -> dict[str, int]:
    lines: dict[str, int] = {}
    if not isinstance(node, yaml.MappingNode):
        return lines
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        lines[key.value] = key.start_mark.line + 1
        if isinstance(value, yaml.MappingNode):
            for sub, _ in value.value:
                if isinstance(sub, yaml.ScalarNode):
                    lines[f"{key.value}.{sub.value}"] = sub.start_mark.line + 1
    return lines


class _Problems:
    """Collects problems, with their lines when the definition came from a file."""

    def __init__(self, lines: _Lines | None):
        self.lines = lines
        self.items: list[Problem] = []

    def top(self, field: str, value: Any, reason: str) -> None:
        self.items.append(Problem(field, value, reason, self.lines.of_top(field) if self.lines else None))

    def node(self, index: int, where: str, path: str, value: Any, reason: str) -> None:
        line = self.lines.of_node(index, path) if self.lines else None
        self.items.append(Problem(f"{where}.{path}" if path else where, value, reason, line))

    def raise_any(self, source: str) -> None:
        if self.items:  # file order; a stable sort keeps the order of one line's problems
            raise DagErrors(source, sorted(self.items, key=lambda p: p.line or 0))


@dataclass
class _Draft:
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


def _parse(data: Any, lines: _Lines | None, source: str) -> Dag:
    problems = _Problems(lines)
    if not isinstance(data, dict):
        problems.top("dag", _short(data), "must be a mapping with name and nodes")
        raise DagErrors(source, problems.items)
    for key in sorted(set(data) - _DAG_KEYS, key=str):
        problems.top(str(key), _short(data[key]), f"is not a DAG field ({', '.join(sorted(_DAG_KEYS))})")
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
        problems.top("schedule.timezone" if exc.field == "timezone" else exc.field, exc.value, exc.reason)
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
    drafts = [_node(task_prefix, index, raw, defaults, problems) for index, raw in enumerate(raw_nodes)]

    # the graph: ids unique, every dependency a node; then cycles and conditions
    by_id: dict[str, _Draft] = {}
    sound = True
    for d in drafts:
        sound = sound and d.id_ok and d.depends is not None
        if d.id_ok and d.id is not None:
            if d.id in by_id:
                problems.node(d.index, d.where, "id", d.id, "is used by two nodes")
                sound = False
            else:
                by_id[d.id] = d
    known = {d.id for d in drafts if d.id is not None}  # a bad id is reported once, not by its dependents
    for d in drafts:
        for up in d.depends or ():
            if up not in known:
                problems.node(d.index, d.where, "depends_on", up, "is not a node of this DAG")
                sound = False
            elif up == d.id:
                problems.node(d.index, d.where, "depends_on", up, "is the node itself")
                sound = False
    order: list[str] = []
    levels: list[list[str]] = []
    if sound:
        graph = {node_id: d.depends or () for node_id, d in by_id.items()}
        order, levels, cycle = _topological(graph)
        if cycle:
            problems.node(by_id[cycle[0]].index, by_id[cycle[0]].where, "depends_on", " -> ".join(cycle),
                          "is a cycle")
        for d in drafts:
            if d.condition and d.condition.node not in (d.depends or ()):
                problems.node(d.index, d.where, "condition.field", d.condition.field,
                              f"must name a node in depends_on of {d.id!r} ({d.condition.node!r} is not one): "
                              "the condition is tested when that node has ended")
    problems.raise_any(source)
    assert schedule is not None and isinstance(name, str)  # no problems: all were read
    nodes = {d.id: d.node for d in drafts if d.id is not None and d.node is not None}
    return Dag(name=name, schedule=schedule, failure_policy=policy, nodes=nodes, order=order, levels=levels,
               description=description, params=dict(defaults),
               definition=json.loads(json.dumps(data, default=str)))


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 80 else text[:77] + "..."


def _schedule(raw: Any) -> Schedule:
    if raw is None or raw == "none":
        return Schedule.parse("none", None, "UTC")
    if not isinstance(raw, dict):
        raise ValidationError("schedule", _short(raw), "must be a mapping like {cron: '0 2 * * *', timezone: UTC}")
    kinds = [k for k in raw if k in _SCHEDULE_KINDS]
    extra = sorted(set(raw) - set(_SCHEDULE_KINDS) - {"timezone"}, key=str)
    if len(kinds) != 1 or extra:
        raise ValidationError("schedule", _short(raw), "must have exactly one of cron, interval, once "
                              "(and optionally timezone)")
    tz = raw.get("timezone", "UTC")
    if not isinstance(tz, str):
        raise ValidationError("timezone", tz, "is not an IANA time zone (e.g. 'UTC', 'Europe/Berlin')")
    return Schedule.parse(_SCHEDULE_KINDS[kinds[0]], str(raw[kinds[0]]), tz)


def _node(dag: str, index: int, raw: Any, defaults: dict, problems: _Problems) -> _Draft:
    """Read node ``index``, recording each of its problems; ``dag`` prefixes its task name."""
    if not isinstance(raw, dict):
        problems.node(index, f"nodes[{index}]", "", _short(raw), "must be a mapping with an id and a handler")
        return _Draft(index, None, f"nodes[{index}]")
    before = len(problems.items)
    node_id = raw.get("id")
    id_ok = isinstance(node_id, str) and bool(_NODE_ID.fullmatch(node_id))
    draft = _Draft(index, node_id if isinstance(node_id, str) else None,
                   f"nodes[{node_id}]" if id_ok else f"nodes[{index}]", id_ok)
    where = draft.where
    if not id_ok:
        problems.node(index, where, "id", node_id, "must be 1-100 characters: letters, digits, _ and -, "
                      "starting with a letter or _")
    for key in sorted(set(raw) - _NODE_KEYS, key=str):
        problems.node(index, where, str(key), _short(raw[key]),
                      f"is not a node field ({', '.join(sorted(_NODE_KEYS))})")
    handlers = [k for k in ("command", "argv", "python") if k in raw]
    if len(handlers) != 1:
        problems.node(index, where, "handler", handlers, "needs exactly one of command, argv, python")
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
        problems.node(index, where, "trigger_rule", rule, f"must be one of {', '.join(TRIGGER_RULES)}")
    draft.condition = _condition(index, where, raw.get("condition"), problems)
    spec = None
    if len(handlers) == 1:
        params = raw.get("params")
        if params is None:  # absent, or `params:` with nothing after it
            params = {}
        spec = TaskSpec(name=f"{dag}.{node_id if id_ok else 'node'}",
                        handler_kind={"command": "shell", "argv": "argv", "python": "python"}[handlers[0]],
                        command=raw.get("command"), argv=raw.get("argv"), python_target=raw.get("python"),
                        params={**defaults, **params} if isinstance(params, dict) else params,
                        env=raw.get("env", {}), timeout_seconds=raw.get("timeout"),
                        max_attempts=raw.get("max_attempts", 1), retry_policy=raw.get("retry_policy", "exponential"),
                        retry_base_seconds=raw.get("retry_base", 10.0), retry_max_seconds=raw.get("retry_max", 3600.0),
                        queue=raw.get("queue", "default"), priority=raw.get("priority", 5))
        _check_task(index, where, spec, problems)
    if spec is not None and len(problems.items) == before and draft.id is not None and draft.depends is not None:
        draft.node = Node(draft.id, spec, draft.depends, rule, draft.condition)
    return draft


def _check_task(index: int, where: str, spec: TaskSpec, problems: _Problems) -> None:
    """Record every field TaskSpec.validate refuses: after each refusal the field gets a
    valid stand-in and validation runs again (at most once per field)."""
    reported: set[str] = set()
    while True:
        try:
            spec.validate()
            return
        except ValidationError as exc:
            problems.node(index, where, _TASK_FIELDS.get(exc.field, exc.field), exc.value, exc.reason)
            if exc.field not in _TASK_STAND_INS or exc.field in reported:
                return
            reported.add(exc.field)
            spec = dataclasses.replace(spec, **{exc.field: _TASK_STAND_INS[exc.field]})


def _condition(index: int, where: str, raw: Any, problems: _Problems) -> Condition | None:
    """The node's condition, or None (recording the problem if there is one)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("field"), str):
        problems.node(index, where, "condition", _short(raw), "must be a mapping like "
                      "{field: node.result.key, equals: value}")
        return None
    tests = [t for t in CONDITION_TESTS if t in raw]
    extra = sorted(set(raw) - set(CONDITION_TESTS) - {"field"}, key=str)
    if len(tests) != 1 or extra:
        problems.node(index, where, "condition", _short(raw), f"needs exactly one of {', '.join(CONDITION_TESTS)}")
        return None
    parts = raw["field"].split(".")
    if len(parts) < 2 or parts[1] != "result" or not all(parts):
        problems.node(index, where, "condition.field", raw["field"], "must look like node.result or "
                      "node.result.key.subkey")
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


def _topological(graph: dict[str, tuple[str, ...]]) -> tuple[list[str], list[list[str]], list[str] | None]:
    """Kahn's algorithm over ``graph`` (node id -> upstream ids, all known): an order, the
    levels, and None; or, on a cycle, empty lists and the cycle's path."""
    pending = {n: len(ups) for n, ups in graph.items()}
    downstream: dict[str, list[str]] = {n: [] for n in graph}
    for n, ups in graph.items():
        for up in ups:
            downstream[up].append(n)
    level = {n: 0 for n in graph}
    ready = deque(n for n, count in pending.items() if count == 0)  # in file order
    order: list[str] = []
    while ready:
        current = ready.popleft()
        order.append(current)
        for down in downstream[current]:
            level[down] = max(level[down], level[current] + 1)
            pending[down] -= 1
            if pending[down] == 0:
                ready.append(down)
    if len(order) < len(graph):
        return [], [], _cycle({n for n, count in pending.items() if count > 0}, graph)
    levels: list[list[str]] = [[] for _ in range(max(level.values(), default=0) + 1)]
    for n in order:
        levels[level[n]].append(n)
    return order, levels, None


def _cycle(stuck: set[str], graph: dict[str, tuple[str, ...]]) -> list[str]:
    """A cycle among ``stuck`` (nodes Kahn could not order), as a path that returns to its
    first node: follow upstream edges until a node repeats."""
    start = min(stuck)
    seen: dict[str, int] = {}
    path: list[str] = []
    current = start
    while current not in seen:
        seen[current] = len(path)
        path.append(current)
        current = next(up for up in sorted(graph[current]) if up in stuck)
    loop = path[seen[current]:] + [current]
    return list(reversed(loop))  # upstream first: a -> b means b depends on a


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
        raise ValueError(f"failure policy {failure_policy!r} is not one of {', '.join(FAILURE_POLICIES)}")
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
