"""The layered drawing of a DAG run for its page: pure geometry, drawn as inline SVG by
``templates/web/dag_run.html``.

Layout (a simple Sugiyama-style layering): a node's layer is the length of the longest
path from a root to it, so every edge points right; within a layer nodes keep their
order in the DAG file, and each layer is centred vertically. Edges are cubic Bézier paths
from the right side of the upstream node to the left side of the downstream one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NODE_W, NODE_H = 168, 46  # a node's box, in SVG user units
GAP_X, GAP_Y, PAD = 72, 22, 16

# state -> (fill, text colour): green succeeded, yellow running, red failed, grey not run,
# white not started yet.
COLOURS = {
    "succeeded": ("#1f8a4c", "#ffffff"),
    "running": ("#f2c94c", "#1d2330"),
    "failed": ("#c0392b", "#ffffff"),
    "skipped": ("#9aa3b2", "#ffffff"),
    "upstream_failed": ("#9aa3b2", "#ffffff"),
    "cancelled": ("#9aa3b2", "#ffffff"),
    "queued": ("#ffffff", "#1d2330"),
    "waiting": ("#ffffff", "#1d2330"),
}


@dataclass
class Drawing:
    """``nodes``: dicts with ``id``, ``state``, ``x``, ``y``, ``fill``, ``text``,
    ``label`` (the id, shortened to fit) and ``row`` (the node's row); ``edges``: dicts
    with ``d`` (the SVG path) and ``source``/``target``; ``width``/``height`` of the
    viewBox."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    width: int = 2 * PAD
    height: int = 2 * PAD
    node_w: int = NODE_W
    node_h: int = NODE_H


def layers(upstream: dict[str, list[str]]) -> dict[str, int]:
    """The layer of each node: 0 for a node without upstream nodes, else one more than
    its deepest upstream node. ``upstream`` maps every node id to its upstream ids (an
    id not in the map counts as a root). Raises ValueError on a cycle."""
    depth: dict[str, int] = {}
    for start in upstream:
        if start in depth:
            continue
        # iterative depth-first walk: a DAG may be deeper than Python's recursion limit
        stack: list[tuple[str, bool]] = [(start, False)]
        on_path: set[str] = set()
        while stack:
            node, expanded = stack.pop()
            if expanded:
                on_path.discard(node)
                ups = [u for u in upstream.get(node, []) if u in upstream]
                depth[node] = 1 + max((depth[u] for u in ups), default=-1)
                continue
            if node in depth:
                continue
            if node in on_path:
                raise ValueError(f"upstream: {node!r} is part of a cycle")
            on_path.add(node)
            stack.append((node, True))
            stack.extend(
                (u, False) for u in upstream.get(node, []) if u in upstream and u not in depth
            )
    return depth


def _label(text: str, limit: int = 22) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def draw(nodes: list[dict[str, Any]]) -> Drawing:
    """The drawing of a run's ``nodes`` (rows with ``node_id``, ``upstream`` and
    ``state``, in file order)."""
    if not nodes:
        return Drawing()
    depth = layers({n["node_id"]: list(n["upstream"] or []) for n in nodes})
    columns: dict[int, list[dict[str, Any]]] = {}
    for n in nodes:
        columns.setdefault(depth[n["node_id"]], []).append(n)
    tallest = max(len(c) for c in columns.values())
    height = 2 * PAD + tallest * NODE_H + (tallest - 1) * GAP_Y
    drawing = Drawing(
        width=2 * PAD + len(columns) * NODE_W + (len(columns) - 1) * GAP_X, height=height
    )
    where: dict[str, tuple[int, int]] = {}
    for layer in sorted(columns):
        column = columns[layer]
        used = len(column) * NODE_H + (len(column) - 1) * GAP_Y
        top = (height - used) // 2
        for i, n in enumerate(column):
            x, y = PAD + layer * (NODE_W + GAP_X), top + i * (NODE_H + GAP_Y)
            where[n["node_id"]] = (x, y)
            fill, text = COLOURS.get(n["state"], ("#ffffff", "#1d2330"))
            drawing.nodes.append(
                {
                    "id": n["node_id"],
                    "state": n["state"],
                    "x": x,
                    "y": y,
                    "fill": fill,
                    "text": text,
                    "label": _label(n["node_id"]),
                    "row": n,
                }
            )
    for n in nodes:
        x2, y2 = where[n["node_id"]]
        for up in n["upstream"] or []:
            if up not in where:
                continue
            x1, y1 = where[up]
            sx, sy, tx, ty = x1 + NODE_W, y1 + NODE_H // 2, x2, y2 + NODE_H // 2
            bend = (tx - sx) / 2
            drawing.edges.append(
                {
                    "source": up,
                    "target": n["node_id"],
                    "d": f"M{sx},{sy} C{sx + bend},{sy} {tx - bend},{ty} {tx},{ty}",
                }
            )
    return drawing
