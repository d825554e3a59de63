"""The results table, the JSON file under bench/results/, and the one-line JSON summary."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.core import ScenarioResult, Settings
from bench.procs import BENCH_DIR

RESULTS_DIR = BENCH_DIR / "results"

SUMMARY_KEYS: dict[str, tuple[str, str]] = {
    "passthrough_overhead_ms_p50": ("A", "overhead_ms_p50_c1"),
    "passthrough_ratio_c1": ("A", "ratio_p50_c1"),
    "throughput_ratio_c8": ("A", "throughput_ratio_c8"),
    "direct_p50_ms": ("A", "direct_p50_ms_c1"),
    "big_overhead_ms_p50": ("B", "overhead_ms_p50"),
    "tools_list_ms": ("C", "tools_list_ms"),
    "tools_list_sdk_client_ms": ("C", "tools_list_sdk_client_ms"),
    "call_overhead_ms_300_tools": ("C", "call_overhead_ms_p50_300_tools"),
    "fanout_ratio": ("D", "fanout_ratio"),
    "router_decision_ms": ("E", "router_decision_ms"),
    "workflow_ms_per_step": ("F", "workflow_ms_per_step"),
    "rss_idle_mb": ("G", "rss_idle_mb"),
    "rss_growth_mb": ("G", "rss_growth_mb"),
}


def _fmt(value: Any, width: int) -> str:
    text = str(value)
    if isinstance(value, float):
        text = "-" if math.isnan(value) else f"{value:.2f}"
    return text[:width].rjust(width) if isinstance(value, int | float) else text[:width].ljust(width)


def _table(rows: Sequence[dict[str, Any]]) -> list[str]:
    columns = [("label", 34), ("note", 22), ("calls", 6), ("errors", 6), ("p50_ms", 8), ("p95_ms", 8)]
    columns += [("p99_ms", 8), ("calls_per_s", 10), ("cpu_ms_per_call", 15)]
    header = " ".join(
        name.ljust(width) if i < 2 else name.rjust(width) for i, (name, width) in enumerate(columns)
    )
    lines = [header, "-" * len(header)]
    lines += [" ".join(_fmt(row.get(name, ""), width) for name, width in columns) for row in rows]
    return lines


def _metric_lines(result: ScenarioResult) -> list[str]:
    lines = []
    for name, value in result.metrics.items():
        if name == "versus_baseline":
            continue
        if isinstance(value, float):
            lines.append(f"  {name}: {value:.3f}")
        elif isinstance(value, int | str | list):
            lines.append(f"  {name}: {value}")
    for check in result.checks:
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[check.ok]
        shown = "-" if check.value is None else f"{check.value:.3f}"
        op = ">=" if check.higher_is_better else "<="
        lines.append(
            f"  [{verdict}] {check.name}: {shown} {check.unit} (target {op} {check.bound} {check.unit})"
        )
    return lines


def render(results: Sequence[ScenarioResult]) -> str:
    """The whole human-readable report."""
    out: list[str] = []
    for result in results:
        out.append("")
        out.append(f"== {result.key}. {result.title} [{result.status}]")
        if result.message:
            out.append(f"  {result.message.splitlines()[0][:300]}")
        if result.rows:
            out += _table(result.rows)
        out += _metric_lines(result)
    return "\n".join(out)


def versus_rows(results: Sequence[ScenarioResult]) -> list[dict[str, Any]]:
    """Every figure measured beside the baseline tree (`--baseline`), in scenario order."""
    return [row for result in results for row in result.metrics.get("versus_baseline", [])]


def versus_table(results: Sequence[ScenarioResult], baseline: Any) -> str:
    """This tree beside the baseline tree, from the same interleaved rounds (empty without `--baseline`)."""
    rows = versus_rows(results)
    if not rows:
        return ""
    lines = [
        "",
        f"== this tree vs the baseline ({baseline}), same rounds",
        f"{'':46} {'unit':>8} {'baseline':>10} {'this':>10} {'this/base':>10}",
    ]
    for row in rows:
        lines.append(
            f"{row['what'][:46]:46} {row['unit']:>8} {_fmt(row['baseline'], 10)} {_fmt(row['this'], 10)} "
            f"{_fmt(row['ratio'], 10)}"
        )
    return "\n".join(lines)


def _metric(results: Sequence[ScenarioResult], key: str, name: str) -> float | None:
    for result in results:
        if result.key == key and name in result.metrics:
            value = result.metrics[name]
            if isinstance(value, int | float) and not math.isnan(value):
                return round(float(value), 4)
    return None


def summary(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """The headline numbers (None where a scenario was skipped) and every target's verdict."""
    out: dict[str, Any] = {
        name: _metric(results, key, metric) for name, (key, metric) in SUMMARY_KEYS.items()
    }
    checks = [c for r in results for c in r.checks]
    out["targets_met"] = sum(1 for c in checks if c.ok)
    out["targets_missed"] = sum(1 for c in checks if c.ok is False)
    if versus_rows(results):
        out["versus_baseline"] = versus_rows(results)
    out["skipped"] = [r.key for r in results if r.status == "skipped"]
    out["failed"] = [r.key for r in results if r.status == "failed"]
    return out


def _environment() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "mcp": version("mcp"),
        "toolweave": version("toolweave"),
        "loadavg_at_end": list(os.getloadavg()),
    }


def write_json(
    settings: Settings, results: Sequence[ScenarioResult], started: dt.datetime, tag: str = ""
) -> Path:
    """Write `bench/results/<YYYY-MM-DD>[-quick][-tag].json`; return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    suffix = ("-quick" if settings.quick else "") + (f"-{tag}" if tag else "")
    name = started.strftime("%Y-%m-%d") + suffix + ".json"
    path = RESULTS_DIR / name
    document = {
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round((dt.datetime.now() - started).total_seconds(), 1),
        "settings": {
            "quick": settings.quick,
            "peers": settings.peers,
            "baseline": settings.baseline.name if settings.baseline else None,  # no machine paths in results
        },
        "environment": _environment(),
        "summary": summary(results),
        "scenarios": [result.as_dict() for result in results],
    }
    path.write_text(json.dumps(clean(document), indent=2, default=_json_default, allow_nan=False) + "\n")
    return path


def _json_default(value: Any) -> Any:
    return str(value)


def clean(value: Any) -> Any:
    """The value with NaN and infinities replaced by None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def summary_line(results: Sequence[ScenarioResult]) -> str:
    """One JSON object on one line (printed last)."""
    return json.dumps(clean(summary(results)), separators=(",", ":"), default=_json_default, allow_nan=False)
