"""Baseline crawlers simulated in memory on the same truth, budget and host capacities.

Each one has perfect change detection (it compares true content versions), learns a new page
at the first cycle after it appears in a sitemap or feed, drops a page once a fetch saw it
gone, and meets the flaky host's failures exactly where the product does (truth.request_fails
decides both). What differs is only which pages each picks per cycle:

* uniform round robin: never-fetched first, then least recently fetched;
* Nutch-style adaptive (AdaptiveFetchSchedule): interval x0.8 after a change, x1.4 after none,
  within bounds, starting at pages / budget cycles; due pages by score (value), unused budget
  on the next most nearly due;
* an oracle that knows each page's true long-run rate, the values and each host's capacity,
  greedy on value x (1/rate) x g(rate x age) with g(r) = 1 - (1 + r) e^-r (the Cho and
  Garcia-Molina Lagrangian index); a page it never fetched is worth value x the fresh time
  left to gain in the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from .hosts import HostProfile
from .score import GONE, NO_COPY
from .truth import DAY_S, Truth, request_fails

#: the fetch window a cycle's requests must fit in, as the product's plan assumes it
FETCH_WINDOW_S = 600.0
#: requests per second a host without a stated limit is assumed to take
DEFAULT_HOST_RATE = 4.0
NUTCH_DECREASE = 0.8
NUTCH_INCREASE = 1.4
NUTCH_MAX_INTERVAL_S = 60 * DAY_S


def host_capacity(host: HostProfile, window_s: float = FETCH_WINDOW_S) -> int:
    """What a host accepts in one cycle's fetch window: the window over its Crawl-delay, over
    the burst-throttled host's minimal gap, else a few requests a second."""
    if host.crawl_delay and not host.robots_missing:
        return int(window_s // host.crawl_delay)
    if host.burst_min_gap_s:
        return int(window_s // host.burst_min_gap_s)
    return int(window_s * DEFAULT_HOST_RATE)


@dataclass
class _State:
    copy: np.ndarray
    last_fetch: np.ndarray  # seconds, -inf when never fetched
    dropped: np.ndarray
    interval: np.ndarray  # Nutch's per-page interval (seconds)
    fetches: np.ndarray


class BaselineWeb:
    """The truth as arrays over the scored pages, shared by every simulated policy."""

    def __init__(self, truth: Truth, budget: int) -> None:
        self.truth = truth
        self.budget = budget
        pages = truth.pages.filter(pl.col("scored")).sort("page_id")
        self.page_id = pages["page_id"].to_numpy()
        self.host = pages["host"].to_numpy()
        self.value = pages["value"].to_numpy()
        self.appear = pages["appear_s"].to_numpy()
        self.gone = pages["gone_s"].to_numpy()
        self.rate = pages["rate_per_day"].to_numpy()
        self.initial = pages["initial"].to_numpy()
        self.listed = pages["listed"].to_numpy()
        self.capacity = np.array([host_capacity(h) for h in truth.hosts], dtype=np.int64)
        self.error_share = np.array([h.error_share for h in truth.hosts])[self.host]
        cycles = truth.clock.cycles
        cycle_s = truth.clock.cycle_s
        # versions[i, k]: page i's live version at cycle k (events up to and including t_k)
        index = {pid: i for i, pid in enumerate(self.page_id.tolist())}
        ev = truth.events.filter(pl.col("page_id").is_in(list(index)))
        rows = np.array([index[p] for p in ev["page_id"].to_list()], dtype=np.int64)
        first = np.ceil(ev["t_s"].to_numpy() / cycle_s).clip(0, None).astype(np.int64)
        keep = first < cycles
        counts = np.zeros((self.page_id.size, cycles), dtype=np.int64)
        np.add.at(counts, (rows[keep], first[keep]), 1)
        # an event at or before t = 0 is counted from cycle 0 on (its first index is clipped)
        self.versions = np.cumsum(counts, axis=1)

    def known(self, k: int, state: _State) -> np.ndarray:
        t = self.truth.clock.cycle_time(k)
        return (self.initial | (self.listed & (self.appear <= t))) & ~state.dropped

    def pick(self, order_keys: tuple[np.ndarray, ...], candidates: np.ndarray) -> np.ndarray:
        """The first pages in ``np.lexsort(order_keys)`` order among ``candidates`` that fit the
        budget and each host's capacity."""
        idx = np.flatnonzero(candidates)
        order = idx[np.lexsort(tuple(key[idx] for key in order_keys))]
        hosts = self.host[order]
        by_host = np.argsort(hosts, kind="stable")
        sorted_hosts = hosts[by_host]
        starts = np.r_[0, np.flatnonzero(np.diff(sorted_hosts)) + 1]
        lengths = np.diff(np.r_[starts, sorted_hosts.size])
        rank_sorted = np.arange(sorted_hosts.size) - np.repeat(starts, lengths)
        rank = np.empty_like(rank_sorted)
        rank[by_host] = rank_sorted
        return order[rank < self.capacity[hosts]][: self.budget]

    def run(
        self, policy: Callable[[BaselineWeb, int, _State], np.ndarray]
    ) -> tuple[pl.DataFrame, _State]:
        """Simulate ``policy`` over every cycle; returns (page_id, cycle, copy) and the end state."""
        n = self.page_id.size
        cycles = self.truth.clock.cycles
        start_interval = (
            max(1.0, int(self.initial.sum()) / max(1, self.budget)) * self.truth.clock.cycle_s
        )
        state = _State(
            copy=np.full(n, NO_COPY, dtype=np.int64),
            last_fetch=np.full(n, -math.inf),
            dropped=np.zeros(n, dtype=bool),
            interval=np.full(n, start_interval),
            fetches=np.zeros(n, dtype=np.int64),
        )
        history = np.empty((n, cycles), dtype=np.int64)
        for k in range(cycles):
            chosen = policy(self, k, state)
            self._fetch(k, chosen, state)
            history[:, k] = state.copy
        copies = pl.DataFrame(
            {
                "page_id": np.repeat(self.page_id, cycles),
                "cycle": np.tile(np.arange(cycles, dtype=np.int64), n),
                "copy": history.reshape(-1),
            }
        )
        return copies, state

    def _fetch(self, k: int, chosen: np.ndarray, state: _State) -> None:
        t = self.truth.clock.cycle_time(k)
        state.fetches[chosen] += 1
        failed = request_fails(
            self.truth.seed, self.page_id[chosen], k, 0, self.error_share[chosen]
        )
        ok = chosen[~failed]
        went = ok[self.gone[ok] <= t]
        state.copy[went] = GONE
        state.dropped[went] = True
        live = ok[self.gone[ok] > t]
        version = self.versions[live, k]
        had = state.copy[live]
        changed = (had >= 0) & (version != had)
        unchanged = (had >= 0) & (version == had)
        state.interval[live[changed]] *= NUTCH_DECREASE
        state.interval[live[unchanged]] *= NUTCH_INCREASE
        np.clip(state.interval, self.truth.clock.cycle_s, NUTCH_MAX_INTERVAL_S, out=state.interval)
        state.copy[live] = version
        state.last_fetch[live] = t


def uniform_round_robin(web: BaselineWeb, k: int, state: _State) -> np.ndarray:
    return web.pick((web.page_id, state.last_fetch), web.known(k, state))


def nutch_adaptive(web: BaselineWeb, k: int, state: _State) -> np.ndarray:
    t = web.truth.clock.cycle_time(k)
    next_due = state.last_fetch + state.interval  # -inf for never fetched: due
    due = next_due <= t
    # due pages first, by score (value); then the most nearly due
    secondary = np.where(due, -web.value, next_due)
    return web.pick((web.page_id, secondary, ~due), web.known(k, state))


def lagrangian_index(
    value: np.ndarray, rate_per_day: np.ndarray, age_days: np.ndarray, remaining_days: float
) -> np.ndarray:
    """value x (1/rate) x g(rate x age), g(r) = 1 - (1 + r) e^-r, for a page with a copy; a page
    never fetched gains value x the fresh time it can expect in what is left of the run,
    (1 - e^(-rate x remaining)) / rate (a static one: the whole remainder), so that the cold
    start goes by value rather than to every static page first."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        x = rate_per_day * age_days
        g = np.where(x < 1e-4, x * x / 2, -np.expm1(-x) - x * np.exp(-x))
        safe_rate = np.where(rate_per_day > 0, rate_per_day, 1.0)
        with_copy = np.where(rate_per_day > 0, g / safe_rate, 0.0)
        first = np.where(
            rate_per_day > 0, -np.expm1(-rate_per_day * remaining_days) / safe_rate, remaining_days
        )
    return value * np.where(np.isinf(age_days), first, with_copy)


def oracle(web: BaselineWeb, k: int, state: _State) -> np.ndarray:
    clock = web.truth.clock
    t = clock.cycle_time(k)
    age_days = (t - state.last_fetch) / DAY_S
    index = lagrangian_index(web.value, web.rate, age_days, (clock.horizon_s - t) / DAY_S)
    return web.pick((web.page_id, -index), web.known(k, state))


POLICIES: dict[str, Callable[[BaselineWeb, int, _State], np.ndarray]] = {
    "uniform round robin": uniform_round_robin,
    "Nutch-style adaptive": nutch_adaptive,
    "oracle (true rates and host capacities)": oracle,
}
