"""Shared types of the benchmark: run settings, the per-run context, and scenario results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.load import LoadResult
from bench.procs import Managed, ProcessGroup


@dataclass(frozen=True)
class Settings:
    """Call counts per scenario; `--quick` shrinks them so the whole run stays under a minute."""

    quick: bool
    peers: bool = False
    baseline: Path | None = None
    """Another toolweave tree (`--baseline DIR`) whose gateway is measured beside this one, in the same rounds."""

    def n(self, quick: int, full: int) -> int:
        return quick if self.quick else full

    @property
    def rounds(self) -> int:
        return 4 if self.quick else 8

    @property
    def slow_rounds(self) -> int:
        """Rounds for comparisons whose calls take 50 ms or more (fan-out, workflows)."""
        return 2 if self.quick else 8

    @property
    def budget_s(self) -> float:
        """Time bound of one side-by-side comparison (`load.compare(max_seconds=...)`)."""
        return 3.5 if self.quick else 180.0


@dataclass
class Bench:
    """What every scenario gets: settings, the process group, a scratch folder, the HTTP backend."""

    settings: Settings
    group: ProcessGroup
    workdir: Path
    backend: Managed
    shared: Any = None
    """`--quick`: the one toolweave serving scenarios A, B, D, E and F (a GatewayRun, or why not)."""

    @property
    def backend_url(self) -> str:
        assert self.backend.url is not None
        return self.backend.url


@dataclass
class Check:
    """One target of the issue: the measured value against its bound."""

    name: str
    value: float | None
    bound: float
    unit: str
    higher_is_better: bool = False

    @property
    def ok(self) -> bool | None:
        if self.value is None or math.isnan(self.value):
            return None
        return self.value >= self.bound if self.higher_is_better else self.value <= self.bound

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": None if self.value is None else round(self.value, 4),
            "bound": self.bound,
            "unit": self.unit,
            "op": ">=" if self.higher_is_better else "<=",
            "ok": self.ok,
        }


@dataclass
class ScenarioResult:
    key: str
    title: str
    status: str = "ok"
    message: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def versus_calls(self, what: str, this: LoadResult, baseline: LoadResult) -> None:
        """p50 and the gateway's CPU per call of one call, this tree beside the baseline tree."""
        self.versus(f"{what} p50", "ms", this.p50, baseline.p50)
        if not math.isnan(this.cpu_ms_per_call) and not math.isnan(baseline.cpu_ms_per_call):
            self.versus(f"{what} CPU/call", "ms", this.cpu_ms_per_call, baseline.cpu_ms_per_call)

    def versus(self, what: str, unit: str, this: float, baseline: float) -> None:
        """One figure of this tree beside the baseline tree's (`--baseline`), measured in the same rounds."""
        self.metrics.setdefault("versus_baseline", []).append(
            {"what": what, "unit": unit, "this": this, "baseline": baseline, "ratio": ratio(this, baseline)}
        )

    def add_rows(self, results: dict[str, LoadResult] | list[LoadResult], note: str = "") -> None:
        values = results.values() if isinstance(results, dict) else results
        for result in values:
            self.rows.append({**result.summary(), "note": note})

    def skip(self, message: str) -> ScenarioResult:
        self.status, self.message = "skipped", message
        return self

    def fail(self, message: str) -> ScenarioResult:
        self.status, self.message = "failed", message
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "status": self.status,
            "message": self.message,
            "rows": self.rows,
            "metrics": self.metrics,
            "checks": [check.as_dict() for check in self.checks],
        }


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan
