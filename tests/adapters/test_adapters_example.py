"""examples/agent_loop.py runs offline against the demo config and prints the messages to append."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent_loop.py"
DEMO = ROOT / "examples" / "demo.toml"


@pytest.mark.skipif(not DEMO.exists(), reason="examples/demo.toml is not there yet")
async def test_agent_loop_example_runs(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "-c",
        str(DEMO),
        cwd=tmp_path,
        env={
            **os.environ,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "TOOLWEAVE_DEMO_DB": str(tmp_path / "demo.db"),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(120):  # a hang guard only
        out, err = await process.communicate()
    output = out.decode()
    assert process.returncode == 0, err.decode()[-3000:]
    for heading in ("OpenAI Chat Completions", "OpenAI Responses", "Anthropic"):
        assert f"=== {heading}" in output
    assert '"tool_call_id": "call_broken"' in output and "not valid JSON" in output
    assert '"type": "function_call_output"' in output
    assert '"is_error": true' in output
