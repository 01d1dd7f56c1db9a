"""Where this node stands on the network, seen from the rendezvous endpoint of a multi-node job.

Three things torch's launcher otherwise takes from the host name, which is wrong wherever the
host name resolves to a loopback address (a network namespace, many containers, hosts whose
/etc/hosts maps their own name to 127.0.1.1):

- whether this node hosts the c10d store: torch's c10d rendezvous compares the endpoint with
  the host name's addresses; a node that owns the endpoint's address but is named otherwise
  never starts the store, and every node waits for it until the rendezvous times out;
- the address the agent publishes to the workers (``MASTER_ADDR``): the host name's;
- the interface gloo binds to: the host name's address, else loopback.

dpwise answers each from the routing table instead: the address this node reaches the endpoint
from, the interface that holds it, and whether the endpoint's address is one of this node's.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import socket
import struct
from dataclasses import dataclass

NODE_ADDRESS_ENV = "DPWISE_NODE_ADDRESS"  # what dpwise's launch found; workers record it
_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


@dataclass(frozen=True)
class NodeNetwork:
    """This node's side of a multi-node job: ``is_host`` None leaves the decision to torch."""

    address: str | None
    interface: str | None
    is_host: bool | None


MAX_PORT = 65535


def split_endpoint(endpoint: str) -> tuple[str, int | None]:
    """("host", port) of HOST:PORT, [V6]:PORT, HOST or V6 (port None). ValueError, saying what
    is wrong, for anything else: no host, a port that is not a number from 1 to MAX_PORT."""
    if endpoint.startswith("["):
        host, closed, rest = endpoint[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ValueError("write an IPv6 endpoint as [ADDRESS]:PORT")
        port = rest[1:] if rest else None
    elif endpoint.count(":") == 1:
        host, port = endpoint.split(":")
    else:
        host, port = endpoint, None
    if not host.strip():
        raise ValueError("it names no host")
    if port is None:
        return host, None
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= MAX_PORT):
        raise ValueError(f"its port {port!r} is not a number from 1 to {MAX_PORT}")
    return host, int(port)


def resolve(host: str) -> str | None:
    """The endpoint host's first address (IPv4 first), or None when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0]) if infos else None


def route_source(address: str) -> str | None:
    """The local address packets to ``address`` leave from (no packet is sent: a UDP connect
    only asks the routing table)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((address, 9))
            return str(probe.getsockname()[0])
        except OSError:
            return None


def interface_of(address: str) -> str | None:
    """The name of the interface that holds IPv4 ``address`` (None for IPv6 or not found)."""
    if ":" in address:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()))
            except OSError:
                continue  # an interface without an IPv4 address
            if socket.inet_ntoa(packed[20:24]) == address:
                return name
    return None


def _named_by_host_name(host: str) -> bool:
    """Whether torch's own test (the endpoint names this machine) already says "host"."""
    try:
        from torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname

        return bool(_matches_machine_hostname(host))
    except ImportError:  # pragma: no cover - every supported torch has it
        return False


def owns_free(address: str, port: int) -> bool | None:
    """True: ``address`` is this node's and ``port`` is free there; False: the address is not
    this node's, or it is and another process (a node started earlier here) holds the port;
    None: cannot tell."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the c10d store binds
        try:
            s.bind((address, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EADDRINUSE):
                return False
            return None
    return True


def node_network(endpoint: str) -> NodeNetwork:
    """This node's address, interface and store role for the rendezvous at ``endpoint``."""
    host, port = split_endpoint(endpoint)
    target = resolve(host)
    if target is None:
        return NodeNetwork(None, None, None)
    address = route_source(target)
    interface = interface_of(address) if address else None
    is_host: bool | None = None
    if port and not _named_by_host_name(host):
        # torch's fallback (store client when the port is taken) only runs when it decided
        # "host" itself; an explicit answer must be right: owned and free, or not ours
        is_host = owns_free(target, port)
    return NodeNetwork(address, interface, is_host)


def is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def worker_address() -> str | None:
    """The address a worker's process group reaches its peers from: what dpwise's launch found,
    else the route to ``MASTER_ADDR`` (torchrun's workers), else None (one process)."""
    found = os.environ.get(NODE_ADDRESS_ENV)
    if found:
        return found
    master = os.environ.get("MASTER_ADDR")
    target = resolve(master) if master else None
    return route_source(target) if target else None
