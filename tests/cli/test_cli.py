"""The `toolweave` command: call, tools, validate, serve — in-process through Typer's runner, and as a real
subprocess where the process boundary matters (stdio backends, exit codes, serve)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from typer.testing import CliRunner

from support.configs import python_backend, stdio_backend
from support.fixtures import WriteConfig
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from support.results import text
from toolweave.cli import app

runner = CliRunner()


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWEAVE), *args], capture_output=True, text=True, timeout=timeout, env=subprocess_env()
    )


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A `[gateway]` section whose database is in the test's folder: `call` and `serve` record runs,
    and the default (`./toolweave.db`) would land in the working directory. HOME too (the secret key)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return {"database": f"sqlite:///{tmp_path / 'toolweave.db'}"}


@pytest.fixture
def py_config(write_config: WriteConfig, gateway: dict[str, str]) -> Path:
    return write_config({"gateway": gateway, "backends": [python_backend()]})


# -- call --------------------------------------------------------------------------------


def test_call_prints_the_result_as_json(write_config: WriteConfig, gateway: dict[str, str]) -> None:
    path = write_config({"gateway": gateway, "backends": [stdio_backend()]})
    done = run("call", "ts__add", '{"a": 40, "b": 2}', "-c", str(path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["isError"] is False and result["structuredContent"] == {"sum": 42}
    assert result["content"][0]["type"] == "text"


def test_call_exits_1_when_the_result_is_an_error(py_config: Path) -> None:
    done = cli("call", "py__explode", '{"message": "kaput"}', "-c", str(py_config))
    assert done.exit_code == 1
    result = json.loads(done.stdout)
    assert result["isError"] is True and result["content"][0]["text"] == "explode failed: kaput"


@pytest.mark.parametrize(
    ("name", "args", "fragment"),
    [
        ("py__nothing", "{}", "unknown tool 'py__nothing'"),
        ("py__greet", '{"name": 5}', "argument 'name': 5 is not of type 'string'"),
        ("py__greet", "{}", "missing required argument 'name'"),
    ],
)
def test_call_failures_are_printed_results(py_config: Path, name: str, args: str, fragment: str) -> None:
    done = cli("call", name, args, "-c", str(py_config))
    assert done.exit_code == 1
    assert fragment in json.loads(done.stdout)["content"][0]["text"]


def test_call_with_default_arguments(py_config: Path) -> None:
    done = cli("call", "py__numbers", "-c", str(py_config))
    assert done.exit_code == 0 and json.loads(done.stdout)["content"][0]["text"] == "[0,1,2]"


@pytest.mark.parametrize(
    ("args_json", "message"),
    [
        ("{name: x}", "ARGS_JSON is not valid JSON: Expecting property name enclosed in double quotes"),
        ('{"a": 1', "ARGS_JSON is not valid JSON"),
        ("[1, 2]", "ARGS_JSON must be a JSON object, got list"),
        ('"text"', "ARGS_JSON must be a JSON object, got str"),
        ("", "ARGS_JSON is not valid JSON"),
    ],
)
def test_bad_args_json(tmp_path: Path, args_json: str, message: str) -> None:
    done = cli("call", "py__greet", args_json, "-c", str(tmp_path / "never-read.toml"))
    assert done.exit_code == 2
    assert message in done.stderr and done.stdout == ""


def test_call_with_a_stdio_backend_in_process(write_config: WriteConfig, gateway: dict[str, str]) -> None:
    """Under a test runner, sys.stderr has no file descriptor; stdio backends must still start."""
    path = write_config({"gateway": gateway, "backends": [stdio_backend()]})
    done = cli("call", "ts__echo", '{"text": "in process"}', "-c", str(path))
    assert done.exit_code == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["content"][0]["text"] == "in process"


# -- tools ---------------------------------------------------------------------------------


def test_tools_json(py_config: Path) -> None:
    done = cli("tools", "--json", "-c", str(py_config))
    assert done.exit_code == 0
    tools = {tool["name"]: tool for tool in json.loads(done.stdout)}
    assert "py__greet" in tools and "py__not_a_tool" not in tools
    assert tools["py__greet"]["inputSchema"]["required"] == ["name"]
    assert tools["py__greet"]["annotations"]["readOnlyHint"] is True


def test_tools_table(py_config: Path) -> None:
    done = cli("tools", "-c", str(py_config))
    assert done.exit_code == 0
    assert "py__greet" in done.stdout and "Greet someone by name." in done.stdout
    assert "8 tools" in done.stdout


def test_tools_says_which_backends_are_missing(write_config: WriteConfig, tmp_path: Path) -> None:
    path = write_config(
        {"backends": [python_backend(), {"name": "ghost", "command": str(tmp_path / "nope")}]}
    )
    done = cli("tools", "--json", "-c", str(path))
    assert done.exit_code == 0
    assert "py__greet" in [tool["name"] for tool in json.loads(done.stdout)]
    assert "backend 'ghost' is" in done.stderr and "command not found" in done.stderr


def test_tools_with_search_exposure(write_config: WriteConfig) -> None:
    path = write_config({"backends": [python_backend()], "gateway": {"tool_exposure": "search"}})
    done = cli("tools", "--json", "-c", str(path))
    assert [tool["name"] for tool in json.loads(done.stdout)] == ["find_tools", "call_tool"]


# -- validate ----------------------------------------------------------------------------------


def test_validate_ok(py_config: Path) -> None:
    done = cli("validate", "-c", str(py_config))
    printed = done.stdout.replace("\n", "")  # rich wraps long lines at the terminal width
    assert done.exit_code == 0 and printed == f"ok {py_config}: 1 backends, 0 composites"


def test_validate_warns_of_a_name_too_long_for_llm_apis_and_passes(
    write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = "summarize_every_open_pull_request_waiting_for_a_review"  # review-bot__ + this: 66
    (tmp_path / "tw_long_names.py").write_text(
        f"import toolweave\n\n@toolweave.tool\ndef {long}() -> str:\n    return 'ok'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write_config({"backends": [python_backend("review-bot", module="tw_long_names")]})
    done = cli("validate", "-c", str(path))
    said = done.stderr.replace("\n", "")
    assert done.exit_code == 0, said
    assert (
        f"warning backends[0] (review-bot).tools.{long}: the exposed name 'review-bot__{long}' is 66" in said
    )
    assert "more than gateway.max_name_length (64)" in said and "exposed as 'review-bot__summarize" in said


def test_validate_prints_every_problem_and_exits_1(write_config: WriteConfig) -> None:
    path = write_config(
        """
