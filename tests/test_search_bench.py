"""The search evaluation scores a query set and a catalog of your own exactly as it scores ours
(issue 16: a held-out set we do not have is scored the same way)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "bench" / "search" / "catalog"


def bench_search(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.search", "--no-peer", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_query_set_of_your_own_on_a_catalog_of_your_own(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for server in ("time", "memory", "filesystem"):
        shutil.copy(CATALOG / f"{server}.json", catalog)
    queries = tmp_path / "mine.txt"
    queries.write_text(
        "# my own\n"
        "time/get_current_time | what time is it in Tokyo right now\n"
        "memory/create_entities, memory/add_observations | remember that Bob is my manager\n"
        "! filesystem/read_text_file | show me what notes.md says\n"
        "time/convert_time | a query no ranking puts first: zebra\n"
    )
    done = bench_search("--queries", str(queries), "--catalog", str(catalog), "--misses", "lexical")
    assert done.returncode == 0, done.stderr
    assert "from 3 real MCP servers" in done.stdout
    assert "mine set: 4 queries (1 hard)" in done.stdout
    assert "holdout" not in done.stdout and "dev set" not in done.stdout
    assert "miss: 'a query no ranking puts first: zebra'" in done.stdout  # scored, not assumed


def test_bad_query_files_and_catalogs_are_named_with_what_is_wrong(tmp_path: Path) -> None:
    typo = tmp_path / "typo.txt"
    typo.write_text("time/get_curent_time | what time is it\n")
    done = bench_search("--queries", str(typo))
    assert done.returncode == 1 and "expects tools the catalog lacks: time/get_curent_time" in done.stderr

    no_bar = tmp_path / "nobar.txt"
    no_bar.write_text("# fine\nwhat time is it\n")
    done = bench_search("--queries", str(no_bar))
    assert done.returncode == 1 and f"{no_bar}:2: expected `server/tool" in done.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    done = bench_search("--catalog", str(empty))
    assert done.returncode == 1 and "no <server>.json tools/list dumps found" in done.stderr

    (empty / "broken.json").write_text('{"server": "x"}')
    done = bench_search("--catalog", str(empty))
    assert done.returncode == 1 and 'broken.json: expected {"server": name, "tools": [...]}' in done.stderr
