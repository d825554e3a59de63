"""Prometheus metrics: calls, errors and latency, by tool, backend and tenant, recorded in ONE place.

The executor calls `Metrics.observe` after every call it dispatched (client
calls and every inner call of a composite), so nothing is counted twice and
nothing is missed. Labels come only from the catalog and the caller's
authenticated tenant (never from a name a client typed), which keeps the
number of series bounded. The cost per call is one dict lookup and the Prometheus client's own
additions: the label children are looked up once per catalog entry and tenant (`_Series`).

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
        self._series: dict[tuple[str, str | None], _Series] = {}
        """(tool name, tenant) → the label children its calls go to, for the entry last seen."""

    def observe(
        self, entry: Entry, result: types.CallToolResult, seconds: float, tenant: str | None = None
    ) -> None:
        """The gateway's `call_observer` (`tenant`: the caller's): must stay cheap and must never raise."""
        try:
            series = self._series.get((entry.name, tenant))
            if series is None or series.entry is not entry:
                series = self._series[(entry.name, tenant)] = self._series_of(entry, tenant)
            series.calls.inc()
            series.latency.observe(seconds)
            if result.is_error:
                series.errors.inc()
                failed = series.failed
                if failed is None:
                    failed = series.failed = self._result(series.source, "error")
                failed.inc()
            else:
                ok = series.ok
                if ok is None:
                    ok = series.ok = self._result(series.source, "ok")
                ok.inc()
            if logger.isEnabledFor(logging.DEBUG):
                key = series.key
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

    def _series_of(self, entry: Entry, tenant: str | None) -> _Series:
        """The label children of one catalog entry's calls by one tenant (looked up once per entry
        and tenant: a replaced entry of the same name, e.g. after a refresh, is looked up anew)."""
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
        return _Series(entry, key, origin(entry)[0], *children)

    def _result(self, source: str, status: str) -> Any:
        """The `toolweave_tool_results` child of (source, status), made on its first call (a status
        never seen has no series)."""
        counter = self._results.get((source, status))
        if counter is None:
            counter = self._results[(source, status)] = self.results.labels(source, status)
        return counter

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


class _Series:
    """What one catalog entry's calls by one tenant count into: its label children (the counters of
    `toolweave_tool_results` made on first use, so a status never seen has no series)."""

    __slots__ = ("calls", "entry", "errors", "failed", "key", "latency", "ok", "source")

    def __init__(
        self, entry: Entry, key: tuple[str, str, str, str], source: str, calls: Any, errors: Any, latency: Any
    ) -> None:
        self.entry = entry
        self.key = key
        self.source = source
        self.calls = calls
        self.errors = errors
        self.latency = latency
        self.ok: Any = None
        self.failed: Any = None


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
