"""Which host each rank runs on: gathered once at set-up, used to name lost hosts and to place ranks.

A host is labelled ``"<host name> (<address>)"``, the address being the one gloo talks on (the interface of
``GLOO_SOCKET_IFNAME``, else the address that routes to the rendezvous host), so that hosts sharing a name
(containers, network namespaces) stay apart.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch.distributed as dist

from gridgnn.errors import ConfigError
from gridgnn.grid.network import interface_addresses, source_address_for
from gridgnn.grid.peer_failures import peer_failures_explained


def local_address() -> str | None:
    """This host's address on the network the run uses, or None when it cannot be told."""
    name = os.environ.get("GLOO_SOCKET_IFNAME")
    if name:
        return interface_addresses().get(name.split(",")[0])
    master = os.environ.get("MASTER_ADDR")
    if master:
        try:
            return source_address_for(socket.gethostbyname(master))
        except (OSError, ConfigError):
            return None
    return None


def local_host_label() -> str:
    """``"<host name> (<address>)"`` for this process's host (just the name when no address is known)."""
    address = local_address()
    return f"{socket.gethostname()} ({address})" if address else socket.gethostname()


@dataclass(frozen=True)
class HostMap:
    """``labels[r]``: the host of rank ``r``. Hosts are numbered in the order of their first rank."""

    labels: tuple[str, ...]

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(self.labels))

    @property
    def spans_hosts(self) -> bool:
        return len(self.hosts) > 1

    def host_index(self, rank: int) -> int:
        return self.hosts.index(self.labels[rank])

    def ranks_on(self, label: str) -> list[int]:
        return [r for r, host in enumerate(self.labels) if host == label]

    def describe(self, ranks: list[int]) -> str:
        """``"ranks 4-7 on host b (10.0.0.2)"``, one clause per host, joined by ``"; "``."""
        parts = []
        for host in self.hosts:
            mine = [r for r in ranks if self.labels[r] == host]
            if mine:
                word = "rank" if len(mine) == 1 else "ranks"
                parts.append(f"{word} {format_ranks(mine)} on host {host}")
        return "; ".join(parts)


def format_ranks(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    out, ranks = [], sorted(ranks)
    start = prev = ranks[0] if ranks else None
    for rank in ranks[1:] + [None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = rank
    return ", ".join(out)


def gather_host_map() -> HostMap:
    """Every rank's host label (collective on the world; a one-rank map outside a process group)."""
    label = local_host_label()
    if not dist.is_initialized():
        return HostMap((label,))
    labels = [None] * dist.get_world_size()
    with peer_failures_explained(f"gathering host names (rank {dist.get_rank()})"):
        dist.all_gather_object(labels, label)
    return HostMap(tuple(labels))
