"""How the docs test reads a Markdown file: which blocks run, and what their markers and transcripts say."""

from __future__ import annotations

from pathlib import Path

from doc_blocks import shell_blocks

PAGE = """# A page

```toml
[gateway]
```

<!-- not-run: installs from PyPI -->
```bash
pip install toolweave
```

Some text.
<!-- expect: search_all -->
<!-- expect: smart_scraper -->
```sh
toolweave tools -c examples/demo.toml
```

```console
$ toolweave validate \\
    -c examples/broken.toml
3 problem(s) in examples/broken.toml:
  • gateway.separatr: unknown key

$ echo done
done
```

```
$ not a shell block: no info string
```
"""


def _blocks(tmp_path: Path) -> list:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    return shell_blocks(page)


def test_only_shell_blocks_are_read_with_their_markers(tmp_path: Path) -> None:
    blocks = _blocks(tmp_path)
    assert [b.line for b in blocks] == [8, 15, 19]
    pip, tools, _ = blocks
    assert (pip.not_run, pip.expect) == ("installs from PyPI", ())
    assert (tools.not_run, tools.expect) == (None, ("search_all", "smart_scraper"))
    assert tools.text == "toolweave tools -c examples/demo.toml\n"


def test_a_transcript_runs_its_commands_and_expects_its_output(tmp_path: Path) -> None:
    transcript = _blocks(tmp_path)[2]
    assert transcript.text == (
        "toolweave validate \\\n    -c examples/broken.toml || true\necho done || true\n"
    )
    assert transcript.expect == (
        "3 problem(s) in examples/broken.toml:",
        "• gateway.separatr: unknown key",
        "done",
    )
