"""Property-based tests of the promises other stages rely on: host keys never leave their
folder, rate estimates stay finite and move the right way, fingerprints ignore volatile tokens
and see real edits."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from freshness_pipeline.science.estimate import estimate_rates, prior_columns
from freshness_pipeline.science.fingerprint import content_fingerprint
from freshness_pipeline.warehouse.layout import escape_host_key, unescape_host_key
from freshness_pipeline.warehouse.storage import Warehouse

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.text(max_size=300))
def test_escaped_host_keys_never_leave_their_folder(host: str) -> None:
    key = escape_host_key(host)
    assert key and len(f"host={key}".encode()) <= 255  # one folder name
    assert "/" not in key and "\\" not in key and "\x00" not in key and not key.startswith(".")
    root = Path("/warehouse/url_state")
    path = Warehouse("/home-for-paths").partition_dir("url_state", host)
    assert path.parent == Warehouse("/home-for-paths").table_dir("url_state")
    assert (root / key).resolve().parent == root


@SETTINGS
@given(st.text(max_size=60), st.text(max_size=60))
def test_distinct_hosts_never_share_a_folder(a: str, b: str) -> None:
    if a.lower() != b.lower():
        assert escape_host_key(a) != escape_host_key(b)


@SETTINGS
@given(st.text(max_size=60))
def test_a_folder_name_gives_its_host_back(host: str) -> None:
    # the empty host and NUL once shared a folder, and listing it gave NUL back for both
    key = escape_host_key(host)
    assume("~" not in key)  # a key cut to length names its host in its file, not its name
    assert unescape_host_key(key) == host.lower()


def test_the_empty_host_and_nul_have_their_own_folders() -> None:
    assert escape_host_key("") != escape_host_key("\x00")
    assert [unescape_host_key(escape_host_key(h)) for h in ("", "\x00")] == ["", "\x00"]


_HISTORY = st.lists(
    st.tuples(st.floats(min_value=1e-3, max_value=60.0), st.booleans()), min_size=0, max_size=30
)


def _rate(history: list[tuple[float, bool]], url_class: str | None) -> float:
    state = pl.DataFrame(
        {
            "url": ["u"],
            "url_class": [url_class],
            "obs_interval_days": [[d for d, _ in history]],
            "obs_changed": [[c for _, c in history]],
        },
        schema={
            "url": pl.String,
            "url_class": pl.String,
            "obs_interval_days": pl.List(pl.Float64),
            "obs_changed": pl.List(pl.Boolean),
        },
    )
    return float(estimate_rates(prior_columns(state))["change_rate"][0])


@SETTINGS
@given(_HISTORY, st.sampled_from([None, "article", "listing", "static"]), st.data())
def test_estimates_are_finite_non_negative_and_monotone_in_changes(history, url_class, data):
    rate = _rate(history, url_class)
    assert math.isfinite(rate) and rate >= 0
    unchanged = [i for i, (_, c) in enumerate(history) if not c]
    if unchanged:
        i = data.draw(st.sampled_from(unchanged))
        more = list(history)
        more[i] = (history[i][0], True)
        assert _rate(more, url_class) >= rate * (1 - 1e-9)


_WORDS = ["river", "mountain", "lantern", "harbor", "orchard", "meadow", "violin", "canyon"]
_VOLATILE = st.one_of(
    st.builds(lambda: str(uuid.uuid4())),
    st.integers(min_value=10**9, max_value=10**13).map(str),
    st.integers(min_value=0, max_value=10**7).map(lambda n: f"{n:,} views"),
    st.sampled_from(
        ["2026-11-30T12:34:56Z", "Mon, 30 Nov 2026 12:34:56 GMT", "12:34", "11/30/2026"]
    ),
    st.binary(min_size=8, max_size=16).map(lambda b: b.hex()),
)


def _page(words: list[str], noise: list[str]) -> bytes:
    body = " ".join(words)
    extras = "".join(f"<span>{n}</span>" for n in noise)
    return f"<html><head><title>T</title></head><body><article><p>{body}</p>{extras}</article></body></html>".encode()


@SETTINGS
@given(
    st.lists(st.sampled_from(_WORDS), min_size=3, max_size=40),
    st.lists(_VOLATILE, max_size=6),
    st.lists(_VOLATILE, max_size=6),
    st.data(),
)
def test_fingerprints_ignore_volatile_tokens_and_see_edits(words, noise_a, noise_b, data):
    page = content_fingerprint(_page(words, noise_a), content_type="text/html")
    assert page == content_fingerprint(_page(words, noise_b), content_type="text/html")
    i = data.draw(st.integers(min_value=0, max_value=len(words) - 1))
    edited = list(words)
    edited[i] = "zeppelin"
    assert page != content_fingerprint(_page(edited, noise_a), content_type="text/html")
