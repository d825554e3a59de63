"""`python -m bench.search.tune --queries FILE... [--catalog DIR] [--rounds N]`: tune the lexical
ranking's numeric constants for a catalog and query sets of your own.

Coordinate descent: each round tries, for one constant at a time, a few values around its current
one (the others held), and keeps a value only when it raises the objective, mean over the query
sets of R@5 + 0.5 * MRR (R@5 is what a client sees with the default limit; MRR breaks its ties
towards putting the tool first). Everything runs in this process: the constants are patched in
`toolweave.catalog.search` / `search_text` and the index is rebuilt for each candidate (about half
a second on the bundled catalog). The best values are printed as a Python snippet; the constants
are only patched here, never written back. Tuning fits the queries it is given: score a set it
has not seen (`python -m bench.search --queries ...` after pasting the values) before keeping them.
It reads only the query files named on the command line (never the bench's held-out set by
itself).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toolweave.catalog.search as search
import toolweave.catalog.search_text as search_text
from bench.search.corpus import CATALOG_DIR, Query, documents, load_dumps, load_queries, resolve_expected
from bench.search.scoring import score
from toolweave.catalog.search import SearchDocument, ToolIndex

MRR_WEIGHT = 0.5
"""The objective: mean over the sets of R@5 + MRR_WEIGHT * MRR."""


@dataclass(frozen=True)
class Knob:
    """One tunable constant: `module.name`, or `module.name[key]` for an entry of a dict constant."""

    module: Any
    name: str
    key: str | None = None
    low: float = 0.0
    high: float = float("inf")

    @property
    def label(self) -> str:
        return f"{self.name}[{self.key!r}]" if self.key else self.name

    def get(self) -> float:
        value = getattr(self.module, self.name)
        return value[self.key] if self.key else value

    def set(self, value: float) -> None:
        if self.key:
            setattr(self.module, self.name, {**getattr(self.module, self.name), self.key: value})
        else:
            setattr(self.module, self.name, value)

    def candidates(self) -> list[float]:
        """A few values around the current one: relative steps, and 0 for a weight that may be off."""
        now = self.get()
        base = now if now else 0.25
        steps = [now * 0.5, now * 0.75, now * 1.25, now * 1.5, now * 2] if now else [base, base * 2]
        values = {round(min(max(v, self.low), self.high), 4) for v in steps}
        if self.low == 0.0 and now:
            values.add(0.0)
        values.discard(round(now, 4))
        return sorted(values)


def knobs() -> list[Knob]:
    """The constants tuned: BM25F's field weights and length norms and k1, and every multiplier."""
    fields = list(search.FIELD_WEIGHTS)
    return [
        *(Knob(search, "FIELD_WEIGHTS", name) for name in fields),
        *(Knob(search, "FIELD_LENGTH_NORMS", name, high=1.0) for name in fields),
        Knob(search, "K1", low=0.1),
        Knob(search, "COVERAGE_POWER", high=4.0),
        Knob(search, "SERVICE_MISS", high=1.0),
        Knob(search, "SERVICE_SHARE", low=0.3, high=1.0),
        Knob(search, "PREFIX_SHARE", low=0.05, high=1.0),
        Knob(search, "INTENT_MISS", high=1.0),
        Knob(search, "ACTION_MATCH", low=1.0, high=3.0),
        # below 1: at 1 a synonym would count as the word itself (and could name a service)
        Knob(search_text, "SYNONYM_WEIGHT", high=0.95),
        Knob(search_text, "PHRASE_WEIGHT", low=0.1, high=2.0),
    ]


@contextmanager
def restored(every: Sequence[Knob]) -> Iterator[None]:
    """Put the constants back as they were, whatever happens."""
    saved = {(k.module, k.name): getattr(k.module, k.name) for k in every}
    try:
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


def objective(docs: Sequence[SearchDocument], sets: Mapping[str, Sequence[Query]]) -> tuple[float, dict]:
    """Build the index with the constants as they are now and score every set."""
    index = ToolIndex(docs)

    def rank(query: str) -> list[str]:
        return [tool.name for tool in index.search(query, 10)]

    rows = {name: score(queries, rank).row() for name, queries in sets.items()}
    value = statistics.fmean(row["R@5"] + MRR_WEIGHT * row["MRR"] for row in rows.values())
    return value, rows


def tune(
    docs: Sequence[SearchDocument],
    sets: Mapping[str, Sequence[Query]],
    rounds: int = 2,
    every: Sequence[Knob] | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """Coordinate descent over `every` knob; returns the start and best scores and the values changed."""
    every = list(every) if every is not None else knobs()
    with restored(every):
        start, start_rows = objective(docs, sets)
        best, best_rows = start, start_rows
        initial = {k.label: k.get() for k in every}
        log(f"start: objective {start:.4f}")
        for number in range(1, rounds + 1):
            improved = False
            for knob in every:
                current = knob.get()
                for value in knob.candidates():
                    knob.set(value)
                    got, rows = objective(docs, sets)
                    if got > best + 1e-9:
                        best, best_rows, current, improved = got, rows, value, True
                        log(f"  round {number}: {knob.label} -> {value:g}: objective {got:.4f}")
                knob.set(current)
            if not improved:
                break
        changed = {k.label: (initial[k.label], k.get()) for k in every if k.get() != initial[k.label]}
    return {
        "start": start,
        "best": best,
        "start_rows": start_rows,
        "best_rows": best_rows,
        "changed": changed,
    }


def snippet(changed: Mapping[str, tuple[float, float]]) -> str:
    """The changed constants as lines to paste into search.py / search_text.py."""
    if not changed:
        return "# no change beats the current constants"
    return "\n".join(f"{label} = {new:g}  # was {old:g}" for label, (old, new) in changed.items())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search.tune", description=__doc__)
    parser.add_argument("--queries", nargs="+", type=Path, required=True, metavar="FILE")
    parser.add_argument("--catalog", type=Path, default=CATALOG_DIR, metavar="DIR")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the constants (default 2)")
    args = parser.parse_args()
    docs = documents(load_dumps(args.catalog))
    sets = {}
    for path in args.queries:
        try:
            sets[path.stem] = resolve_expected(load_queries(path), docs)
        except SystemExit as problem:
            raise SystemExit(f"query set {path.stem!r}: {problem}") from None
    result = tune(docs, sets, args.rounds)
    print(
        f"\nobjective (mean over sets of R@5 + {MRR_WEIGHT:g}*MRR): {result['start']:.4f} -> {result['best']:.4f}"
    )
    for name in sets:
        before, after = result["start_rows"][name], result["best_rows"][name]
        cells = "  ".join(
            f"{key} {before[key]:.3f} -> {after[key]:.3f}" for key in ("R@1", "R@5", "R@10", "MRR")
        )
        print(f"  {name}: {cells}")
    print("\n" + snippet(result["changed"]))


if __name__ == "__main__":
    main()
