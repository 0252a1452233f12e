"""Run inside a namespaced host by tests/launch/test_multihost_network.py: ``python netcheck_probe.py JSON``.

JSON: a list of steps; each is ``{"argv": [...]}`` (run `gridgnn.cli.main.main` on it) optionally with
``"listen": "ADDR:PORT"`` (hold a listening socket there during the step) and ``"before": [...]`` (a command
to run first, e.g. taking another namespace's interface down). Prints one JSON list of ``[exit status,
stderr + stdout]`` per step.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import subprocess
import sys

from gridgnn.cli.main import main


def _step(step: dict) -> list:
    if "before" in step:
        subprocess.run(step["before"], check=True, capture_output=True)
    with contextlib.ExitStack() as stack:
        if "listen" in step:
            host, port = step["listen"].rsplit(":", 1)
            sock = stack.enter_context(socket.socket())
            sock.bind((host, int(port)))
            sock.listen()
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = main(step["argv"])
        return [status, err.getvalue() + out.getvalue()]


if __name__ == "__main__":
    print(json.dumps([_step(step) for step in json.loads(sys.argv[1])]))
