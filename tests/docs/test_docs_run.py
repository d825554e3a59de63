"""Every shell and curl example of the README and docs/*.md runs, as written, against the demo.

For each file with examples the test makes a temporary copy of the repository (the files git
tracks, as the working tree has them), so nothing in the checkout is written (the demo
database, keys, exported files all land in the copy) and nothing an earlier run left there
(a `toolweave.toml` from `init`) is read. It starts the demo gateway there exactly as README
command 1 does (`toolweave serve -c examples/demo.toml`, on a free port), waits for its
backends, and runs the file's blocks in order in ONE bash session, as a reader pasting them
into one terminal would: a variable set in one block (`KEY=$(toolweave keys create ...)`) is
there in the next. Files run two at a time (`RUNNERS`), each in its own copy with its own
gateway and ports.

What the test changes, and nothing else:

* **ports**: `127.0.0.1:8080`, `localhost:8080` and `--port 8080` become the test gateway's
  port; any other `80NN` in those places becomes another free port (the same one throughout
  the file), for examples that start a second gateway;
* **curl** runs with `--fail-with-body`: an HTTP error status fails the block;
* the session runs `set -eo pipefail` in the copy's root, with the copy's `.venv/bin` first on
  PATH (shims for the programs of the environment running the tests; `pip` refuses), `HOME` a
  fresh directory (so no client configuration or gateway state file of the machine is read or
  written) holding only a Claude Desktop configuration with two servers (`CLAUDE_DESKTOP`, for
  `toolweave init claude-desktop`), no `TOOLWEAVE_*` or `XDG_*` variable of the caller's
  environment, and stdin empty.
  As in any `set -e` shell, the left side of `a && b` failing fails the block only when the
  line is its last one: examples put one command on a line.

A block fails when a command in it fails, or when an `<!-- expect: TEXT -->` given above it is
not in its output; the failure shows the block and its output. Blocks marked `<!-- not-run:
REASON -->` are listed at the end of the run (conftest.py). See doc_blocks.py for the markers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from doc_blocks import ROOT, Block, doc_files, shell_blocks

RUNNERS = 2
"""Files run at once."""
FILE_TIMEOUT = 180.0
"""Seconds one file's examples may take in all (they take a few)."""

_PORT = re.compile(r"(?:(?<=127\.0\.0\.1:)|(?<=localhost:)|(?<=--port ))(80\d\d)\b")
_COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".peers", "*.db", "*.db-*", "*.db.lock"
)
_DEMO_PORT = "8080"
_OWN_GATEWAY = re.compile(r"toolweave serve\b[^\n]*--port ")
CLAUDE_DESKTOP = {
    "mcpServers": {
        "Time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
        "Product Docs": {"command": "toolweave-demo-server"},
    }
}
"""What `toolweave init claude-desktop` finds in the scratch HOME: servers that run offline here."""


def _files_with_examples() -> list[Path]:
    return [path for path in doc_files() if any(b.not_run is None for b in shell_blocks(path))]


def test_every_doc_with_shell_examples_is_checked() -> None:
    """The README and the docs the issue named are among the files run (guards the extractor)."""
    names = {path.name for path in _files_with_examples()}
    assert {"README.md", "api.md", "composites.md", "workflows.md"} <= names


def test_every_not_run_marker_gives_a_reason() -> None:
    blank = [b.where for path in doc_files() for b in shell_blocks(path) if b.not_run == ""]
    assert not blank, f"a <!-- not-run: REASON --> needs its reason: {blank}"


@dataclass(frozen=True)
class FileRun:
    """One file's session, done: its blocks, where their output is, and which one failed."""

    blocks: list[Block]
    outputs: Path
    failed: int | None
    timed_out: bool


