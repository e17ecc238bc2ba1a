"""What the nginx benchmarks share: finding or installing Debian's packages, and one port free
on every loopback address a benchmark's nginx listens on."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Sequence


def find_nginx() -> str | None:
    """nginx on PATH or where Debian puts it (/usr/sbin is not on every PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def ensure_nginx(*extra_commands: str) -> str:
    """nginx-light (and the Debian packages named like ``extra_commands``), installed with
    apt-get on first use; returns the nginx binary."""
    if find_nginx() and all(shutil.which(c) for c in extra_commands):
        return find_nginx() or ""
    packages = [*extra_commands, "nginx-light"]
    if os.geteuid() != 0:
        raise SystemExit(f"needed: apt-get install -y {' '.join(packages)} (as root)")
    print(f"installing {' '.join(packages)} with apt-get ...", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", *packages],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    nginx = find_nginx()
    if not (nginx and all(shutil.which(c) for c in extra_commands)):
        raise SystemExit(f"apt-get did not provide {' '.join(packages)}")
    return nginx


def free_port(addresses: Sequence[str]) -> int:
    """A port free on every address (bound one by one; the nginx start retries if raced)."""
    while True:
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = probe.getsockname()[1]
        try:
            for address in addresses:
                with socket.socket() as sock:
                    sock.bind((address, port))
            return port
        except OSError:
            continue