gateway: {separator: "", tool_exposuer: all}
backends:
  - {name: Upper, command: x}
  - {name: two, command: x, url: "http://h/mcp"}
  - {name: hidden, command: x, hide: ["re:[z-a]"]}
composite_tools:
  - {name: fan, description: d, tools: [ghost/search]}
"""
    )
    done = cli("validate", "--offline", "-c", str(path))
    assert done.exit_code == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert lines[0] == f"6 problem(s) in {path}:"
    expected = [
        "gateway.separator: the separator must be 1-4 characters of [a-zA-Z0-9_-] (default '__')",
        "gateway.tool_exposuer: unknown key; did you mean 'tool_exposure'?",
        "backends[0].name: backend name 'Upper' must match ^[a-z0-9][a-z0-9_-]{0,31}$",
        "backends[1]: a backend needs exactly one of 'command' (stdio), 'url' (HTTP MCP), 'python' (in-process), "
        "'openapi' (an OpenAPI document) or 'http' (declared HTTP actions); found command, url",
        "backends[2].hide[0]: invalid regular expression 're:[z-a]': invalid character class range: z-a",
        # still checked although the backends are invalid; every declared name counts as known
        "composite_tools[0].tools[0]: 'ghost/search' names unknown backend 'ghost' (known backends: Upper, hidden, two)",
    ]
    for problem in expected:  # one per line, verbatim (brackets in messages are not markup)
        assert f"  • {problem}" in lines, (problem, lines)


def test_validate_connects_to_backends(write_config: WriteConfig, tmp_path: Path) -> None:
    missing = str(tmp_path / "gone")
    refused = f"http://127.0.0.1:{free_port()}/mcp"
    path = write_config(
        {
            "backends": [
                python_backend(),
                {"name": "ghost", "command": missing},
                {"name": "web", "url": refused},
                python_backend("nomod", module="tw_no_such_module"),
            ]
        }
    )
    done = cli("validate", "-c", str(path))
    assert done.exit_code == 1
    assert f"backends[1] (ghost): command not found: {missing}" in done.stderr
    assert "backends[2] (web): cannot connect:" in done.stderr
    assert "backends[3] (nomod): cannot load python module 'tw_no_such_module'" in done.stderr
    offline = cli("validate", "--offline", "-c", str(path))
    assert offline.exit_code == 0  # the file itself is fine


def test_validate_suggests_the_tool_backend_or_key_meant(write_config: WriteConfig) -> None:
    path = write_config(
        {
            "backends": [python_backend()],
            "composite_tools": [
                {"name": "typo", "descripton": "d", "tools": ["py/greet"]},
                {"name": "fan", "description": "d", "tools": ["py/gret", "pyy/greet"]},
                {"name": "flow", "description": "d", "steps": [{"id": "a", "tool": "py__multipy"}]},
            ],
        }
    )
    offline = cli("validate", "--offline", "-c", str(path)).stderr
    assert "  • composite_tools[0].descripton: unknown key; did you mean 'description'?" in offline
    assert "'pyy/greet' names unknown backend 'pyy' (known backends: py); did you mean 'py'?" in offline
    live = cli("validate", "-c", str(path)).stderr.replace("\n", "")
    assert "composite_tools[1].tools[0]: unknown tool 'py/gret'; did you mean 'py/greet'?" in live
    assert (
        "composite_tools[2].steps[0].tool: unknown tool 'py__multipy' (no backend tool or composite has "
        "this name); did you mean 'py__multiply'?" in live
    )


def test_a_missing_config_file(tmp_path: Path) -> None:
    for command in (["validate"], ["tools"], ["call", "x"]):
        done = cli(*command, "-c", str(tmp_path / "absent.toml"))
        assert done.exit_code == 1
        assert f"config file not found: {tmp_path / 'absent.toml'}" in done.stderr


def test_config_from_the_environment(
    py_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = cli("validate", "--offline", env={"TOOLWEAVE_CONFIG": str(py_config)})
    assert done.exit_code == 0 and str(py_config) in done.stdout.replace("\n", "")
    missing = cli("validate", "--offline", env={"TOOLWEAVE_CONFIG": ""})
    assert missing.exit_code == 1 and "config file not found: toolweave.toml" in missing.stderr


# -- serve -------------------------------------------------------------------------------------


def test_serve_refuses_a_public_address_without_auth(py_config: Path) -> None:
    done = cli("serve", "--host", "0.0.0.0", "-c", str(py_config))
    assert done.exit_code == 2
    assert "refusing to serve 0.0.0.0 without authentication" in done.stderr.replace("\n", "")


def _processes_with_env(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
async def test_serve_over_http(write_config: WriteConfig, tmp_path: Path, gateway: dict[str, str]) -> None:
    port = free_port()
    marker = f"tw-serve-{tmp_path.name}"
    backends = [stdio_backend(env={"TESTSERVER_NAME": marker}), python_backend()]
    # serve listens before its backends are up; a call waits for them up to startup_timeout
    path = write_config({"gateway": {**gateway, "startup_timeout": "60s"}, "backends": backends})
    process = subprocess.Popen(  # noqa: ASYNC220 - Popen only starts the process; it does not wait
        [str(TOOLWEAVE), "serve", "--port", str(port), "-c", str(path)],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        await asyncio.to_thread(wait_for_port, port, process, 30)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            assert text(await client.call_tool("ts__echo", {"text": "served"})) == "served"
            assert text(await client.call_tool("py__greet", {"name": "http"})) == "Hello, http."
        assert _processes_with_env(marker), "the stdio backend runs as a subprocess of serve"
    finally:
        stop_process(process)  # SIGTERM: a graceful shutdown
    assert process.returncode in (0, -15)  # uvicorn re-raises the signal once it has shut down
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert f"MCP at http://127.0.0.1:{port}/mcp" in stderr.replace("\n", "")
    assert _processes_with_env(marker) == []  # no orphaned backend


def test_version_prints_the_version_and_exits_0() -> None:
    from toolweave import __version__

    done = cli("--version")
    assert done.exit_code == 0 and done.stdout == f"toolweave {__version__}\n"
    bare = cli()
    assert "Usage: toolweave" in bare.stdout + bare.stderr, "no arguments still shows the help"


def test_validate_says_what_it_waits_for_and_calls_a_slow_backend_slow(write_config: WriteConfig) -> None:
    slow = stdio_backend("slow", env={"TESTSERVER_START_DELAY": "30"}, connect_timeout="120s")
    path = write_config({"gateway": {"startup_timeout": "1s"}, "backends": [slow]})
    done = cli("validate", "-c", str(path))
    said = done.stderr.replace("\n", " ")
    assert done.exit_code == 1
    assert "connecting 1 backend(s) (at most 1 s)" in said, said
    assert "backends[0] (slow): did not start within 1 s (gateway.startup_timeout)" in said, said


def test_a_one_shot_call_starts_only_the_backends_it_needs() -> None:
    from toolweave.cli.tools import needed_backends
    from toolweave.config.loader import load_config

    demo = load_config(Path(__file__).parents[2] / "examples" / "demo.toml")
    assert needed_backends(demo, "notes__search") == {"notes"}
    assert needed_backends(demo, "search_all") == {"notes", "docs"}  # a fan-out: its targets' backends
    assert needed_backends(demo, "no_such_tool") is None  # unknown: start everything, the error says why
