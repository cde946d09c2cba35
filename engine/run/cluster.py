"""Facts about the Ray cluster a sweep runs on: is the address reachable, what fits on one node.

``ray.init(address=...)`` against an address where nothing listens retries for minutes without a
word; :func:`check_address` tries a plain TCP connection first and fails in seconds with a message
that says what was tried. :func:`placement_problem` says why a model's actor can never be placed
(more GPUs or memory than any single node has), so the model is skipped with that reason instead
of waiting forever for resources that do not exist.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from engine.errors import ConfigError

log = logging.getLogger(__name__)

#: Ray's default GCS port (``ray start --head``) and Ray Client port.
GCS_PORT = 6379
CLIENT_PORT = 10001


def parse_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` that an address points at; None for 'auto'/'local' (Ray resolves those itself)."""
    addr = address.strip()
    if addr in ("auto", "local", ""):
        env = os.environ.get("RAY_ADDRESS", "")
        if addr == "auto" and env and env not in ("auto", "local"):
            return parse_address(env)
        return None
    default = GCS_PORT
    if addr.startswith("ray://"):
        addr, default = addr[len("ray://") :], CLIENT_PORT
    addr = addr.rstrip("/")
    if addr.startswith("["):  # [ipv6]:port
        host, _, rest = addr[1:].partition("]")
        port_text = rest.lstrip(":")
    elif addr.count(":") == 1:
        host, port_text = addr.split(":")
    else:
        host, port_text = addr, ""
    if not host:
        raise ConfigError(f"Ray address '{address}' has no host; use host:port (e.g. 10.0.0.1:6379), ray://host:10001 or auto")
    if not port_text:
        return host, default
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"Ray address '{address}': '{port_text}' is not a port number; use host:port (e.g. 10.0.0.1:6379)")
    return host, int(port_text)


def check_address(address: str, timeout_s: float = 10.0, attempt_s: float = 3.0) -> None:
    """Fail within ``timeout_s`` (plus one attempt) when nothing accepts connections at ``address``.

    Retries every second (a head node that is still starting gets its chance); the error names the
    host, the port, how long and how often it was tried, and the last socket error.
    """
    target = parse_address(address)
    if target is None:
        return
    host, port = target
    start = time.monotonic()
    tries = 0
    last = ""
    while True:
        tries += 1
        try:
            with socket.create_connection((host, port), timeout=attempt_s):
                log.debug("Ray address %s:%d accepts connections", host, port)
                return
        except OSError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() - start >= timeout_s:
            break
        time.sleep(min(1.0, max(0.0, timeout_s - (time.monotonic() - start))))
    waited = time.monotonic() - start
    raise ConfigError(
        f"cannot reach the Ray cluster at '{address}': tried a TCP connection to {host}:{port} "
        f"{tries} time(s) over {waited:.0f} s (last error: {last}). Start the head node there "
        "(`ray start --head --port 6379`), check the host, port and firewall, or drop --address to run on this machine"
    )


def node_capacity() -> dict[str, float]:
    """The most GPUs, CPUs and memory (MB) that any one alive node of the connected cluster offers."""
    import ray

    best = {"GPU": 0.0, "CPU": 0.0, "memory_mb": 0.0}
    for node in ray.nodes():
        if not node.get("Alive", node.get("alive", False)):
            continue
        res: Mapping[str, Any] = node.get("Resources", {}) or {}
        best["GPU"] = max(best["GPU"], float(res.get("GPU", 0.0)))
        best["CPU"] = max(best["CPU"], float(res.get("CPU", 0.0)))
        best["memory_mb"] = max(best["memory_mb"], float(res.get("memory", 0.0)) / 2**20)
    return best


def placement_problem(name: str, num_gpus: float, meta: Mapping[str, Any], capacity: Mapping[str, float]) -> str | None:
    """Why no node can ever hold one actor of model ``name`` (None when one can)."""
    if num_gpus > capacity.get("GPU", 0.0) + 1e-9:
        return (
            f"model {name} needs {num_gpus:g} GPU(s) per actor; the largest node of the Ray cluster has "
            f"{capacity.get('GPU', 0.0):g} (set num_gpus: 0 in its registry entry to run it on CPU)"
        )
    mem = meta.get("memory_mb")
    node_mem = capacity.get("memory_mb", 0.0)
    if mem is not None and node_mem > 0 and float(mem) > node_mem:
        return f"model {name} needs {float(mem):.0f} MB (registry memory_mb); the largest node of the Ray cluster offers {node_mem:.0f} MB"
    return None
