"""Run a script in a copy of a process that has imported it already: `forked_client.py SOCKET ARGS...`.

The process listening on the Unix socket SOCKET (`oauth_conformance_client.py --serve-forks`) forks
a copy of itself, which runs with this process's standard streams, ARGS, environment and working
directory; this process exits with the copy's status. Only the standard library, and `python -S`
is enough: it starts in a few milliseconds, where the script it stands for spends seconds importing.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def main(argv: list[str]) -> int:
    path, *args = argv
    request = json.dumps({"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    with socket.socket(socket.AF_UNIX) as connection:
        connection.connect(path)
        socket.send_fds(connection, [b"\0"], [0, 1, 2])
        connection.sendall(request)
        connection.shutdown(socket.SHUT_WR)
        status = b""
        while chunk := connection.recv(64):
            status += chunk
    return int(status) if status.strip().isdigit() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
