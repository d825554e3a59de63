"""Stand-ins for the backends of seed 003's four ToolHive examples, as a stdio MCP server.

`OPS_BACKEND` picks which backend this process plays: `kubectl`, `slack`,
`prometheus`, `jira`, `registry` or `metrics`; it then exposes that backend's
tools under the names the examples use (`kubectl.apply` is backend `kubectl`,
tool `apply`). Every tool is offline: it answers with what it was asked (plus
which backend answered), so tests can check the arguments a workflow sent.

A few inputs fail on purpose, so failure paths can be driven from a workflow's
parameters: `kubectl/validate` in namespace `invalid`, `kubectl/apply` into
namespace `locked` (always) or `flaky-...` (its first call only),
`jira/create_issue` with `jira-down` in the summary, `metrics/evaluate` with a
success rate below 0.5.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

BACKEND = os.environ.get("OPS_BACKEND", "kubectl")
server = MCPServer(f"ops-{BACKEND}")
READ = ToolAnnotations(read_only_hint=True)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
_applied: dict[str, int] = {}
"""kubectl/apply calls per namespace, for the one that fails only its first time."""


def _answer(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"backend": BACKEND, "tool": tool, **{k: v for k, v in arguments.items() if v is not None}}


def kubectl() -> None:
    @server.tool(annotations=READ)
    def validate(namespace: str, manifest: str) -> dict[str, Any]:
        """Validate a manifest against a namespace."""
        if namespace == "invalid":
            raise ToolError(f"{manifest} is not valid in namespace {namespace!r}")
        return _answer("validate", namespace=namespace, manifest=manifest, valid=True)

    @server.tool(annotations=WRITE)
    def apply(namespace: str, manifest: str, replicas: int | None = None) -> dict[str, Any]:
        """Apply a manifest."""
        _applied[namespace] = _applied.get(namespace, 0) + 1
        if namespace == "locked":
            raise ToolError('namespace "locked" is locked')
        if namespace.startswith("flaky-") and _applied[namespace] == 1:
            raise ToolError(f"the API server did not answer for {namespace} (try again)")
        return _answer("apply", namespace=namespace, manifest=manifest, replicas=replicas, applied=True)

    @server.tool(annotations=READ)
    def wait(resource: str, condition: str, timeout: str, namespace: str | None = None) -> dict[str, Any]:
        """Wait for a resource condition."""
        return _answer(
            "wait", resource=resource, condition=condition, timeout=timeout, namespace=namespace, ready=True
        )

    @server.tool(annotations=READ)
    def get(resource: str, namespace: str, selector: str) -> dict[str, Any]:
        """List resources."""
        return _answer("get", resource=resource, namespace=namespace, selector=selector, pods=3)

    @server.tool(annotations=READ)
    def logs(namespace: str, selector: str, since: str) -> dict[str, Any]:
        """Read logs."""
        return _answer("logs", namespace=namespace, selector=selector, since=since, lines=42)

    @server.tool(annotations=READ)
    def events(namespace: str, resource: str) -> dict[str, Any]:
        """Read recent events."""
        return _answer("events", namespace=namespace, resource=resource, events=2)

    @server.tool(annotations=WRITE)
    def patch(resource: str, image: str, replicas: int | None = None) -> dict[str, Any]:
        """Patch a deployment's image (and replicas)."""
        return _answer("patch", resource=resource, image=image, replicas=replicas, patched=True)


def slack() -> None:
    @server.tool(annotations=WRITE)
    def send(channel: str, message: str) -> dict[str, Any]:
        """Send a message to a channel."""
        return _answer("send", channel=channel, message=message, sent=True)


def prometheus() -> None:
    @server.tool(annotations=READ)
    def query(query: str, time: str | None = None, duration: str | None = None) -> dict[str, Any]:
        """Run a PromQL query."""
        return _answer("query", query=query, time=time, duration=duration, value=0.995)


def jira() -> None:
    @server.tool(annotations=WRITE)
    def create_issue(project: str, summary: str, description: str) -> dict[str, Any]:
        """Create an issue."""
        if "jira-down" in summary:
            raise ToolError("jira is down (503)")
        return _answer("create_issue", project=project, summary=summary, description=description, key="SRE-1")


def registry() -> None:
    @server.tool(annotations=READ)
    def inspect(image: str) -> dict[str, Any]:
        """Inspect an image."""
        return _answer("inspect", image=image, digest="sha256:abc")


def metrics() -> None:
    @server.tool(annotations=READ)
    def evaluate(success_rate: float, deployment: str) -> dict[str, Any]:
        """Evaluate a deployment's metrics against a success rate."""
        if success_rate < 0.5:
            raise ToolError(f"success rate threshold {success_rate} is not plausible for {deployment}")
        return _answer("evaluate", success_rate=success_rate, deployment=deployment, passed=True)


{
    "kubectl": kubectl,
    "slack": slack,
    "prometheus": prometheus,
    "jira": jira,
    "registry": registry,
    "metrics": metrics,
}[BACKEND]()

if __name__ == "__main__":
    server.run("stdio")
