"""The toolweave configurations the scenarios serve (docs/configuration.md shapes, written as TOML)."""

from __future__ import annotations

from typing import Any

ROUTER_RULES = 20
WORKFLOW_STEPS = 50
FANOUT_TARGETS = 5


def http_backend(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "url": url}


def stdio_backend(name: str, argv: list[str]) -> dict[str, Any]:
    return {"name": name, "command": argv[0], "args": argv[1:]}


def fanout_backends(url: str) -> list[dict[str, Any]]:
    """Five backend entries (`f1`..`f5`) for one backend process: five distinct targets."""
    return [http_backend(f"f{i}", url) for i in range(1, FANOUT_TARGETS + 1)]


def fanout_tool() -> dict[str, Any]:
    return {
        "name": "fan",
        "description": "Five 50 ms tools at once",
        "tools": [f"f{i}/sleep50" for i in range(1, FANOUT_TARGETS + 1)],
        "strategy": "parallel",
    }


def router_tool(backend: str = "b1") -> dict[str, Any]:
    """A rule-based router with 20 `contains` rules; `url` maps onto echo's `text`.

    `ROUTED_INPUT` matches only the last rule (priority 20), so all 20 are evaluated.
    """
    operations = [
        {"slug": f"op{i:02d}", "tool": f"{backend}/echo", "parameter_mapping": {"url": "text"}}
        for i in range(ROUTER_RULES)
    ]
    operations.append({"slug": "generic", "tool": f"{backend}/echo", "parameter_mapping": {"url": "text"}})
    rules = [
        {
            "condition": {
                "type": "contains",
                "field": "url",
                "value": f"site{i:02d}.example",
                "caseSensitive": False,
            },
            "operation": f"op{i:02d}",
            "priority": i + 1,
        }
        for i in range(ROUTER_RULES)
    ]
    return {
        "name": "route",
        "description": "Route a URL to the echo tool by 20 rules",
        "routing": "rule_based",
        "operations": operations,
        "rules": rules,
        "default_operation": "generic",
    }


ROUTED_INPUT = {"url": f"https://site{ROUTER_RULES - 1:02d}.example/page"}


def chain_workflow(backend: str = "b1") -> dict[str, Any]:
    """50 no-op steps, each depending on the one before."""
    steps: list[dict[str, Any]] = []
    for i in range(WORKFLOW_STEPS):
        step: dict[str, Any] = {"id": f"s{i:02d}", "tool": f"{backend}/noop", "arguments": {}}
        if i:
            step["dependsOn"] = [f"s{i - 1:02d}"]
        steps.append(step)
    return {"name": "wf_chain", "description": "50 no-op steps in a chain", "steps": steps}


DAG_WIDTH = WORKFLOW_STEPS - 2


def dag_workflow(backend: str = "b1") -> dict[str, Any]:
    """50 no-op steps as a wide DAG: one root, 48 parallel steps, one join (depth 3)."""
    steps: list[dict[str, Any]] = [{"id": "root", "tool": f"{backend}/noop", "arguments": {}}]
    middle = [f"m{i:02d}" for i in range(DAG_WIDTH)]
    steps += [
        {"id": sid, "tool": f"{backend}/noop", "arguments": {}, "dependsOn": ["root"]} for sid in middle
    ]
    steps.append({"id": "join", "tool": f"{backend}/noop", "arguments": {}, "dependsOn": middle})
    return {
        "name": "wf_dag",
        "description": "50 no-op steps: root, 48 in parallel, join",
        "maxParallel": DAG_WIDTH,
        "steps": steps,
    }
