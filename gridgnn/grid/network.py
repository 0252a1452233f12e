"""Which network interface a multi-host run talks on, and one-line errors for a rendezvous it cannot use.

gloo connects the workers of a run over one interface per host. Unless told (``GLOO_SOCKET_IFNAME``), it
takes the address the host name resolves to, which on many machines is a loopback address (Debian's
``127.0.1.1``) or the wrong network: the job then hangs until the timeout. gridgnn chooses, in this order:

1. ``--interface NAME`` (or the environment variable ``GRIDGNN_INTERFACE``);
2. ``GLOO_SOCKET_IFNAME`` when the user already set it;
3. on a job that spans hosts (``WORLD_SIZE`` > ``LOCAL_WORLD_SIZE``): the interface whose IPv4 address the
   kernel would use to reach the rendezvous host ``MASTER_ADDR`` (a routing lookup; no packet is sent).

The chosen name is exported as ``GLOO_SOCKET_IFNAME`` (and ``NCCL_SOCKET_IFNAME`` when unset) before the
process group starts. Linux only for the address lookups (``SIOCGIFADDR``); not collective.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct

from gridgnn.errors import ConfigError

INTERFACE_ENV = "GRIDGNN_INTERFACE"
_SIOCGIFADDR = 0x8915


def interface_addresses() -> dict[str, str]:
    """Every network interface of this host that has an IPv4 address: name -> address (dotted)."""
    import fcntl

    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
            except OSError:  # no IPv4 address (or the interface vanished)
                continue
            out[name] = socket.inet_ntoa(reply[20:24])
    return out


def interface_is_up(name: str) -> bool:
    """True when the kernel reports interface ``name`` as up (``/sys/class/net/NAME/operstate``)."""
    try:
        with open(f"/sys/class/net/{name}/operstate", encoding="ascii") as state:
            return state.read().strip() in ("up", "unknown")  # loopback and some virtual links say unknown
    except OSError:
        return False


def resolve_host(host: str) -> str:
    """The IPv4 address of ``host`` (a name or an address); `ConfigError` when it does not resolve."""
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise ConfigError(f"rendezvous host '{host}' does not resolve ({exc.strerror or exc}); "
                          "give its address or a name this host can look up") from None


def source_address_for(address: str) -> str:
    """The local IPv4 address the kernel would use to reach ``address`` (a route lookup, nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((address, 9))
        except OSError as exc:
            raise ConfigError(f"no route from this host to the rendezvous address {address} "
                              f"({exc.strerror or exc}); check the address and the network") from None
        return sock.getsockname()[0]


def interface_for(address: str) -> str:
    """The interface this host would use to reach ``address`` (raises `ConfigError` when none)."""
    local = source_address_for(address)
    for name, ip in interface_addresses().items():
        if ip == local:
            return name
    raise ConfigError(f"no interface of this host holds {local}, the address it would use to reach {address}; "
                      "choose one with --interface")


def check_interface(name: str) -> str:
    """``name`` if it is an interface of this host that is up and has an IPv4 address; its address."""
    addresses = interface_addresses()
    if name not in addresses:
        known = ", ".join(sorted(addresses)) or "none"
        raise ConfigError(f"--interface {name}: no network interface of that name with an IPv4 address on "
                          f"host {socket.gethostname()} (interfaces here: {known})")
    if not interface_is_up(name):
        raise ConfigError(f"--interface {name}: the interface is down on host {socket.gethostname()}")
    return addresses[name]


def spans_hosts(env: dict | None = None) -> bool:
    """True in a torchrun job whose workers are on more than one host (fewer local workers than the world)."""
    env = os.environ if env is None else env
    return int(env.get("LOCAL_WORLD_SIZE", env.get("WORLD_SIZE", "1"))) < int(env.get("WORLD_SIZE", "1"))


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def choose_interface(requested: str | None = None) -> str | None:
    """The interface gloo should use (see the module docstring), exported to the environment; None when
    nothing needs choosing (one host and no request). Raises `ConfigError` with the fix."""
    requested = requested or os.environ.get(INTERFACE_ENV)
    if requested:
        check_interface(requested)
        name = requested
    elif os.environ.get("GLOO_SOCKET_IFNAME"):
        return os.environ["GLOO_SOCKET_IFNAME"]
    elif spans_hosts() and "MASTER_ADDR" in os.environ:
        master = resolve_host(os.environ["MASTER_ADDR"])
        if is_loopback(master):
            raise ConfigError(
                f"the rendezvous address MASTER_ADDR={os.environ['MASTER_ADDR']} is a loopback address but the "
                "job spans hosts: give torchrun --local-addr <this host's address> (the head's address is "
                "what the others dial), or use --rdzv-endpoint with an address every host reaches")
        name = interface_for(master)
    else:
        return None
    os.environ["GLOO_SOCKET_IFNAME"] = name
    os.environ.setdefault("NCCL_SOCKET_IFNAME", name)
    return name


def check_reachable(host: str, port: int, timeout_s: float, *, refused_ok: bool = False,
                    source: str | None = None) -> None:
    """Open (and close) a TCP connection to ``host:port``, from address ``source`` when given (the
    interface's: gloo talks from there); `ConfigError` naming the problem when the host cannot be reached in
    ``timeout_s`` seconds. With ``refused_ok``, a refused connection passes (the host answered; nothing
    listens there yet)."""
    address = resolve_host(host)
    where = f"{host}:{port}" if host == address else f"{host}:{port} ({address})"
    try:
        with socket.create_connection((address, port), timeout=timeout_s,
                                      source_address=(source, 0) if source else None):
            return
    except ConnectionRefusedError:
        if refused_ok:
            return
        reason = "connection refused: nothing listens there"
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    via = f" from {source}" if source else ""
    if not source and os.environ.get("GLOO_SOCKET_IFNAME"):
        via = f" (interface {os.environ['GLOO_SOCKET_IFNAME']})"
    raise ConfigError(f"the rendezvous address {where} is unreachable from host {socket.gethostname()}"
                      f"{via}: {reason}; check the address, the port, "
                      "--interface and any firewall between the hosts")


def check_port_free(host: str, port: int) -> None:
    """Bind ``host:port`` for a moment; `ConfigError` when another process holds the port."""
    address = resolve_host(host)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is taken by another process; choose another port "
                                  "(--rdzv-endpoint HOST:PORT, or MASTER_PORT)") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"{host} is not an address of this host ({socket.gethostname()}); run "
                                  "this on the rendezvous host, or fix the address") from None
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def is_address_in_use(error: BaseException) -> bool:
    """True for the error torch raises when the rendezvous port of ``init_process_group`` is taken."""
    text = str(error).lower()
    return "address already in use" in text or "eaddrinuse" in text


def prepare_worker_network(timeout_s: float, interface: str | None = None) -> str | None:
    """Before a launched worker joins its process group: choose the interface (`choose_interface`) and,
    under torchrun's agent store (already listening), check that the rendezvous address answers.
    Returns the interface chosen, if any. Not collective."""
    name = choose_interface(interface)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and spans_hosts():
        check_reachable(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), min(timeout_s, 30.0))
    return name


def port_taken_error(error: BaseException) -> ConfigError | None:
    """A one-line `ConfigError` for a rendezvous port another process holds; None for any other error."""
    if not is_address_in_use(error):
        return None
    host, port = os.environ.get("MASTER_ADDR", "?"), os.environ.get("MASTER_PORT", "?")
    return ConfigError(f"port {port} on {host} is taken by another process; choose another port "
                       "(--rdzv-endpoint HOST:PORT, or MASTER_PORT)")
