"""Real web pages for the change-detection tests and benchmark, kept out of the repository.

They are the HTML fixtures in newspaper4k's source distribution on PyPI (``tests/data/html``,
news and portal pages saved from their sites, with the article text newspaper4k expects in
``tests/data/txt``). The package's code is MIT-licensed, but the pages belong to their
publishers, so they are fetched into a cache instead of committed:
``python3 freshness_pipeline_tests/real_pages.py`` (what ``.ci/run`` does, non-fatally) runs
``pip download`` for the sdist and unpacks those two folders under
``~/.cache/freshness-bench/newspaper4k-<version>/`` (``$XDG_CACHE_HOME`` moves the cache,
``$FRESHNESS_REAL_PAGES`` names an unpacked folder to use instead). Tests that need the pages
skip, saying so, when they are absent.

Standard library only: CI runs it before the project's venv exists.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

NEWSPAPER4K_VERSION = "0.9.6"
_MEMBERS = ("tests/data/html/", "tests/data/txt/", "LICENSE")
# Pages that hold no article to keep fresh: a bare meta-refresh stub and an RSS listing.
_NOT_PAGES = frozenset({"google_meta_refresh", "sample_rss"})


def cache_dir() -> Path:
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return home / "freshness-bench" / f"newspaper4k-{NEWSPAPER4K_VERSION}"


def pages_dir() -> Path:
    """Where the unpacked fixtures are (or would be): ``$FRESHNESS_REAL_PAGES`` or the cache."""
    override = os.environ.get("FRESHNESS_REAL_PAGES")
    return Path(override) if override else cache_dir()


def missing_reason() -> str | None:
    """Why the real pages cannot be used, or None when they can."""
    html = pages_dir() / "tests" / "data" / "html"
    if not html.is_dir() or not any(html.glob("*.html")):
        return (
            f"real pages not found under {pages_dir()}; fetch them with "
            "`python3 freshness_pipeline_tests/real_pages.py` (downloads newspaper4k's sdist "
            "from PyPI)"
        )
    return None


def fetch(python: str = sys.executable) -> Path:
    """Download newspaper4k's sdist with pip and unpack its HTML and text fixtures."""
    target = cache_dir()
    if missing_reason() is None and pages_dir() == target:
        return target
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"newspaper4k=={NEWSPAPER4K_VERSION}", "-d", tmp],
            check=True,
        )  # fmt: skip
        (sdist,) = Path(tmp).glob("newspaper4k-*.tar.gz")
        prefix = f"newspaper4k-{NEWSPAPER4K_VERSION}/"
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                name = member.name.removeprefix(prefix)
                if not member.isfile() or not name.startswith(_MEMBERS):
                    continue
                source = archive.extractfile(member)
                if source is None:
                    continue
                out = target / name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(source.read())
    return target


@dataclass(frozen=True)
class RealPage:
    name: str
    html: bytes
    #: the article text newspaper4k expects from the page, when it ships one
    article_text: str | None


def load() -> list[RealPage]:
    """The distinct article pages, by name (two fixtures are byte-identical copies)."""
    root = pages_dir() / "tests" / "data"
    pages: list[RealPage] = []
    seen: set[str] = set()
    for path in sorted((root / "html").glob("*.html")):
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if path.stem in _NOT_PAGES or digest in seen:
            continue
        seen.add(digest)
        txt = root / "txt" / f"{path.stem}.txt"
        text = txt.read_text(encoding="utf-8", errors="replace") if txt.exists() else None
        pages.append(RealPage(path.stem, data, text))
    return pages


if __name__ == "__main__":
    print(f"real pages in {fetch()}")
