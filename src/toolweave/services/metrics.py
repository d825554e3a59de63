"""Prometheus metrics: calls, errors and latency, by tool, backend and tenant, recorded in ONE place.

The executor calls `Metrics.observe` after every call it dispatched (client
calls and every inner call of a composite), so nothing is counted twice and
nothing is missed. Labels come only from the catalog and the caller's
authenticated tenant (never from a name a client typed), which keeps the
number of series bounded. The cost per call is a few dict lookups: label
children are cached per (tool, backend, kind, tenant).

Who reads what: the operator (tenant None) every series; a tenant only the
series labelled with its own tenant, and the tool count it is listed, so a
tenant learns nothing of another's composites or traffic.

Every series carries an `instance` label (`gateway.instance`, else `hostname:pid`), added at
scrape time (`Labelled`), so the series of replicas scraped one by one, or summed, stay apart.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import mcp_types as types
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.metrics_core import Metric

from toolweave.catalog.catalog import Entry
from toolweave.executor.trace import origin

logger = logging.getLogger("toolweave.calls")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
COMPOSITE_BACKEND = "(composite)"
"""The `backend` label of composite tools, which run on no single backend."""
OPERATOR_TENANT = ""
"""The `tenant` label of calls made without a tenant (the local operator, auth off)."""
TOOLS_GAUGE = "toolweave_tools"


def default_instance() -> str:
    """A replica's name when `gateway.instance` is empty: unique per process on a host."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Metrics:
    """One registry per app, so several gateways (or tests) in one process do not collide."""

    def __init__(self, registry: CollectorRegistry | None = None, *, instance: str = "") -> None:
        self.registry = registry or CollectorRegistry()
        self.instance = instance or default_instance()
        labels = ("tool", "backend", "kind", "tenant")
        self.calls = Counter("toolweave_tool_calls", "Tool calls", labels, registry=self.registry)
        self.errors = Counter(
            "toolweave_tool_errors", "Tool calls whose result was an error", labels, registry=self.registry
        )
        self.latency = Histogram(
            "toolweave_tool_call_seconds",
            "Tool call latency in seconds",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.backend_up = Gauge(
            "toolweave_backend_connected",
            "1 when the backend is connected",
            ("backend",),
            registry=self.registry,
        )
        self.tools = Gauge(TOOLS_GAUGE, "Tools in the catalog", registry=self.registry)
        self.results = Counter(
            "toolweave_tool_results",
            "tool_result events by the tool's origin (backend, python, federated, composite) and status",
            ("source", "status"),
            registry=self.registry,
        )
        self._children: dict[tuple[str, str, str, str], tuple[Any, Any, Any]] = {}
        self._results: dict[tuple[str, str], Any] = {}

    def observe(
        self, entry: Entry, result: types.CallToolResult, seconds: float, tenant: str | None = None
    ) -> None:
        """The gateway's `call_observer` (`tenant`: the caller's): must stay cheap and must never raise."""
        try:
            outcome = (origin(entry)[0], "error" if result.is_error else "ok")
            counter = self._results.get(outcome)
            if counter is None:
                counter = self._results[outcome] = self.results.labels(*outcome)
            counter.inc()
            key = (
                entry.name,
                entry.backend.name if entry.backend is not None else COMPOSITE_BACKEND,
                entry.kind,
                tenant if tenant is not None else OPERATOR_TENANT,
            )
            children = self._children.get(key)
            if children is None:
                children = (self.calls.labels(*key), self.errors.labels(*key), self.latency.labels(*key))
                self._children[key] = children
            calls, errors, latency = children
            calls.inc()
            latency.observe(seconds)
            if result.is_error:
                errors.inc()
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "tool call",
                    extra={
                        "tool": key[0],
                        "backend": key[1],
                        "tenant": key[3],
                        "is_error": bool(result.is_error),
                        "seconds": seconds,
                    },
                )
        except Exception:
            logger.debug("recording metrics failed", exc_info=True)

    def render(self, gateway: Any, tenant: str | None = None) -> tuple[bytes, str]:
        """The exposition text for the operator (`tenant` None: every series) or for one tenant
        (its own series only); backend and catalog gauges are refreshed at scrape time."""
        for backend in gateway.backends.values():
            self.backend_up.labels(backend.name).set(1 if backend.status == "connected" else 0)
        if tenant is None:
            self.tools.set(sum(1 for _ in gateway.catalog.visible()))
            return generate_latest(Labelled(self.registry, self.instance)), CONTENT_TYPE_LATEST
        view = TenantView(self.registry, tenant, len(gateway.catalog.listed_for(tenant)))
        return generate_latest(Labelled(view, self.instance)), CONTENT_TYPE_LATEST


class Labelled:
    """A collector's families with `instance` added to every sample (a collector's own wins)."""

    def __init__(self, source: Any, instance: str) -> None:
        self.source = source
        self.instance = instance

    def collect(self) -> Any:
        for family in self.source.collect():
            family.samples = [
                sample._replace(labels={"instance": self.instance, **sample.labels})
                for sample in family.samples
            ]
            yield family


class TenantView:
    """A registry as one tenant may read it: series labelled with another tenant are left out, and
    the tool count is the tenant's own listing."""

    def __init__(self, registry: CollectorRegistry, tenant: str, tools: int) -> None:
        self.registry = registry
        self.tenant = tenant
        self.tool_count = tools

    def collect(self) -> Any:
        for family in self.registry.collect():
            view = Metric(family.name, family.documentation, family.type, family.unit)
            if family.name == TOOLS_GAUGE:
                view.add_sample(TOOLS_GAUGE, {}, float(self.tool_count))
            else:
                view.samples = [
                    s for s in family.samples if s.labels.get("tenant", self.tenant) == self.tenant
                ]
            yield view
