"""`toolweave ARGS` in this process, for tests of what a command says rather than of its process.

A `toolweave` process spends 1-3 s of CPU importing before it does anything (CONTRIBUTING.md, "Test
suite"); Typer's `CliRunner` runs the same app here, stdout and stderr apart. Commands that call
`asyncio.run` cannot run inside a test's event loop: an async test awaits `toolweave_here_async`,
which runs the command in a thread.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from typer.testing import CliRunner


@dataclass(frozen=True)
class Ran:
    """What the command did: its exit status and what it wrote."""

    returncode: int
    stdout: str
    stderr: str


def toolweave_here(*args: str, env: dict[str, str] | None = None) -> Ran:
    """`toolweave ARGS` through `CliRunner`, with `env` added to the environment for its duration; an
    exception other than an exit is raised here, as a crash would show in a process's stderr."""
    from toolweave.cli import app

    done = CliRunner().invoke(app, list(args), env=env)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return Ran(done.exit_code, done.stdout, done.stderr)


async def toolweave_here_async(*args: str, env: dict[str, str] | None = None) -> Ran:
    """`toolweave_here` from a running event loop: the command's own loop runs in a thread."""
    return await asyncio.to_thread(toolweave_here, *args, env=env)
