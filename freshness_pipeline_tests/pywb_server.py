"""Real archive clients for the archive tests: warcio's command line, and pywb in its own venv
(made on first use) with a wayback server on loopback.

pywb pins its dependencies (werkzeug, an old redis client, gevent) against the project's own,
so it is never installed into the project's venv: the first test that needs it builds
``~/.cache/freshness-bench/pywb-venv`` with ``pip install PYWB_SPEC`` (a minute or two, from
PyPI) and later runs reuse it. Where that cannot be done (no PyPI, no venv module) the tests
that need it skip and say why.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

PYWB_SPEC = "pywb>=2.9,<2.11"
CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "freshness-bench"
VENV = CACHE_HOME / "pywb-venv"


class PywbUnavailable(Exception):
    """pywb cannot be had here; the message says why."""


def ensure_pywb() -> Path:
    """The bin folder of a venv with pywb (``wayback``, ``wb-manager``), built on first use."""
    bin_dir = VENV / "bin"
    probe = [str(bin_dir / "python"), "-c", "import pywb, warcio"]
    if (bin_dir / "wayback").exists() and subprocess.run(
        probe, capture_output=True
    ).returncode == 0:
        return bin_dir
    try:
        VENV.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(VENV)], capture_output=True, text=True
        )
        if made.returncode != 0:
            raise PywbUnavailable(f"cannot create {VENV}: {made.stderr.strip()[-500:]}")
        installed = subprocess.run(
            [str(bin_dir / "python"), "-m", "pip", "install", "-q", PYWB_SPEC],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PywbUnavailable(f"cannot build {VENV}: {exc}") from exc
    if installed.returncode != 0:
        raise PywbUnavailable(
            f"pip install {PYWB_SPEC!r} failed: {installed.stderr.strip()[-800:]}"
        )
    return bin_dir


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_collection_config(root: Path, collections: dict[str, Path]) -> None:
    """A pywb config.yaml whose collections each read one folder of WARCs and CDXJ files."""
    lines = ["collections:"]
    for name, folder in collections.items():
        path = str(Path(folder).resolve()) + "/"
        lines += [f"  {name}:", f"    index_paths: {path}", f"    archive_paths: {path}"]
    (root / "config.yaml").write_text("\n".join(lines) + "\n")


@contextlib.contextmanager
def wayback(bin_dir: Path, root: Path, *, timeout_s: float = 60.0) -> Iterator[str]:
    """Run pywb's ``wayback`` in ``root`` (its config.yaml, its collections/) on 127.0.0.1 and a
    free port; yield its base URL; stop it afterwards."""
    port = free_port()
    log = open(root / "wayback.log", "wb")  # noqa: SIM115 - closed below, after the process
    process = subprocess.Popen(
        [str(bin_dir / "wayback"), "-p", str(port), "-b", "127.0.0.1"],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"wayback exited with {process.returncode}: {_tail(root)}")
            try:
                with urllib.request.urlopen(base + "/", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"wayback did not answer in {timeout_s} s: {_tail(root)}"
                    ) from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def _tail(root: Path) -> str:
    try:
        return (root / "wayback.log").read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def fetch(url: str, timeout: float = 20.0) -> tuple[int, dict[str, str], bytes]:
    """GET without following redirects: status, headers, body."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def _warcio_command() -> list[str]:
    script = Path(sys.executable).with_name("warcio")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from warcio.cli import main; sys.exit(main())"]


def warcio_check(path: Path) -> list[dict[str, str]]:
    """Run ``warcio check`` and ``warcio index`` on a WARC file as a user would; fail the test
    unless both pass; return the index lines (offset, type, URI of every record)."""
    checked = subprocess.run(
        [*_warcio_command(), "check", "-v", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, (
        f"warcio check {path}: {checked.stdout[-2000:]} {checked.stderr[-2000:]}"
    )
    # the file's own path is echoed and may hold the word (a test named ..._fails_...)
    assert "fail" not in checked.stdout.replace(str(path), "").lower(), checked.stdout[-2000:]
    indexed = subprocess.run(
        [
            *_warcio_command(),
            "index",
            "-f",
            "offset,length,warc-type,warc-target-uri,warc-record-id",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    assert indexed.returncode == 0, f"warcio index {path}: {indexed.stderr[-2000:]}"
    import json

    lines = [json.loads(line) for line in indexed.stdout.splitlines() if line.strip()]
    assert lines and lines[0]["warc-type"] == "warcinfo", (
        f"{path} does not open with a warcinfo record"
    )
    return lines


if __name__ == "__main__":  # .ci/run builds the venv before the tests, so none waits for it
    print(f"pywb in {ensure_pywb()}")
