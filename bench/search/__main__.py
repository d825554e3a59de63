"""`python -m bench.search [--no-peer] [--misses RANKER]`: score tool search (see evaluate.py)."""

from __future__ import annotations

import argparse

from bench.search.evaluate import evaluate, report


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--no-peer", action="store_true", help="skip FastMCP (no peer venv needed)")
    parser.add_argument("--misses", metavar="RANKER", help="list the dev set's misses of this ranking")
    args = parser.parse_args()
    print(report(evaluate(with_peer=not args.no_peer), args.misses))


if __name__ == "__main__":
    main()
