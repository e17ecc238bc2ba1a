"""How a user names a host on the command line, and what to tell them when no seeded host has
that name: one place for `freshness cycle --host`, `freshness hosts --retire` and `freshness
report --host`, which had each their own way (report took only the exact key and named no
likely one)."""

from __future__ import annotations

from freshness_pipeline.science.normalize import InvalidURL, url_authority

__all__ = ["host_key_of", "unknown_hosts_message"]


def host_key_of(given: str) -> str:
    """The host key a user means by ``given``: a key as `freshness hosts` lists it, or a URL
    or host name in any case (a default port dropped, as the keys have it)."""
    text = given.strip()
    try:
        return url_authority(text if "://" in text else f"http://{text}")
    except InvalidURL:
        return text.lower()


def unknown_hosts_message(unknown: list[str], known: list[str]) -> str:
    """The unknown keys, each with the seeded keys of the same host name on another port,
    which is what a host named without its port most often meant."""
    by_name: dict[str, list[str]] = {}
    for key in known:
        by_name.setdefault(_host_name(key), []).append(key)
    parts = []
    for key in unknown:
        alike = [k for k in by_name.get(_host_name(key), []) if k != key]
        parts.append(f"{key} (did you mean {', '.join(alike[:3])}?)" if alike else key)
    return ", ".join(parts)


def _host_name(key: str) -> str:
    """A host key without its port (``[::1]:8080`` -> ``[::1]``)."""
    name, colon, port = key.rpartition(":")
    return name if colon and port.isdigit() and not name.endswith(":") else key
