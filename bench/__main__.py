"""`python -m bench [--quick] [--peers] [--only A,C] [--baseline DIR]`: toolweave vs direct calls (and peers,
and another toolweave tree), side by side.

Starts the backends and gateways itself (loopback only), measures, prints a table,
writes `bench/results/<date>.json`, and prints one JSON summary object as the last line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from bench.core import Bench, ScenarioResult, Settings
from bench.procs import ProcessGroup, install_signal_handlers, start_backend
from bench.report import render, summary_line, versus_table, write_json
from bench.scenarios.catalog import scenario_c
from bench.scenarios.composites import scenario_d, scenario_e, scenario_f
from bench.scenarios.federated import scenario_k
from bench.scenarios.http_api import scenario_i
from bench.scenarios.memory import scenario_g
from bench.scenarios.passthrough import scenario_a, scenario_b
from bench.scenarios.peer_gateways import scenario_h
from bench.scenarios.servers import scenario_l
from bench.scenarios.ui import scenario_j

Scenario = Callable[[Bench], Awaitable[ScenarioResult]]

SCENARIOS: dict[str, Scenario] = {
    "A": scenario_a,
    "B": scenario_b,
    "C": scenario_c,
    "D": scenario_d,
    "E": scenario_e,
    "F": scenario_f,
    "G": scenario_g,
    "H": scenario_h,
    "I": scenario_i,
    "J": scenario_j,
    "K": scenario_k,
    "L": scenario_l,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small call counts; finishes in under a minute")
    parser.add_argument("--peers", action="store_true", help="also run scenario H (FastMCP, ContextForge)")
    parser.add_argument("--only", default="", help="comma-separated scenario letters, e.g. A,D")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="another toolweave tree (with its own .venv) measured beside this one in the same rounds "
        "(scenarios A, D, E, F)",
    )
    return parser.parse_args(argv)


def selected(args: argparse.Namespace) -> list[str]:
    if args.only:
        keys = [k.strip().upper() for k in args.only.split(",") if k.strip()]
        unknown = [k for k in keys if k not in SCENARIOS]
        if unknown:
            sys.exit(f"unknown scenario(s): {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
        return keys
    return [k for k in SCENARIOS if k != "H" or args.peers]


async def run_one(key: str, bench: Bench) -> ScenarioResult:
    """Run one scenario; a crash becomes a failed result rather than ending the run."""
    started = time.monotonic()
    try:
        result = await SCENARIOS[key](bench)
    except Exception as exc:  # noqa: BLE001 - one crashed scenario must not end the run
        traceback.print_exc(file=sys.stderr)
        result = ScenarioResult(key, "crashed").fail(f"{type(exc).__name__}: {exc}")
    result.metrics["scenario_s"] = round(time.monotonic() - started, 1)
    print(render([result]), flush=True)
    return result


async def run_all(settings: Settings, keys: list[str], workdir: Path) -> list[ScenarioResult]:
    results: list[ScenarioResult] = []
    with ProcessGroup(log_dir=workdir) as group:
        backend = start_backend(group, "backend")
        bench = Bench(settings=settings, group=group, workdir=workdir, backend=backend)
        for key in keys:
            results.append(await run_one(key, bench))
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_signal_handlers()
    baseline = args.baseline.resolve() if args.baseline is not None else None
    if baseline is not None and not (baseline / ".venv" / "bin" / "toolweave").exists():
        sys.exit(f"--baseline {baseline}: no .venv/bin/toolweave there (create its virtualenv first)")
    settings = Settings(quick=args.quick, peers=args.peers, baseline=baseline)
    started = dt.datetime.now()
    workdir = Path(tempfile.mkdtemp(prefix="toolweave-bench-"))
    print(f"toolweave bench ({'quick' if args.quick else 'full'}); logs and configs in {workdir}", flush=True)
    keys = selected(args)
    results = anyio.run(run_all, settings, keys, workdir)
    tag = "-".join(
        filter(None, ["only-" + "".join(keys) if args.only else "", "baseline" if baseline else ""])
    )
    path = write_json(settings, results, started, tag=tag)
    table = versus_table(results, baseline)
    if table:
        print(table, flush=True)
    elapsed = (dt.datetime.now() - started).total_seconds()
    print(f"\nwrote {path} ({elapsed:.1f}s)", flush=True)
    print(summary_line(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