@pytest.fixture(scope="module")
def file_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Every selected file's session, started at once, RUNNERS at a time (each waits mostly on its
    gateway and the processes its examples start, so two overlap well on two cores)."""
    missing = [program for program in ("bash", "curl", "jq") if shutil.which(program) is None]
    if missing:
        pytest.skip(f"the docs' examples use {', '.join(missing)}, which this machine lacks")
    selected = [
        item.callspec.params["path"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_the_examples_run" and hasattr(item, "callspec")
    ]
    with ThreadPoolExecutor(max_workers=RUNNERS) as pool:
        runs = {path: pool.submit(_run_file, path, tmp_path_factory.mktemp(path.stem)) for path in selected}
        try:
            yield runs
        finally:
            for future in runs.values():
                future.cancel()


@pytest.mark.parametrize("path", _files_with_examples(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_run(path: Path, file_runs: dict[Path, Future[FileRun]]) -> None:
    run = file_runs[path].result()
    if run.failed is not None:
        block = run.blocks[run.failed]
        what = f"did not finish in {FILE_TIMEOUT:.0f} s" if run.timed_out else "failed"
        pytest.fail(
            f"{block.where}: the example {what}\n{_report(block, run.outputs, run.failed)}", pytrace=False
        )
    for index, block in enumerate(run.blocks):
        output = _output(run.outputs, index)
        missing = [snippet for snippet in block.expect if snippet not in output]
        if missing:
            pytest.fail(
                f"{block.where}: expected {missing} in the output\n{_report(block, run.outputs, index)}",
                pytrace=False,
            )


def _run_file(path: Path, tmp_path: Path) -> FileRun:
    """A copy of the checkout, the demo gateway in it, and the file's blocks in one bash session."""
    blocks = [b for b in shell_blocks(path) if b.not_run is None]
    copy = tmp_path / "repo"
    _copy_checkout(copy)
    _venv_shims(copy / ".venv" / "bin")
    ports = {_DEMO_PORT: str(_free_port())}
    env = _environment(copy, tmp_path / "home")
    outputs = tmp_path / "out"
    outputs.mkdir()
    demo = _demo_gateway if _uses_the_demo(blocks) else _no_gateway
    with demo(copy, env, ports[_DEMO_PORT], tmp_path / "gateway.log"):
        script = _session_script(blocks, ports, outputs)
        failed, timed_out = _run_session(script, copy, env, outputs)
    return FileRun(blocks, outputs, failed, timed_out)


def _uses_the_demo(blocks: list[Block]) -> bool:
    """Whether a file's examples may talk to the demo gateway. Not when they start a gateway of
    their own on a port (`toolweave serve ... --port N`) and never name the demo's: such a file is
    spared the demo's start, 5 s of CPU with its three backends."""
    text = "".join(block.text for block in blocks)
    return _OWN_GATEWAY.search(text) is None or _DEMO_PORT in text


