"""Cycle finding, for step dependencies and for composites calling composites.

Both uses want the same answer: not just "there is a cycle" but which names
form it, so the error can say `a → b → a`. Tarjan's algorithm finds the
strongly connected components in linear time; one concrete cycle is then
traced inside each component (finding *every* elementary cycle could be
exponential, and one per component is what a user needs to fix it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def find_cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per cyclic component: each list is in edge order, the last node leads back to the first.

    Nodes only mentioned as targets count as nodes without edges. Results are
    deterministic: each cycle starts at its smallest name, cycles are sorted.
    """
    graph = {node: sorted(set(targets)) for node, targets in edges.items()}
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, [])
    cycles = []
    for component in _components(graph):
        members = set(component)
        start = min(component)
        if len(component) == 1 and start not in graph[start]:
            continue
        cycles.append(_trace_cycle(graph, members, start))
    return sorted(cycles)


def find_composite_cycles(composites: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """Cycles among composites that call each other (`ResolvedTool.references` per composite name).

    Calls to names that are not composites (backend tools) cannot close a
    cycle and are ignored. Format a cycle with `format_cycle`.
    """
    edges = {name: [ref for ref in refs if ref in composites] for name, refs in composites.items()}
    return find_cycles(edges)


def format_cycle(cycle: list[str]) -> str:
    """`a → b → a`."""
    return " → ".join([*cycle, cycle[0]]) if cycle else ""


def _components(graph: Mapping[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (deep graphs must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = graph[node]
            if position < len(targets):
                work.append((node, position + 1))
                target = targets[position]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _trace_cycle(graph: Mapping[str, list[str]], members: set[str], start: str) -> list[str]:
    """A shortest path from `start` back to itself inside one component (breadth-first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in graph[node]:
                if target not in members:
                    continue
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return list(reversed(path))
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    return [start]
