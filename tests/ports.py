"""Free TCP ports on 127.0.0.1 for servers a test starts later (Serve's proxy, `codesearch serve`,
PostgreSQL, an SMTP server), chosen where nothing else of this machine picks ports.

Asking the kernel (``bind(("127.0.0.1", 0))``) answers a port of the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 here), the range every outgoing
connection and every server started on port 0 also draws from; Ray's processes (gRPC servers, the
replicas' gRPC ports, the GCS's clients) take dozens of them. Between our release of the port and
the server's bind, one of those could take it: a suite run once lost a test to "Failed to bind to
address 127.0.0.1:42533". So the port is drawn at random from 20000-32767, below the ephemeral
range and above Ray's worker ports (10002-19999), and checked free by binding it.
"""

from __future__ import annotations

import random
import socket

#: Where test servers' ports are drawn from: below the kernel's ephemeral range, above Ray's workers'.
LOW, HIGH = 20000, 32767


def free_port() -> int:
    """A port of 127.0.0.1 free now, outside the ranges the kernel and Ray hand out."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(LOW, HIGH)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port of 127.0.0.1 between {LOW} and {HIGH} after 200 tries")