@contextlib.contextmanager
def _no_gateway(copy: Path, env: dict[str, str], port: str, log: Path) -> Iterator[None]:
    yield


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _copy_checkout(copy: Path) -> None:
    """What a clone holds, as the working tree has it: the files git tracks (edits included, so a
    change is tested before it is committed), not what earlier runs left (a `toolweave.toml` from
    `init`, databases). Without git, the whole tree minus caches and databases."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached"], capture_output=True, check=False
    )
    if listed.returncode != 0:
        shutil.copytree(ROOT, copy, ignore=_COPY_IGNORE)
        return
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not there
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)


def _venv_shims(bin_dir: Path) -> None:
    """`.venv/bin` of the copy: each program of the running interpreter's environment, by a shim.

    Shims rather than a link to that environment, so an example that (wrongly) runs `pip` or
    `python3 -m venv .venv` cannot change it: `pip` refuses, and `.venv` is a directory of the copy.
    """
    bin_dir.mkdir(parents=True)
    real = Path(sys.executable).parent
    for program in sorted(real.iterdir()):
        if program.name.startswith(("activate", "Activate")) or not os.access(program, os.X_OK):
            continue
        if program.name.startswith("pip"):
            body = 'echo "the docs test runs no pip: mark this block <!-- not-run: ... -->" >&2; exit 1'
        else:
            body = f'exec "{program}" "$@"'
        shim = bin_dir / program.name
        shim.write_text(f"#!/bin/sh\n{body}\n")
        shim.chmod(0o755)
    for alias in ("python", "python3"):
        if not (bin_dir / alias).exists():
            (bin_dir / alias).write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
            (bin_dir / alias).chmod(0o755)


def _environment(copy: Path, home: Path) -> dict[str, str]:
    """The reader's shell: the copy's .venv first on PATH, a fresh HOME, no TOOLWEAVE_* settings."""
    for place in (".config/Claude", "Library/Application Support/Claude"):  # Linux, macOS
        (home / place).mkdir(parents=True)
        (home / place / "claude_desktop_config.json").write_text(json.dumps(CLAUDE_DESKTOP, indent=2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLWEAVE_", "XDG_"))}
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(copy / ".venv" / "bin"), env.get("PATH", "")]),
        PYTHONPATH=str(ROOT / "src"),
        NO_COLOR="1",
    )
    return env


@contextlib.contextmanager
def _demo_gateway(copy: Path, env: dict[str, str], port: str, log: Path) -> Iterator[None]:
    """README command 1 in the copy, on `port`; yields once every demo backend is connected."""
    command = [str(copy / ".venv" / "bin" / "toolweave"), "serve", "-c", "examples/demo.toml"]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*command, "--port", port], cwd=copy, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        _wait_connected(f"http://127.0.0.1:{port}/api/v1/backends", process, log)
        yield
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_connected(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the demo gateway exited ({process.returncode}):\n{log.read_text()}")
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(url, timeout=2) as answer:
                backends = json.load(answer)["backends"]
            if backends and all(b["status"] == "connected" for b in backends):
                return
        time.sleep(0.1)
    raise TimeoutError(f"the demo gateway's backends did not all connect in {timeout}s:\n{log.read_text()}")


def _session_script(blocks: list[Block], ports: dict[str, str], outputs: Path) -> str:
    """One bash script: each block in a group whose output goes to its own files."""
    lines = [
        "set -eo pipefail",
        'curl() { command curl --fail-with-body "$@"; }',
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
    ]
    for index, block in enumerate(blocks):
        text = _PORT.sub(lambda m: ports.setdefault(m.group(1), str(_free_port())), block.text)
        lines += [
            f"echo {index} > {outputs}/current",
            "{",
            text.rstrip("\n"),
            f"}} > {outputs}/{index}.out 2> {outputs}/{index}.err < /dev/null",
        ]
    lines.append(f"echo done > {outputs}/current")
    return "\n".join(lines) + "\n"


def _run_session(script: str, copy: Path, env: dict[str, str], outputs: Path) -> tuple[int | None, bool]:
    """Runs the script: the index of the block that failed (None when all succeeded), and whether
    it was stopped for taking too long."""
    (outputs / "session.sh").write_text(script)
    process = subprocess.Popen(
        ["bash", str(outputs / "session.sh")],
        cwd=copy,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(outputs / "session.err").open("wb"),
        start_new_session=True,
    )
    try:
        code = process.wait(FILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    current = (outputs / "current").read_text().strip() if (outputs / "current").exists() else "0"
    if code == 0 and current == "done":
        return None, False
    return (int(current) if current.isdigit() else 0), code is None


def _output(outputs: Path, index: int) -> str:
    parts = [outputs / f"{index}.out", outputs / f"{index}.err"]
    return "".join(p.read_text(errors="replace") for p in parts if p.exists())


def _report(block: Block, outputs: Path, index: int) -> str:
    def tail(name: str) -> str:
        path = outputs / name
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    return (
        f"--- block ---\n{block.text}--- stdout ---\n{tail(f'{index}.out')}\n"
        f"--- stderr ---\n{tail(f'{index}.err')}\n--- session ---\n{tail('session.err')}"
    )
