"""Name the ranks and hosts that were lost when a multi-host run fails.

Every rank of a run that spans hosts bumps a counter in the rendezvous store (torchrun's store at
``MASTER_ADDR:MASTER_PORT``) every ``period_s`` seconds from a daemon thread. A rank whose collective failed
calls `Liveness.lost_ranks`: it marks itself a survivor, reads every counter twice ``window_s`` apart, and
reports the ranks whose counter did not move and that did not mark themselves: they died or lost the network.
When the store itself stopped answering, the lost ones are the ranks on the rendezvous host. Each rank uses
its own store connections (one per thread); nothing here is a collective.

While it surveys and reports, a failed rank holds back SIGTERM (`hold_sigterm`): under torchrun, the agent of a
host stops that host's other workers as soon as one of them exits, and the rank that prints the run's one
line (rank 0) must not be stopped in the middle of its survey by a sibling that finished its own first.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from datetime import timedelta

import torch.distributed as dist

from gridgnn.errors import CollectiveError
from gridgnn.grid.hosts import HostMap

STORE_TIMEOUT_S = 5.0


def _store(prefix: str) -> dist.Store:
    client = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                           timeout=timedelta(seconds=STORE_TIMEOUT_S), wait_for_workers=False)
    return dist.PrefixStore(prefix, client)


class Liveness:
    """Heartbeats of the ranks of one run (see the module docstring)."""

    def __init__(self, hosts: HostMap, rank: int, *, period_s: float = 0.5, window_s: float = 2.5):
        self.hosts, self.rank, self.period_s, self.window_s = hosts, rank, period_s, window_s
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self.prefix = f"gridgnn/liveness/{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}/{attempt}/"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="gridgnn-heartbeat", daemon=True)

    def start(self) -> Liveness:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        try:
            store = _store(self.prefix)
            while not self._stop.is_set():
                store.add(f"beat/{self.rank}", 1)
                self._stop.wait(self.period_s)
        except (RuntimeError, OSError):  # the store is gone: the survey reports it
            return

    def lost_ranks(self) -> tuple[list[int], bool]:
        """(ranks that stopped, whether the rendezvous store answered). Blocks about ``window_s`` seconds."""
        world = len(self.hosts.labels)
        try:
            store = _store(self.prefix)
            store.set(f"survivor/{self.rank}", "1")
            before = [store.add(f"beat/{r}", 0) for r in range(world)]
            time.sleep(self.window_s)
            after = [store.add(f"beat/{r}", 0) for r in range(world)]
            marked = {r for r in range(world) if store.check([f"survivor/{r}"])}
        except (RuntimeError, OSError):
            return self._rendezvous_host_ranks(), False
        return [r for r in range(world) if after[r] == before[r] and r not in marked and r != self.rank], True

    def _rendezvous_host_ranks(self) -> list[int]:
        try:
            master = socket.gethostbyname(os.environ["MASTER_ADDR"])
        except (OSError, KeyError):
            return []
        return [r for r, label in enumerate(self.hosts.labels) if label.endswith(f"({master})") and r != self.rank]

    def describe_lost(self) -> str:
        """``"lost ranks 4-7 on host b (10.0.0.2)"``, or a sentence saying none could be told apart."""
        ranks, store_answered = self.lost_ranks()
        if ranks:
            where = "" if store_answered else " (the rendezvous host: its store stopped answering)"
            return f"lost {self.hosts.describe(ranks)}{where}"
        if not store_answered:
            return f"the rendezvous store at {os.environ.get('MASTER_ADDR')} stopped answering"
        return "every other rank is still alive (a slow or stuck peer)"


def hold_sigterm() -> None:
    """From now on a SIGTERM does not stop this process (it is noted and dropped): call it once the process
    only reports a failure and exits. torchrun's agent sends SIGKILL after its grace period (30 s by
    default), so a report never keeps a host busy for long. Only the main thread can set a handler;
    elsewhere nothing changes."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: None)


def with_lost_peers(error: CollectiveError, liveness: Liveness | None) -> CollectiveError:
    """``error`` with `Liveness.describe_lost` appended to its (first) line; ``error`` itself without a
    liveness. With one, SIGTERM is held back from the survey on (`hold_sigterm`): the caller reports and
    exits."""
    if liveness is None:
        return error
    hold_sigterm()
    first = (str(error).strip().splitlines() or ["a collective failed"])[0]
    return CollectiveError(f"{first}; {liveness.describe_lost()}")
