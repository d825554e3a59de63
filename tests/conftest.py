"""Shared fixtures: config files, started gateways, a streamable HTTP test server, the MCP front over HTTP.

Every subprocess a fixture starts is stopped when the test (or session) ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import migrated
from support.fixtures import OpenGateway, ServeGateway, WriteConfig
from support.inprocess import in_process_testservers
from support.processes import http_testserver
from support.serving import serve_mcp
from toolweave import Gateway
from toolweave.backends import mcp as mcp_backend
from toolweave.config import Config, parse_config

pytest_plugins = ["support.api"]
"""The REST API fixtures (`api_env`, `make_app`, `sqlite_app`) for every test directory."""


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Spread the run over `_workers()` processes (pytest-xdist, `--dist loadscope`: a module and its
    module fixtures stay on one worker) unless told otherwise: `-n N` (`-n 0`: in this process),
    `-p no:xdist`, `--pdb`. Here rather than in addopts so a venv without xdist still runs."""
    _write_bytecode()
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.numprocesses is None and not config.option.usepdb:
        config.option.numprocesses = _workers()
        if config.option.dist == "no" and not config.option.distload:
            config.option.dist = "loadscope"
    if config.option.dist == "loadscope":
        config.option.loadscopereorder = False  # the order of pytest_collection_modifyitems below


def _workers() -> int:
    """One worker more than the cores this process may use: a third of a test's time is spent
    waiting on the processes, sockets and browser it drives, so one worker per core leaves the
    cores a third idle. On an idle 2-core machine, side by side (2,179 tests): 2 workers 559 s,
    3 workers 488 s, 4 workers 473 s at twice the load (CONTRIBUTING.md, "Test suite")."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


def pytest_configure(config: pytest.Config) -> None:
    """New SQLite files start as a copy of one migrated in this process (support/migrated.py)."""
    migrated.install()


def _write_bytecode() -> None:
    """Let this run (its workers and every process they start) write `.pyc` files even where
    `PYTHONDONTWRITEBYTECODE` is set (container images often set it): the suite starts many `toolweave`
    processes, each compiling the ~300 modules of src/ again without them (0.2-0.4 s CPU
    each), and each worker rewrites the asserts of every test module again (~8 s CPU)."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


COSTLIEST_FIRST = (
    "test_oauth_client.py",
    "test_replicas.py",
    "test_docs_run.py",
    "test_builder_kinds.py",
    "test_try_and_runs.py",
    "test_builder.py",
    "test_bystander_latency.py",
    "test_api_fuzz.py",
    "test_durable_runs.py",
    "test_pages.py",
    "test_backends_mcp.py",
    "test_clients.py",
    "test_cli_serve_startup.py",
    "test_store_runs.py",
    "test_change_feed.py",
    "test_live_try.py",
    "test_e2e_elicitation.py",
    "test_types.py",
    "test_relays.py",
    "test_conformance.py",
    "test_backends_oauth.py",
    "test_store_keys.py",
    "test_backend_forms.py",
    "test_sessions.py",
    "test_cli_serve_stop.py",
    "test_cli.py",
    "test_tracing.py",
    "test_store_composites.py",
    "test_shared_sessions.py",
    "test_cli_clients.py",
    "test_builder_ux.py",
)
"""The modules that take longest (wall time, measured whole-suite with 3 and 4 workers, idle),
longest first: with xdist they are handed out before every other module, so the run ends on short
modules filling every worker rather than one long module on one worker (CONTRIBUTING.md, "Test
suite"). A module that runs longer than ~12 s joins the list at its place."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, order the modules as loadscope should hand them out: COSTLIEST_FIRST, then
    the rest with the most tests first (xdist's own order). A module is one unit of work, so the
    last units decide how long one worker runs alone: they should be short ones. (`-n 0` keeps the
    file order.)"""
    if not hasattr(config, "workerinput"):
        return
    rank = {name: index for index, name in enumerate(COSTLIEST_FIRST)}
    counts = Counter(item.path for item in items)
    first_seen = {path: index for index, path in reversed(list(enumerate(item.path for item in items)))}
    items.sort(
        key=lambda item: (
            rank.get(item.path.name, len(rank)),
            -counts[item.path],
            first_seen[item.path],
        )
    )


@pytest.fixture(autouse=True)
def _fast_reconnects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backends retry after 50 ms (not 250 ms doubling to 30 s) so restart tests stay fast."""
    monkeypatch.setattr(mcp_backend, "INITIAL_BACKOFF", 0.05)
    monkeypatch.setattr(mcp_backend, "MAX_BACKOFF", 0.2)


@pytest.fixture(autouse=True)
def _fresh_demo_notebook() -> Iterator[None]:
    """The demo's notebook (`toolweave.demo.notes`) lives in its module: a note one test adds (the
    demo's `research_note`) would show in another test's search on the same worker."""
    from toolweave.demo import notes

    kept = {note_id: dict(note) for note_id, note in notes.NOTES.items()}
    yield
    notes.NOTES.clear()
    notes.NOTES.update(kept)


@pytest.fixture
def in_process_testserver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backends that run tests/servers/testserver.py run it in this process (support/inprocess.py):
    for tests whose subject is not the stdio transport. `pytestmark =
    pytest.mark.usefixtures("in_process_testserver")` in such a module."""
    in_process_testservers(monkeypatch)


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    """`write_config(data_or_text, suffix=".yaml")` → a config file path (dicts are dumped as YAML)."""
    count = 0

    def write(content: dict[str, Any] | str, suffix: str = ".yaml") -> Path:
        nonlocal count
        count += 1
        path = tmp_path / f"toolweave-{count}{suffix}"
        if isinstance(content, str):
            path.write_text(content)
        elif suffix == ".json":
            path.write_text(json.dumps(content))
        else:
            path.write_text(yaml.safe_dump(content, sort_keys=False))
        return path

    return write


@pytest.fixture
async def open_gateway() -> AsyncIterator[OpenGateway]:
    """`await open_gateway(config_or_dict, **Gateway options)` → a started gateway, stopped after the test."""
    async with contextlib.AsyncExitStack() as stack:

        async def open_(cfg: Config | dict[str, Any], **options: Any) -> Gateway:
            if not isinstance(cfg, Config):
                parsed = parse_config(cfg)
                assert parsed is not None
                cfg = parsed
            return await stack.enter_async_context(Gateway(cfg, **options))

        yield open_


@pytest.fixture(scope="session")
def http_server_url() -> Iterator[str]:
    """tests/servers/testserver.py over streamable HTTP on a free loopback port, for the whole session.

    Shared: tests that change its state (add_tool) use names no other test uses.
    """
    with http_testserver(TESTSERVER_NAME="httpserver") as (url, _process):
        yield url


@pytest.fixture
async def serve_gateway() -> AsyncIterator[ServeGateway]:
    """`url = await serve_gateway(gateway)`: the ASGI app of `create_app` under uvicorn on loopback.

    The gateway is started and stopped by the app's lifespan unless it is already started.
    """
    async with contextlib.AsyncExitStack() as stack:

        async def serve(gateway: Gateway, **app_options: Any) -> str:
            return await stack.enter_async_context(serve_mcp(gateway, **app_options))

        yield serve
