"""Reading a DAG definition from a YAML or JSON file, keeping the line of each part so that
every problem names its line. Pure (reads the file it is given)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..errors import PgschedError
from .definition import Dag, DagErrors, Problem
from .validation import validate


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
            raise DagErrors(
                str(source), [Problem("file", str(source), f"is not valid JSON: {exc}")]
            ) from None
        except ValueError:
            pass  # YAML's reader reports where the syntax breaks
        else:
            try:
                return validate(data, None, str(source))
            except DagErrors:
                return validate(
                    data, Lines(yaml.compose(text, Loader=yaml.SafeLoader)), str(source)
                )
    loader = yaml.SafeLoader(text)
    try:  # what yaml.safe_load does, keeping the node tree for the line numbers
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = Problem(
            "file",
            str(source),
            f"is not valid YAML or JSON{where}: {getattr(exc, 'problem', None) or exc}",
            mark.line + 1 if mark else None,
        )
        raise DagErrors(str(source), [problem]) from None
    finally:
        loader.dispose()
    return validate(data, Lines(root), str(source))


class _NotJson(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value (JSON has no NaN or Infinity)")


def parse(data: Any) -> Dag:
    """Validate a DAG given as plain data (the parsed YAML/JSON: a dict with ``name`` and
    ``nodes``). Raises :class:`DagErrors` (a ValidationError) listing every problem, with
    ``line`` None. See :func:`load`."""
    return validate(data, None, "DAG definition")


class Lines:
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
