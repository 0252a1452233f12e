"""Test helper: pretend hosts in Linux network namespaces (`scripts/netns_hosts.sh`), and torchrun on them.

`NetnsCluster(n)` creates hosts ``<prefix>-h0 ..`` with interface ``eth0`` at 10.200.0.(k+1)/24, joined by a
bridge in a namespace of their own; nothing is routed outside them. Leaving the ``with`` block (also on a
failure) kills every process inside and deletes the namespaces. Names carry the pid, so parallel runs do not
collide. `namespaces_unavailable()` says why a test must skip (not root, no ``ip``, EPERM).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "netns_hosts.sh"
_COUNTER = itertools.count()


def namespaces_unavailable() -> str | None:
    """None when network namespaces can be made here, else the reason."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if shutil.which("ip") is None:
        return "iproute2's 'ip' is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CI runs as root)"
    probe = f"gg{os.getpid()}probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


def worker_env(**extra: str) -> dict[str, str]:
    """The environment for gridgnn processes inside a namespace: this checkout first (one thread each: the
    ``--threads 1`` that `NetnsCluster.torchrun` passes)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", CI="1")
    env.pop("GLOO_SOCKET_IFNAME", None)
    env.update(extra)
    return env


class NetnsCluster:
    """``num_hosts`` namespaced hosts; use as a context manager."""

    def __init__(self, num_hosts: int):
        self.num_hosts = num_hosts
        self.prefix = f"gg{os.getpid()}n{next(_COUNTER)}"
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> NetnsCluster:
        try:
            subprocess.run([str(SCRIPT), "up", self.prefix, str(self.num_hosts)], check=True,
                           capture_output=True, text=True, timeout=60)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        subprocess.run([str(SCRIPT), "down", self.prefix], capture_output=True, timeout=60)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def namespace(self, host: int) -> str:
        return f"{self.prefix}-h{host}"

    @staticmethod
    def address(host: int) -> str:
        return f"10.200.0.{host + 1}"

    def pids(self, host: int) -> list[int]:
        """Every process running inside host ``host``'s namespace."""
        out = subprocess.run(["ip", "netns", "pids", self.namespace(host)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def run(self, host: int, argv: list[str], *, env: dict | None = None, **popen) -> subprocess.Popen:
        """Start ``argv`` inside host ``host`` (stdout and stderr captured unless given)."""
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen(["ip", "netns", "exec", self.namespace(host), *argv], env=env or worker_env(),
                                text=True, **popen)
        self.procs.append(proc)
        return proc

    def torchrun(self, host: int, nproc: int, port: int, train_args: list[str], *, log_dir: Path | None = None,
                 extra: list[str] = (), env: dict | None = None) -> subprocess.Popen:
        """``torchrun --nnodes <hosts> --nproc-per-node nproc ... -m gridgnn train <train_args>`` on host
        ``host``, rendezvous on host 0 (c10d); ``log_dir``: one stdout/stderr file per rank there."""
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(self.num_hosts),
                "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"{self.address(0)}:{port}", "--rdzv-id", self.prefix,
                # host 0 holds the store: its host name does not resolve to 10.200.0.1, so say it
                "--rdzv-conf", f"is_host={1 if host == 0 else 0}", "--local-addr", self.address(host),
                "--max-restarts", "0", "--monitor-interval", "0.2"]
        if log_dir is not None:
            argv += ["--log-dir", str(log_dir / f"h{host}"), "--redirects", "3"]
        return self.run(host, [*argv, *extra, "-m", "gridgnn", "train", "--threads", "1", *train_args], env=env)
