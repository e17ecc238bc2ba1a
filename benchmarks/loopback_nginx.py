"""The one nginx the loopback benchmarks serve their webs from: Debian's packages found or
installed, one port free on every loopback address, one configuration, one way to start and stop.

nginx runs in the foreground as one process (no master) with every path it writes under the
benchmark's folder, as freshness_pipeline_tests/nginx_server.py runs it for the tests: one
signal to one pid stops it, nothing outlives the benchmark, and the system's configuration and
/var are never touched. One server block listens on one port of many loopback addresses, one
address a host of the crawl. What the benchmarks really differ in (the server block's root and
locations, keep-alive and file caching, worker limits for thousands of listening sockets) is
what they pass in as a ``NginxSite``; the rest is the same text for all of them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


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


@dataclass(frozen=True)
class NginxSite:
    """What one benchmark's nginx does beyond the configuration they all share.

    ``server`` is the server block after its listen lines and ``server_name _``: the root and
    the locations, with ``{root}`` standing for the folder served (and nginx's own braces
    doubled). ``http_options`` are the http block's directives for keep-alive, sendfile and the
    open-file cache, which a tuned static site and a templated one set differently. Every
    listening socket takes a connection slot and a file, so a benchmark with thousands of
    addresses raises ``worker_connections`` and ``files_limit`` (``worker_rlimit_nofile``;
    None leaves the process's own limit).
    """

    server: str
    http_options: str = ""
    worker_connections: int = 4096
    files_limit: int | None = 8192


CONF_TEMPLATE = """\
daemon off;
master_process off;
worker_processes 1;
{files_limit}pid "{work}/nginx.pid";
error_log "{work}/error.log" warn;

events {{
    worker_connections {worker_connections};
}}

http {{
    types {{
        text/html html;
        text/plain txt;
    }}
    default_type application/octet-stream;
    client_body_temp_path "{work}/tmp/body";
    proxy_temp_path "{work}/tmp/proxy";
    fastcgi_temp_path "{work}/tmp/fastcgi";
    uwsgi_temp_path "{work}/tmp/uwsgi";
    scgi_temp_path "{work}/tmp/scgi";
    access_log off;
    server_tokens off;
{http_options}

    server {{
{listen}
        server_name _;
{server}
    }}
}}
"""


def nginx_conf(site: NginxSite, work: Path, root: Path, addresses: Sequence[str], port: int) -> str:
    """The nginx.conf text of ``site`` listening on ``port`` of every address."""
    files_limit = "" if site.files_limit is None else f"worker_rlimit_nofile {site.files_limit};\n"
    return CONF_TEMPLATE.format(
        files_limit=files_limit,
        work=work,
        worker_connections=site.worker_connections,
        http_options=textwrap.indent(textwrap.dedent(site.http_options).strip("\n"), " " * 4),
        listen="\n".join(f"        listen {address}:{port};" for address in addresses),
        server=textwrap.indent(textwrap.dedent(site.server.format(root=root)).strip("\n"), " " * 8),
    )


@dataclass(frozen=True)
class RunningNginx:
    """The port nginx answers on (the same on every address) and its pid, whose CPU the
    benchmarks report beside the client's."""

    port: int
    pid: int


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.2):
            return True
    except OSError:
        return False


def _started(
    process: subprocess.Popen[bytes], addresses: Sequence[str], port: int, wait_s: float
) -> bool:
    """The first and the last address answer before ``wait_s`` is up and nginx is still there
    (it exits at once when a bind fails)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and process.poll() is None:
        if _answers(addresses[0], port) and _answers(addresses[-1], port):
            return True
        time.sleep(0.02)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()  # SIGTERM: nginx's fast shutdown
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@contextlib.contextmanager
def running_nginx(
    site: NginxSite, work: Path, root: Path, addresses: Sequence[str]
) -> Iterator[RunningNginx]:
    """nginx serving ``root`` on one free port of every address, its configuration, logs and
    temporary files under ``work``, until the block ends. Another process can take the port
    between ``free_port`` and nginx's bind, so the start is tried five times on fresh ports.
    Binding thousands of addresses takes nginx a while, so the wait for it grows with them."""
    binary = ensure_nginx()
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / "tmp" / sub).mkdir(parents=True, exist_ok=True)
    conf = work / "nginx.conf"
    wait_s = 10.0 + len(addresses) / 200
    process: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(5):
            port = free_port(addresses)
            conf.write_text(nginx_conf(site, work, root, addresses, port))
            with open(work / "stderr.log", "ab") as log:
                process = subprocess.Popen(
                    [binary, "-p", str(work), "-c", str(conf)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            if _started(process, addresses, port, wait_s):
                break
            _stop(process)
        else:
            errors = (work / "stderr.log").read_text(errors="replace")
            raise SystemExit(f"nginx did not start: {errors[-2000:]}")
        yield RunningNginx(port=port, pid=process.pid)
    finally:
        if process is not None:
            _stop(process)
