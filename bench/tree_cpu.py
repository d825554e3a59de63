"""The CPU a command costs with every process it starts: `python -m bench.tree_cpu CMD ARG...`.

Prints wall time, user and system CPU of the command and all its descendants, and the load average
at start and end (the machine is shared: compare two commands side by side at the same load). This
process is a child subreaper, so processes that double-fork away from their parent (Chromium's crash
handlers) are still waited for and counted; `/usr/bin/time` counts only what its child's tree waited
for. Used for the test-suite figures in CONTRIBUTING.md ("Test suite").
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m bench.tree_cpu CMD [ARG...]", file=sys.stderr)
        return 2
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    load_start = os.getloadavg()[0]
    start = time.perf_counter()
    code = subprocess.call(argv)
    while True:  # orphans re-parented here
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    wall = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"tree_cpu: exit {code}, wall {wall:.1f} s, CPU {used.ru_utime + used.ru_stime:.1f} s "
        f"(user {used.ru_utime:.1f}, sys {used.ru_stime:.1f}), load {load_start:.1f} -> {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
