"""The graph checks of a DAG definition: unique ids, known dependencies, no cycle (Kahn's
algorithm, which also gives the order and the levels), conditions on upstream nodes. Pure;
linear in nodes plus edges."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .validation import Draft, Problems


def check_graph(drafts: list[Draft], problems: Problems) -> tuple[list[str], list[list[str]]]:
    """The graph checks, once each node has been read: ids unique, every dependency a node
    of the DAG and not the node itself; then (only when those hold) cycles, and that a
    condition names an upstream node. Records each problem in ``problems``; returns the
    topological order and the levels (empty when the graph is not sound)."""
    by_id: dict[str, Draft] = {}
    sound = True
    for d in drafts:
        sound = sound and d.id_ok and d.depends is not None
        if d.id_ok and d.id is not None:
            if d.id in by_id:
                problems.node(d.index, d.where, "id", d.id, "is used by two nodes")
                sound = False
            else:
                by_id[d.id] = d
    known = {
        d.id for d in drafts if d.id is not None
    }  # a bad id is reported once, not by its dependents
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
        order, levels, cycle = topological(graph)
        if cycle:
            problems.node(
                by_id[cycle[0]].index,
                by_id[cycle[0]].where,
                "depends_on",
                " -> ".join(cycle),
                "is a cycle",
            )
        for d in drafts:
            if d.condition and d.condition.node not in (d.depends or ()):
                problems.node(
                    d.index,
                    d.where,
                    "condition.field",
                    d.condition.field,
                    f"must name a node in depends_on of {d.id!r} ({d.condition.node!r} is not one): "
                    "the condition is tested when that node has ended",
                )
    return order, levels


def topological(
    graph: dict[str, tuple[str, ...]],
) -> tuple[list[str], list[list[str]], list[str] | None]:
    """Kahn's algorithm over ``graph`` (node id -> upstream ids, all known): an order, the
    levels, and None; or, on a cycle, empty lists and the cycle's path."""
    pending = {n: len(ups) for n, ups in graph.items()}
    downstream: dict[str, list[str]] = {n: [] for n in graph}
    for n, ups in graph.items():
        for up in ups:
            downstream[up].append(n)
    level = dict.fromkeys(graph, 0)
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
        return [], [], find_cycle({n for n, count in pending.items() if count > 0}, graph)
    levels: list[list[str]] = [[] for _ in range(max(level.values(), default=0) + 1)]
    for n in order:
        levels[level[n]].append(n)
    return order, levels, None


def find_cycle(stuck: set[str], graph: dict[str, tuple[str, ...]]) -> list[str]:
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
    loop = path[seen[current] :] + [current]
    return list(reversed(loop))  # upstream first: a -> b means b depends on a
