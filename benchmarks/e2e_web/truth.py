"""The ground truth of the benchmark web: its pages, their values and every change event.

Everything is drawn in advance for the whole horizon from ``seed``, so the server, the scorer and
the in-memory baselines read one truth and a run is reproducible. Times are seconds of
simulated time from the first cycle (``t = 0``); a page's live content version at ``t`` is the
number of its change events up to and including ``t``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from .hosts import PATTERNS, HostProfile

DAY_S = 86_400.0
HOUR_S = 3_600.0
#: how far before the first cycle change events are drawn (only the last one before t = 0 is
#: ever visible, as a Last-Modified or lastmod date)
HISTORY_S = 10 * DAY_S
#: page ids are HOST_ID_STRIDE * (host index + 1) + a per-host number
HOST_ID_STRIDE = 10_000
ZIPF_EXPONENT = 0.8
#: the value of a page that appears during the run (the seeds' values have mean 1)
NEW_PAGE_VALUE = 1.0
#: the longest age of a starting page at t = 0
MAX_BIRTH_AGE_S = 400 * DAY_S

_VOCABULARY = (  # the slugs' and titles' words
    "harbor market council river budget station garden archive museum bridge festival league "
    "forecast energy transit library school clinic housing coast valley summit report review "
    "update notice guide manual release patch index survey ledger quarter harvest cargo "
    "signal network orbit canyon meadow lantern copper silver granite willow cedar maple "
    "falcon"
)
_WORDS = tuple(_VOCABULARY.split())


@dataclass(frozen=True)
class Clock:
    """The run's calendar: cycle ``k`` is at ``start + k * cycle_s``."""

    start: datetime
    cycle_s: float
    cycles: int

    @property
    def horizon_s(self) -> float:
        return self.cycles * self.cycle_s

    def cycle_time(self, k: int) -> float:
        return k * self.cycle_s

    def at(self, t_s: float) -> datetime:
        return self.start + timedelta(seconds=t_s)

    def iso(self, k: int) -> str:
        return self.at(self.cycle_time(k)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def cycle_of(self, t_s: float) -> int:
        """The cycle a request at simulated time ``t_s`` belongs to (the clock holds during one)."""
        return int(round(t_s / self.cycle_s))


DEFAULT_START = datetime(2026, 1, 5, tzinfo=UTC)


@dataclass
class Truth:
    """The whole web's truth.

    ``pages``: one row per page (page_id, host, path, sitemap_path, value, pattern,
    rate_per_day, birth_s, appear_s, gone_s, gone_status, disallowed, initial, listed, scored).
    ``events``: one row per change (page_id, version from 1, t_s), sorted.
    """

    hosts: tuple[HostProfile, ...]
    clock: Clock
    seed: int
    pages: pl.DataFrame
    events: pl.DataFrame
    _times: dict[int, np.ndarray]
    _rows: dict[int, dict]

    @classmethod
    def from_tables(
        cls,
        hosts: tuple[HostProfile, ...],
        clock: Clock,
        seed: int,
        pages: pl.DataFrame,
        times: dict[int, np.ndarray],
    ) -> Truth:
        """A truth from a pages table and each page's sorted change times (tests build small
        hand-made ones this way)."""
        ordered = {pid: np.sort(np.asarray(t, dtype=np.float64)) for pid, t in times.items()}
        return cls(
            hosts=hosts,
            clock=clock,
            seed=seed,
            pages=pages,
            events=_events_frame(ordered),
            _times=ordered,
            _rows={r["page_id"]: r for r in pages.iter_rows(named=True)},
        )

    def page(self, page_id: int) -> dict | None:
        return self._rows.get(page_id)

    def row(self, page_id: int) -> dict:
        """The page's row; the page must exist in the truth."""
        return self._rows[page_id]

    def event_times(self, page_id: int) -> np.ndarray:
        return self._times.get(page_id, _EMPTY)

    def version_at(self, page_id: int, t_s: float) -> int:
        return int(np.searchsorted(self.event_times(page_id), t_s, side="right"))

    def last_change_s(self, page_id: int, t_s: float) -> float:
        """When the content live at ``t_s`` was written (its birth if it never changed)."""
        times = self.event_times(page_id)
        v = int(np.searchsorted(times, t_s, side="right"))
        return float(times[v - 1]) if v > 0 else float(self.row(page_id)["birth_s"])


_EMPTY = np.empty(0, dtype=np.float64)


def unit_hash(*keys: np.ndarray | int) -> np.ndarray:
    """A deterministic uniform number in [0, 1) per combination of integer keys (splitmix64).

    The server and the baselines both decide a flaky host's failures with it, so the baselines
    meet the same failures the product does without sharing any state.
    """
    acc: np.ndarray = np.asarray(np.uint64(0x9E3779B97F4A7C15))
    with np.errstate(over="ignore"):
        for key in keys:
            z = np.asarray(key, dtype=np.int64).astype(np.uint64) + acc
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            acc = z ^ (z >> np.uint64(31))
    return np.asarray((acc >> np.uint64(11)).astype(np.float64) / float(1 << 53))


def request_fails(
    seed: int, page_id: np.ndarray | int, cycle: np.ndarray | int, attempt: int, share: float
) -> np.ndarray:
    """Whether the ``attempt``-th request for a page in a cycle gets a 5xx on a flaky host."""
    return unit_hash(seed, 5, page_id, cycle, attempt) < share


def slug_words(page_id: int, n: int = 3) -> list[str]:
    rng = np.random.default_rng([page_id, 11])
    return [str(w) for w in rng.choice(_WORDS, size=n, replace=False)]


def page_path(host: HostProfile, page_id: int, *, disallowed: bool) -> str:
    """The page's URL path and query as the server answers it (and the seeds list it)."""
    slug = "-".join(slug_words(page_id))
    if disallowed:
        return f"{host.disallow[0].rstrip('/')}/{slug}-{page_id}.html"
    if host.query_urls:
        return f"/{host.section}.php?id={page_id}&cat={page_id % 7 + 1}&lang=en"
    return f"/{host.section}/{slug}-{page_id}.html"


#: the one rule that finds a page id in a URL or a request's path+query; it survives the
#: product's normalization (query parameters sorted or dropped, percent-encoding, default port)
PAGE_ID_REGEX = r"-(\d+)\.html(?:$|[?#])|[?&]id=(\d+)(?:$|[&#])"


def _events(
    pattern: str, rng: np.random.Generator, host: HostProfile, t_from: float, t_to: float
) -> tuple[np.ndarray, float]:
    """Change times in [t_from, t_to) and the pattern's long-run rate per day."""
    span = t_to - t_from
    if pattern == "static" or span <= 0:
        return _EMPTY, 0.0
    if pattern == "poisson":
        rate = 10 ** (rng.uniform(-2.3, 2.2) + host.rate_shift)  # per day
        n = rng.poisson(rate * span / DAY_S)
        return np.sort(rng.uniform(t_from, t_to, size=n)), float(rate)
    if pattern == "daily":
        hour = (host.daily_hour + rng.uniform(-3.0, 3.0)) % 24
        skip = 0.05
        days = np.arange(math.floor(t_from / DAY_S) - 1, math.ceil(t_to / DAY_S) + 1)
        times = days * DAY_S + hour * HOUR_S + rng.normal(0.0, 15 * 60, size=days.size)
        times = times[rng.uniform(size=days.size) >= skip]
        return _within(times, t_from, t_to), 1.0 - skip
    if pattern == "few_hours":
        period_h = float(rng.choice([3.0, 4.0, 6.0, 8.0, 12.0]))
        phase = rng.uniform(0.0, period_h) * HOUR_S
        period = period_h * HOUR_S
        k = np.arange(
            math.floor((t_from - phase) / period) - 1, math.ceil((t_to - phase) / period) + 1
        )
        times = phase + k * period + rng.normal(0.0, 5 * 60, size=k.size)
        return _within(times, t_from, t_to), 24.0 / period_h
    if pattern == "bursty":
        quiet_rate = 10 ** rng.uniform(-2.0, -0.7)  # per day
        burst_rate = 10 ** rng.uniform(0.7, 1.7)
        quiet_mean = rng.uniform(1.5, 6.0) * DAY_S
        burst_mean = rng.uniform(3.0, 16.0) * HOUR_S
        out: list[np.ndarray] = []
        t = t_from
        bursting = rng.uniform() < burst_mean / (burst_mean + quiet_mean)
        while t < t_to:
            length = rng.exponential(burst_mean if bursting else quiet_mean)
            end = min(t + length, t_to)
            rate = burst_rate if bursting else quiet_rate
            n = rng.poisson(rate * (end - t) / DAY_S)
            out.append(rng.uniform(t, end, size=n))
            t, bursting = end, not bursting
        mean_rate = (quiet_rate * quiet_mean + burst_rate * burst_mean) / (quiet_mean + burst_mean)
        return np.sort(np.concatenate(out)) if out else _EMPTY, float(mean_rate)
    raise ValueError(f"unknown change pattern {pattern!r}")


def _within(times: np.ndarray, t_from: float, t_to: float) -> np.ndarray:
    times = np.sort(times)
    return times[(times >= t_from) & (times < t_to)]


def build_truth(
    hosts: tuple[HostProfile, ...],
    *,
    seed: int,
    cycles: int,
    cycle_s: float = 6 * HOUR_S,
    start: datetime = DEFAULT_START,
) -> Truth:
    """Draw the pages, values and change events of the web for ``cycles`` cycles."""
    if cycles < 1:
        raise ValueError("cycles must be at least 1")
    clock = Clock(start=start, cycle_s=cycle_s, cycles=cycles)
    horizon = clock.horizon_s
    rng = np.random.default_rng([seed, 1])
    rows: list[dict] = []
    times: dict[int, np.ndarray] = {}
    for h, host in enumerate(hosts):
        patterns = [p for p in PATTERNS if host.mix.get(p, 0) > 0]
        weights = np.array([host.mix[p] for p in patterns])
        n_new = round(host.new_per_day * horizon / DAY_S)
        n_disallowed = round(host.disallowed_share * host.n_pages)
        for local in range(host.n_pages + n_new):
            page_id = HOST_ID_STRIDE * (h + 1) + local
            initial = local < host.n_pages
            disallowed = initial and local >= host.n_pages - n_disallowed
            prng = np.random.default_rng([seed, 7, page_id])
            if initial:
                birth = -float(prng.uniform(HISTORY_S / 10, MAX_BIRTH_AGE_S))
            else:
                birth = float(prng.uniform(0.0, horizon))
            pattern = str(prng.choice(patterns, p=weights / weights.sum()))
            ev, rate = _events(pattern, prng, host, max(birth, -HISTORY_S), horizon)
            times[page_id] = ev
            rows.append(
                {
                    "page_id": page_id,
                    "host": h,
                    "path": page_path(host, page_id, disallowed=disallowed),
                    "pattern": pattern,
                    "rate_per_day": rate,
                    "birth_s": birth,
                    "appear_s": birth,
                    "gone_s": math.inf,
                    "gone_status": host.gone_status,
                    "disallowed": disallowed,
                    "initial": initial,
                    "listed": host.lists_pages,
                }
            )
        # pages that go: drawn among the host's allowed starting pages
        n_gone = round(host.gone_share * (host.n_pages - n_disallowed))
        if n_gone:
            first = len(rows) - (host.n_pages + n_new)
            chosen = rng.choice(host.n_pages - n_disallowed, size=n_gone, replace=False)
            for local in chosen:
                rows[first + int(local)]["gone_s"] = float(rng.uniform(0.02, 0.95) * horizon)

    pages = pl.DataFrame(rows).with_columns(
        pl.col("page_id").cast(pl.Int64),
        pl.col("host").cast(pl.Int64),
        pl.col("gone_status").cast(pl.Int64),
    )
    # Zipf-like values over the starting pages (a random rank each), mean 1; new pages 1.0
    n_initial = int(pages["initial"].sum())
    ranks = rng.permutation(n_initial) + 1
    zipf = ranks.astype(np.float64) ** -ZIPF_EXPONENT
    zipf *= n_initial / zipf.sum()
    values = np.full(pages.height, NEW_PAGE_VALUE)
    values[pages["initial"].to_numpy()] = zipf
    pages = pages.with_columns(pl.Series("value", values))
    pages = pages.with_columns(
        (~pl.col("disallowed")).alias("scored"),
        pl.Series(
            "sitemap_path",
            [
                _sitemap_path(hosts[h], path)
                for h, path in zip(pages["host"].to_list(), pages["path"].to_list(), strict=True)
            ],
        ),
    )
    return Truth.from_tables(hosts, clock, seed, pages, times)


def _sitemap_path(host: HostProfile, path: str) -> str:
    """What the host's sitemap lists for the page: some hosts add a tracking parameter."""
    if host.sitemap_tracking_param:
        return path + ("&" if "?" in path else "?") + "utm_source=sitemap"
    return path


def _events_frame(times: dict[int, np.ndarray]) -> pl.DataFrame:
    ids = [np.full(t.size, pid, dtype=np.int64) for pid, t in times.items()]
    versions = [np.arange(1, t.size + 1, dtype=np.int64) for t in times.values()]
    return pl.DataFrame(
        {
            "page_id": np.concatenate(ids) if ids else np.empty(0, np.int64),
            "version": np.concatenate(versions) if versions else np.empty(0, np.int64),
            "t_s": np.concatenate(list(times.values())) if times else _EMPTY,
        }
    ).sort("page_id", "version")
