"""Start-up of `toolweave serve`, two trees side by side: seconds until the gateway answers HTTP, and
until every backend is connected.

    .venv/bin/python -m bench.startup --vs ../before/.venv/bin/toolweave -c examples/demo.toml --runs 5

Runs A (this tree's `toolweave`, or `--toolweave PATH`) and B (`--vs PATH`) in turn, A B A B ..., each
on a fresh port and a fresh SQLite file, and prints the median, min and max of each figure and the
A/B ratio of the medians. "listening" is the first answer of `GET /api/v1/backends` (any status);
"all backends" is the first answer in which every backend is `connected`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

POLL = 0.02
LIMIT = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def backends_status(port: int) -> list[dict[str, object]] | None:
    """The backends' descriptions, or None while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/backends", timeout=2) as answer:
            return json.loads(answer.read())["backends"]
    except urllib.error.HTTPError:
        return []
    except (OSError, ValueError):
        return None


def one_start(toolweave: str, config: Path) -> tuple[float, float]:
    """(seconds until listening, seconds until every backend is connected) of one `serve`."""
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "TOOLWEAVE_DEMO_DB": str(Path(folder) / "bench.db"), "HOME": folder}
        started = time.monotonic()
        process = subprocess.Popen(
            [toolweave, "serve", "-c", str(config), "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        listening = connected = None
        try:
            while time.monotonic() - started < LIMIT and connected is None:
                if process.poll() is not None:
                    raise RuntimeError(f"{toolweave} serve exited with {process.returncode}")
                backends = backends_status(port)
                now = time.monotonic() - started
                if backends is not None and listening is None:
                    listening = now
                if backends and all(b.get("status") == "connected" for b in backends):
                    connected = now
                time.sleep(POLL)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)
        if listening is None or connected is None:
            raise RuntimeError(f"{toolweave} serve did not come up within {LIMIT}s")
        return listening, connected


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} s  (min {min(values):.2f}, max {max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolweave", default=str(Path(sys.executable).parent / "toolweave"))
    parser.add_argument("--vs", required=True, help="the other tree's toolweave executable (B)")
    parser.add_argument("-c", "--config", type=Path, default=Path("examples/demo.toml"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, tuple[list[float], list[float]]] = {"A": ([], []), "B": ([], [])}
    for _ in range(args.runs):
        for label, executable in (("A", args.toolweave), ("B", args.vs)):
            listening, connected = one_start(executable, args.config.resolve())
            figures[label][0].append(listening)
            figures[label][1].append(connected)
    load = os.getloadavg()
    print(f"A = {args.toolweave}\nB = {args.vs}\nconfig {args.config}, {args.runs} runs each, in turn")
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({os.cpu_count()} cores)")
    for index, what in enumerate(("listening", "all backends")):
        a, b = figures["A"][index], figures["B"][index]
        ratio = statistics.median(a) / statistics.median(b)
        print(f"{what:>13}  A {summary(a)}   B {summary(b)}   A/B {ratio:.2f}")


if __name__ == "__main__":
    main()
