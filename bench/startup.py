"""What a new user waits for, two trees side by side: `toolweave --help`, `validate --offline`, `serve`
until it answers HTTP and until every backend is connected, and `tools` through a running gateway
against `tools --local` (which starts the backends itself).

    .venv/bin/python -m bench.startup --vs-src ../before/src -c examples/demo.toml --runs 5
    .venv/bin/python -m bench.startup --vs ../before/.venv/bin/toolweave --only serve

A is this tree (`--toolweave PATH`, default the venv's, with this tree's `src` first on PYTHONPATH);
B is another tree: `--vs-src DIR` runs the same executable with DIR first on PYTHONPATH (an editable
install of either tree works), `--vs PATH` another executable. Each figure is measured A B A B ...,
on a fresh port and a fresh SQLite file per `serve`, and printed as the median (min, max) of the
wall time and of the CPU seconds (user + system of the command and the processes it waited for; for
`serve`, of the gateway process when it first answered). CPU is the stable figure on a loaded machine:
wall time there mostly measures the other processes. The last lines are a Markdown table. Each tree's
source is compiled to bytecode first and PYTHONDONTWRITEBYTECODE is ignored: an installed toolweave
does not compile its modules at every start, so neither does a measured one.

"listening" is the first answer of `GET /api/v1/backends` (any status); "all backends" is the first
answer in which every backend is `connected`.
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

POLL = 0.01
LIMIT = 120.0
HERE = Path(__file__).resolve().parents[1]
FIGURES = ("help", "validate", "serve", "tools")


@dataclass(frozen=True)
class Tree:
    label: str
    executable: str
    pythonpath: str | None

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, **extra}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: compiled once, not at every start
        if self.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [self.pythonpath, os.environ.get("PYTHONPATH")]))
        return env


@dataclass
class Sample:
    wall: float
    cpu: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_shot(tree: Tree, args: list[str], env: dict[str, str] | None = None) -> Sample:
    """Wall and CPU (its own and its waited-for children's) of one command run to its end."""
    started = time.monotonic()
    process = subprocess.Popen(
        [tree.executable, *args],
        env=env or tree.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{tree.label}: {' '.join(args)} exited with {process.returncode}")
    return Sample(wall, usage.ru_utime + usage.ru_stime)


def backends_status(port: int) -> list[dict[str, object]] | None:
    """The backends' descriptions, or None while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/backends", timeout=2) as answer:
            return json.loads(answer.read())["backends"]
    except urllib.error.HTTPError:
        return []
    except (OSError, ValueError):
        return None


def process_cpu(pid: int) -> float:
    """User + system seconds of one process so far (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(tree: Tree, config: Path, home: str) -> Iterator[tuple[subprocess.Popen[bytes], int, float]]:
    port = free_port()
    env = tree.env(TOOLWEAVE_DEMO_DB=str(Path(home) / "bench.db"), HOME=home)
    started = time.monotonic()
    process = subprocess.Popen(
        [tree.executable, "serve", "-c", str(config), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield process, port, started
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)


def wait_for(process: subprocess.Popen[bytes], ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not ready():
        if process.poll() is not None:
            raise RuntimeError(f"serve exited with {process.returncode} before {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"serve: not {what} within {LIMIT}s")
        time.sleep(POLL)


def one_start(tree: Tree, config: Path) -> tuple[Sample, Sample, Sample]:
    """(until listening, until every backend is connected) of one `serve` on a fresh database, then
    until listening again on the database that start created (the usual start)."""
    with tempfile.TemporaryDirectory() as home:
        with serving(tree, config, home) as (process, port, started):
            wait_for(process, lambda: backends_status(port) is not None, "listening")
            listening = Sample(time.monotonic() - started, process_cpu(process.pid))

            def connected() -> bool:
                backends = backends_status(port)
                return bool(backends) and all(b.get("status") == "connected" for b in backends or [])

            wait_for(process, connected, "connected")
            all_connected = Sample(time.monotonic() - started, process_cpu(process.pid))
        with serving(tree, config, home) as (process, port, started):
            wait_for(process, lambda: backends_status(port) is not None, "listening")
            again = Sample(time.monotonic() - started, process_cpu(process.pid))
        return listening, all_connected, again


def tools_both_ways(tree: Tree, config: Path) -> tuple[Sample, Sample]:
    """(`tools` through the running gateway, `tools --local`): the gateway is started first and every
    backend connected, so the first figure is the command's own cost."""
    with tempfile.TemporaryDirectory() as home, serving(tree, config, home) as (process, port, _started):

        def connected() -> bool:
            backends = backends_status(port)
            return bool(backends) and all(b.get("status") == "connected" for b in backends or [])

        wait_for(process, connected, "connected")
        env = tree.env(TOOLWEAVE_DEMO_DB=str(Path(home) / "bench.db"), HOME=home)
        via = one_shot(tree, ["tools", "-c", str(config)], env)
        local = one_shot(tree, ["tools", "--local", "-c", str(config)], env)
        return via, local


def measure(trees: list[Tree], config: Path, runs: int, only: set[str]) -> dict[str, dict[str, list[Sample]]]:
    """figure -> tree label -> samples, the trees taking turns within each run."""
    found: dict[str, dict[str, list[Sample]]] = {}

    def add(figure: str, label: str, sample: Sample) -> None:
        found.setdefault(figure, {}).setdefault(label, []).append(sample)

    for _ in range(runs):
        for tree in trees:
            if "help" in only:
                add("`toolweave --help`", tree.label, one_shot(tree, ["--help"]))
            if "validate" in only:
                add(
                    "`validate --offline`",
                    tree.label,
                    one_shot(tree, ["validate", "--offline", "-c", str(config)]),
                )
            if "serve" in only:
                listening, connected, again = one_start(tree, config)
                add("`serve`, new database: first HTTP answer", tree.label, listening)
                add("`serve`, new database: every backend connected", tree.label, connected)
                add("`serve` again (database exists): first HTTP answer", tree.label, again)
            if "tools" in only:
                via, local = tools_both_ways(tree, config)
                add("`tools` (gateway running)", tree.label, via)
                add("`tools --local` (starts the backends)", tree.label, local)
    return found


def median(samples: list[Sample], attribute: str) -> float:
    return statistics.median(getattr(sample, attribute) for sample in samples)


def spread(samples: list[Sample], attribute: str) -> str:
    values = [getattr(sample, attribute) for sample in samples]
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def report(found: dict[str, dict[str, list[Sample]]], trees: list[Tree]) -> None:
    a, b = (tree.label for tree in trees) if len(trees) == 2 else (trees[0].label, None)
    header = ["what", f"{a}: CPU", f"{a}: wall"]
    if b is not None:
        header += [f"{b}: CPU", f"{b}: wall", f"{a}/{b} CPU", f"{a}/{b} wall"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for figure, by_tree in found.items():
        row = [figure, spread(by_tree[a], "cpu"), spread(by_tree[a], "wall")]
        if b is not None:
            row += [spread(by_tree[b], "cpu"), spread(by_tree[b], "wall")]
            for attribute in ("cpu", "wall"):
                row.append(f"{median(by_tree[a], attribute) / median(by_tree[b], attribute):.2f}")
        print("| " + " | ".join(row) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolweave", default=str(Path(sys.executable).parent / "toolweave"))
    parser.add_argument("--vs", help="the other tree's toolweave executable (B)")
    parser.add_argument("--vs-src", help="the other tree's src folder (B: this executable, that source)")
    parser.add_argument("-c", "--config", type=Path, default=HERE / "examples" / "demo.toml")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default=",".join(FIGURES), help=f"some of: {', '.join(FIGURES)}")
    args = parser.parse_args()
    only = {part.strip() for part in args.only.split(",") if part.strip()}
    if not only <= set(FIGURES):
        parser.error(f"--only takes {', '.join(FIGURES)}")
    trees = [Tree("A", args.toolweave, str(HERE / "src"))]
    if args.vs or args.vs_src:
        trees.append(Tree("B", args.vs or args.toolweave, args.vs_src))
    for tree in trees:  # bytecode written before the first run, as `pip install` does
        if tree.pythonpath:
            subprocess.run([sys.executable, "-m", "compileall", "-q", tree.pythonpath], check=True)
    found = measure(trees, args.config.resolve(), args.runs, only)
    load = os.getloadavg()
    for tree in trees:
        print(
            f"{tree.label} = {tree.executable}"
            + (f" with PYTHONPATH {tree.pythonpath}" if tree.pythonpath else "")
        )
    print(f"config {args.config}, {args.runs} runs, trees in turn")
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({os.cpu_count()} cores)")
    report(found, trees)


if __name__ == "__main__":
    main()
