"""A workflow's steps as a graph, laid out on the server and drawn as SVG (no script needed).

Each step goes in the column after its deepest dependency, so every edge points right;
steps of one column are stacked in the order written. A step's kind (tool, elicitation,
forEach) and its condition are marked; on a run's page each step is coloured by its state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.common_types import object_at

NODE_W, NODE_H = 170, 46
GAP_X, GAP_Y = 60, 18
MAX_STEPS = 500
"""A larger workflow is listed in its table only (the picture would not be readable anyway)."""


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    x: int
    y: int
    kind: str
    detail: str
    condition: str
    status: str


@dataclass(frozen=True, slots=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int
    conditional: bool


@dataclass(slots=True)
class Dag:
    width: int = 0
    height: int = 0
    node_w: int = NODE_W
    node_h: int = NODE_H
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)


def _depends(step: dict[str, Any]) -> list[str]:
    found = step.get("dependsOn", step.get("depends_on")) or []
    return [str(dep) for dep in found] if isinstance(found, list) else []


def _kind(step: dict[str, Any]) -> tuple[str, str]:
    kind = str(step.get("type") or "tool")
    if kind == "forEach":
        inner = object_at(step, "step")
        return "forEach", f"each → {inner.get('tool') or '?'}"
    if kind == "elicitation":
        return "elicitation", "asks the user"
    return kind, str(step.get("tool") or "")


def _columns(steps: list[dict[str, Any]]) -> dict[str, int]:
    ids = {str(step.get("id")) for step in steps}
    deps = {str(step.get("id")): [d for d in _depends(step) if d in ids] for step in steps}
    column: dict[str, int] = {}

    def place(step_id: str, seen: frozenset[str]) -> int:
        if step_id in column:
            return column[step_id]
        if step_id in seen:  # a cycle (the validator reports it): stop here
            return 0
        value = max((place(d, seen | {step_id}) + 1 for d in deps.get(step_id, [])), default=0)
        column[step_id] = value
        return value

    for step_id in deps:
        place(step_id, frozenset())
    return column


def layout(steps: list[Any], statuses: Mapping[str, str] | None = None) -> Dag | None:
    """The picture of `steps` (definition dicts), or None when there is nothing sensible to draw."""
    steps = [step for step in steps if isinstance(step, dict) and step.get("id")]
    if not steps or len(steps) > MAX_STEPS:
        return None
    statuses = statuses or {}
    columns = _columns(steps)
    rows: dict[int, int] = {}
    dag = Dag()
    where: dict[str, tuple[int, int]] = {}
    for step in steps:
        step_id = str(step["id"])
        col = columns.get(step_id, 0)
        row = rows.get(col, 0)
        rows[col] = row + 1
        x, y = 10 + col * (NODE_W + GAP_X), 10 + row * (NODE_H + GAP_Y)
        where[step_id] = (x, y)
        kind, detail = _kind(step)
        condition = step.get("condition")
        dag.nodes.append(
            Node(
                id=step_id,
                x=x,
                y=y,
                kind=kind,
                detail=detail,
                condition="" if condition in (None, True) else str(condition),
                status=statuses.get(step_id, ""),
            )
        )
    for step in steps:
        x2, y2 = where[str(step["id"])]
        for dep in _depends(step):
            if dep in where:
                x1, y1 = where[dep]
                dag.edges.append(
                    Edge(
                        x1 + NODE_W,
                        y1 + NODE_H // 2,
                        x2,
                        y2 + NODE_H // 2,
                        step.get("condition") not in (None, True),
                    )
                )
    dag.width = 20 + (max(columns.values(), default=0) + 1) * (NODE_W + GAP_X)
    dag.height = 20 + max(rows.values(), default=1) * (NODE_H + GAP_Y)
    return dag
