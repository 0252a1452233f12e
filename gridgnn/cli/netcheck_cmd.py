"""``gridgnn netcheck --rdzv-endpoint HOST:PORT``: check, on one host, that a multi-host run can start.

Run it on every host before torchrun (the Slurm script in ``scripts/`` does). On the rendezvous host (the
endpoint's address is one of its own) it checks that the port is free; on the others that the address
answers from the interface's address (a refused connection counts: the host is there, torchrun is not
listening yet). Either way it names
the interface gloo will use (``--interface``, else the one that reaches the rendezvous host). One line out;
a problem is one line ``gridgnn: error: ...`` and exit status 2. Sends nothing but one TCP connection attempt.
"""

from __future__ import annotations

import argparse
import socket

from gridgnn.errors import ConfigError
from gridgnn.grid.network import (
    check_interface,
    check_port_free,
    check_reachable,
    interface_addresses,
    interface_for,
    resolve_host,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("netcheck", help="check this host's network for a multi-host run",
                                 description="Check the rendezvous endpoint and the interface of a multi-host "
                                             "run from this host (run it on every host before torchrun).")
    parser.add_argument("--rdzv-endpoint", required=True, metavar="HOST:PORT",
                        help="torchrun's --rdzv-endpoint (the rendezvous host and port)")
    parser.add_argument("--interface", default=None, metavar="NAME",
                        help="the interface the workers will use (default: the one that reaches HOST)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for the rendezvous host to answer (default: 10)")
    parser.set_defaults(handler=run_netcheck)


def parse_endpoint(text: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port); `ConfigError` otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--rdzv-endpoint '{text}': expected HOST:PORT with a port in 1..65535")
    return host, int(port)


def run_netcheck(args: argparse.Namespace) -> int:
    host, port = parse_endpoint(args.rdzv_endpoint)
    address = resolve_host(host)
    name = args.interface or interface_for(address)
    local = check_interface(name)
    here = socket.gethostname()
    if address in interface_addresses().values():
        check_port_free(address, port)
        print(f"netcheck   {here}: rendezvous host, port {port} on {address} is free; interface {name} ({local})")
    else:
        check_reachable(host, port, args.timeout, refused_ok=True, source=local)
        print(f"netcheck   {here}: reaches {address}:{port}; interface {name} ({local})")
    return 0
