"""The search evaluation scores a query set and a catalog of your own exactly as it scores ours
(issue 16: a held-out set we do not have is scored the same way)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "bench" / "search" / "catalog"
if str(ROOT) not in sys.path:  # bench/ imports from the root, as `python -m bench.search` runs there
    sys.path.append(str(ROOT))


def bench_search(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.search --no-peer ARGS` as a user runs it: its own process (1-3 s of imports)."""
    return subprocess.run(
        [sys.executable, "-m", "bench.search", "--no-peer", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def bench_search_here(monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    """The same command's `main()` in this process, for a run that must stop on bad input: the message
    it stops with. A `SystemExit` carrying a message is what `python -m` prints on stderr before exiting
    with status 1 (`bench_search` checks that path once)."""
    from bench.search.__main__ import main

    monkeypatch.setattr(sys, "argv", ["python -m bench.search", "--no-peer", *args])
    with pytest.raises(SystemExit) as stopped:
        main()
    assert isinstance(stopped.value.code, str), stopped.value.code  # a message, so exit status 1
    return stopped.value.code


def bench_search_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> str:
    """The same command's `main()` in this process, for a run that must succeed: what it prints."""
    from bench.search.__main__ import main

    monkeypatch.setattr(sys, "argv", ["python -m bench.search", "--no-peer", *args])
    capsys.readouterr()
    main()  # returns: exit status 0
    return capsys.readouterr().out


def small_catalog(tmp_path: Path) -> Path:
    """A catalog of your own: three of the bundled servers' dumps in a directory."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for server in ("time", "memory", "filesystem"):
        shutil.copy(CATALOG / f"{server}.json", catalog)
    return catalog


def test_a_query_set_of_your_own_on_a_catalog_of_your_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = small_catalog(tmp_path)
    queries = tmp_path / "mine.txt"
    queries.write_text(
        "# my own\n"
        "time/get_current_time | what time is it in Tokyo right now\n"
        "memory/create_entities, memory/add_observations | remember that Bob is my manager\n"
        "! filesystem/read_text_file | show me what notes.md says\n"
        "time/convert_time | a query no ranking puts first: zebra\n"
    )
    stdout = bench_search_report(
        monkeypatch, capsys, "--queries", str(queries), "--catalog", str(catalog), "--misses", "lexical"
    )
    assert "from 3 real MCP servers" in stdout
    assert "mine set: 4 queries (1 hard)" in stdout
    assert "holdout" not in stdout and "dev set" not in stdout
    assert "miss: 'a query no ranking puts first: zebra'" in stdout  # scored, not assumed
    baseline = next(line.split() for line in stdout.splitlines() if "plain BM25 (baseline)" in line)
    assert baseline[3:5] == ["0.250", "0.250"]  # R@1, R@5: plain BM25 finds only the time task (below)


def test_the_baseline_row_is_plain_bm25_as_find_tools_ranked_before() -> None:
    """No stemming, no synonyms, no stop words: "remember" does not reach `create_entities`, and
    "what ... is" words count, which is what made a set's difficulty show in this row."""
    from bench.search.baseline import PlainBM25
    from bench.search.corpus import CATALOG_DIR, documents, load_dumps

    servers = {"time", "memory", "filesystem"}
    tools = [d.tool for d in documents(load_dumps(CATALOG_DIR)) if d.tool.name.split("__")[0] in servers]
    ranked = PlainBM25(tools)
    queries = (
        "what time is it in Tokyo right now",
        "show me what notes.md says",
        "remember that Bob is my manager",
    )
    time_task, notes_task, remember_task = (
        [tool.name for tool in ranked.search(query, 5)] for query in queries
    )
    assert time_task[0] == "time__get_current_time"
    assert "filesystem__read_text_file" not in notes_task
    assert not any(name.endswith(("create_entities", "add_observations")) for name in remember_task)


def test_json_lines_and_the_names_a_grader_might_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same set as JSON Lines, with expected tools as exposed names and as bare tool names
    (where one server has the tool), scores exactly as the text form."""
    text = tmp_path / "as_text.txt"
    text.write_text(
        "time/get_current_time | what time is it in Tokyo right now\n"
        "! filesystem/read_text_file | show me what notes.md says\n"
        "memory/create_entities, memory/add_observations | remember that Bob is my manager\n"
    )
    lines = tmp_path / "as_lines.jsonl"
    lines.write_text(
        '{"query": "what time is it in Tokyo right now", "expected": "time__get_current_time"}\n'
        '{"text": "show me what notes.md says", "expected": ["read_text_file"], "hard": true}\n'
        "\n"
        '{"query": "remember that Bob is my manager", "expected": ["create_entities", "memory/add_observations"]}\n'
    )
    stdout = bench_search_report(monkeypatch, capsys, "--queries", str(text), str(lines))
    rows = [line.split() for line in stdout.splitlines() if "toolweave lexical" in line]
    assert len(rows) == 2 and rows[0] == rows[1]
    assert "as_lines set: 3 queries (1 hard)" in stdout


def test_bad_query_files_and_catalogs_are_named_with_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    typo = tmp_path / "typo.txt"
    typo.write_text("time/get_curent_time | what time is it\n")
    done = bench_search("--queries", str(typo))  # the command itself: status 1, the reason on stderr
    assert done.returncode == 1
    assert "query set 'typo': expected tools the catalog lacks: time/get_curent_time" in done.stderr

    shared = tmp_path / "shared.txt"
    shared.write_text("search_issues | find the login bug\n")  # GitHub's and GitLab's (and others')
    stderr = bench_search_here(monkeypatch, "--queries", str(shared))
    assert "named without their server that several servers have" in stderr
    assert "search_issues (" in stderr and "github/search_issues" in stderr

    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"query": "what time is it", "expected": ["time/get_current_time"]}\n{"query": 3}\n')
    stderr = bench_search_here(monkeypatch, "--queries", str(bad_json))
    assert f'{bad_json}:2: "query" must be a string' in stderr

    no_bar = tmp_path / "nobar.txt"
    no_bar.write_text("# fine\nwhat time is it\n")
    stderr = bench_search_here(monkeypatch, "--queries", str(no_bar))
    assert f"{no_bar}:2: expected `server/tool" in stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    stderr = bench_search_here(monkeypatch, "--catalog", str(empty))
    assert "no <server>.json tools/list dumps found" in stderr

    (empty / "broken.json").write_text('{"server": "x"}')
    stderr = bench_search_here(monkeypatch, "--catalog", str(empty))
    assert 'broken.json: expected {"server": name, "tools": [...]}' in stderr


def test_the_tuning_script_reports_constants_no_worse_than_the_start(tmp_path: Path) -> None:
    """`python -m bench.search.tune` searches the ranking's constants on a set of your own and prints
    what it found; its result is never below where it started, and it reads only the files given."""
    catalog = small_catalog(tmp_path)
    queries = tmp_path / "mine.txt"
    queries.write_text(
        "time/get_current_time | what time is it in Tokyo right now\n"
        "memory/create_entities, memory/add_observations | remember that Bob is my manager\n"
        "filesystem/read_text_file | show me what notes.md says\n"
        "filesystem/list_directory | which files are in my projects folder\n"
    )
    args = ["--rounds", "1", "--queries", str(queries), "--catalog", str(catalog)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.search.tune", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("objective"))
    start, best = (float(value) for value in line.split(": ", 1)[1].split(" -> "))
    assert best >= start > 0
    assert "mine: R@1" in done.stdout and "holdout" not in done.stdout
    changed = [line for line in done.stdout.splitlines() if "  # was " in line]
    assert changed if best > start else "no change beats the current constants" in done.stdout
