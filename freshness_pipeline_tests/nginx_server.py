"""A real nginx on loopback for tests: what our client's conditional GETs meet in the wild.

aiohttp test servers only do what their handlers say; nginx is the static-file server most
sites actually run, with its own ETag (mtime-size), Last-Modified, exact If-Modified-Since
matching and weak ETags under gzip. Testing against the Debian binary keeps us honest about
those semantics without any network beyond 127.0.0.1.

nginx runs in the foreground (``daemon off``) as one process (``master_process off``), so
stopping it is one signal to one pid and a crashed test run cannot leave orphan workers. All its
paths (pid, error and access logs, temp dirs) live in the test's tmp dir; the system config and
/var are never touched. Without nginx the fixture (``nginx`` in conftest.py) skips.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SKIP_REASON",
    "AccessRecord",
    "NginxServer",
    "find_nginx",
    "run_nginx",
]

SKIP_REASON = "nginx not installed (apt-get install nginx-light)"
_FALLBACK_PATHS = ("/usr/sbin/nginx",)
_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 5.0

# Tab-separated; nginx escapes control characters (\x09 for a tab) so a header cannot forge
# fields. An absent header is "-".
_LOG_FORMAT = (
    "$msec\\t$request_method\\t$request_uri\\t$status\\t$body_bytes_sent\\t"
    "$http_if_none_match\\t$http_if_modified_since\\t$http_accept_encoding\\t$http_user_agent"
)

_CONFIG = """\
daemon off;
master_process off;
worker_processes 1;
pid "{work}/nginx.pid";
error_log "{work}/error.log" warn;

events {{
    worker_connections 64;
}}

http {{
    types {{
        text/html html htm;
        text/plain txt;
        application/xml xml;
    }}
    default_type application/octet-stream;
    client_body_temp_path "{work}/tmp/body";
    proxy_temp_path "{work}/tmp/proxy";
    fastcgi_temp_path "{work}/tmp/fastcgi";
    uwsgi_temp_path "{work}/tmp/uwsgi";
    scgi_temp_path "{work}/tmp/scgi";
    log_format probe '{log_format}';
    access_log "{work}/access.log" probe;
    server_tokens off;
    keepalive_timeout 5s;

    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
        root "{root}";

        location / {{
        }}

        # Compressed on the fly: nginx then weakens the ETag (W/"...") and still answers 304.
        location /gz/ {{
            gzip on;
            gzip_min_length 1;
        }}
    }}
}}
"""


def find_nginx() -> str | None:
    """The nginx binary on PATH or where Debian puts it (/usr/sbin is not on every PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    for path in _FALLBACK_PATHS:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


@dataclass(frozen=True)
class AccessRecord:
    """One request as nginx logged it (headers we care about; None when absent)."""

    time: float
    method: str
    uri: str
    status: int
    bytes: int
    if_none_match: str | None
    if_modified_since: str | None
    accept_encoding: str | None
    user_agent: str | None


_ESCAPED = re.compile(r"\\x([0-9A-Fa-f]{2})")


def _opt(value: str) -> str | None:
    # nginx writes '"' and '\\' and control characters as \xHH in the default log escaping.
    if value == "-":
        return None
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), value)


class NginxServer:
    """A running nginx serving ``root``; files are written through it so tests control mtimes."""

    def __init__(self, root: Path, work: Path, port: int, process: subprocess.Popen[bytes]):
        self.root = root
        self.work = work
        self.port = port
        self.process = process
        self.host = f"127.0.0.1:{port}"
        self.base = f"http://{self.host}"

    def url(self, path: str) -> str:
        return self.base + "/" + path.lstrip("/")

    def path(self, name: str) -> Path:
        target = (self.root / name.lstrip("/")).resolve()
        if not target.is_relative_to(self.root.resolve()):
            raise ValueError(f"{name!r} is outside the document root")
        return target

    def write(self, name: str, content: str | bytes, *, mtime: float | None = None) -> Path:
        """Write a file; ``mtime`` (epoch seconds) sets its modification time.

        nginx derives ETag and Last-Modified from whole-second mtimes, so tests that need a new
        validator move mtime explicitly instead of hoping a second has passed.
        """
        target = self.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        target.write_bytes(data)
        if mtime is not None:
            os.utime(target, (mtime, mtime))
        return target

    def touch(self, name: str, mtime: float) -> None:
        target = self.path(name)
        os.utime(target, (mtime, mtime))

    def mtime(self, name: str) -> float:
        return self.path(name).stat().st_mtime

    def remove(self, name: str) -> None:
        self.path(name).unlink()

    def access_log(self, *, at_least: int = 0, timeout: float = 2.0) -> list[AccessRecord]:
        """The requests logged so far, waiting up to ``timeout`` for ``at_least`` of them.

        nginx logs a request when it finalizes it, which can be a moment after the client has
        read the last byte; asking for the count you expect avoids that race.
        """
        deadline = time.monotonic() + timeout
        records = self._read_access_log()
        while len(records) < at_least and time.monotonic() < deadline:
            time.sleep(0.01)
            records = self._read_access_log()
        return records

    def _read_access_log(self) -> list[AccessRecord]:
        log = self.work / "access.log"
        if not log.exists():
            return []
        records = []
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) != 9:
                continue
            msec, method, uri, status, sent, inm, ims, enc, agent = parts
            records.append(
                AccessRecord(
                    time=float(msec),
                    method=method,
                    uri=uri,
                    status=int(status),
                    bytes=int(sent),
                    if_none_match=_opt(inm),
                    if_modified_since=_opt(ims),
                    accept_encoding=_opt(enc),
                    user_agent=_opt(agent),
                )
            )
        return records

    def error_log(self) -> str:
        log = self.work / "error.log"
        return log.read_text(errors="replace") if log.exists() else ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()  # SIGTERM: nginx's fast shutdown
    try:
        process.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=_STOP_TIMEOUT_S)


def _start(binary: str, work: Path, root: Path) -> tuple[int, subprocess.Popen[bytes]]:
    # The port is picked before nginx binds it, so another process may take it in between:
    # retry on "address in use" rather than fail the test.
    last_error = ""
    for _ in range(5):
        port = _free_port()
        conf = work / "nginx.conf"
        conf.write_text(
            _CONFIG.format(work=work, root=root, port=port, log_format=_LOG_FORMAT),
            encoding="utf-8",
        )
        with open(work / "stderr.log", "ab") as stderr:
            process = subprocess.Popen(
                [binary, "-p", str(work), "-c", str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
            )
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if _listening(port):
                return port, process
            time.sleep(0.02)
        _stop(process)
        errors = (work / "stderr.log").read_text(errors="replace")
        if (work / "error.log").exists():
            errors += (work / "error.log").read_text(errors="replace")
        last_error = errors.strip()[-2000:]
        if "in use" not in last_error:
            break
    raise RuntimeError(f"nginx did not start: {last_error or 'no output'}")


@contextmanager
def run_nginx(work: Path, *, binary: str | None = None) -> Iterator[NginxServer]:
    """Start nginx with a private config under ``work`` (document root ``work/root``)."""
    binary = binary or find_nginx()
    if binary is None:
        raise FileNotFoundError(SKIP_REASON)
    work = work.resolve()
    root = work / "root"
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / "tmp" / sub).mkdir(parents=True, exist_ok=True)
    port, process = _start(binary, work, root)
    try:
        yield NginxServer(root, work, port, process)
    finally:
        _stop(process)
