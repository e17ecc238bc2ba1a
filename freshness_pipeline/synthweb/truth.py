"""Ground truth of a served synthetic web: the yardstick, never an input to the crawler.

Freshness is computed exactly from the precomputed change times (no sampling), so two
schedulers run on the same world and seed are compared without Monte-Carlo noise, which is
what makes "freshness / oracle" ratios meaningful to three decimals.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from urllib.parse import unquote, urlsplit

import numpy as np
import polars as pl

from .world import Page, World, to_dt, to_ts

_US = 1_000_000
_NEVER = np.iinfo(np.int64).max // 4  # "dies at infinity", still safe to subtract from
_ALIAS = re.compile(r"/p/(\d+)")


def _us(t: datetime | float) -> int:
    return round(to_ts(t) * _US)


def _normalize_fetches(fetches: pl.DataFrame) -> pl.DataFrame:
    """url as String, fetched_at as UTC microseconds: naive means UTC everywhere here."""
    col = fetches.get_column("fetched_at")
    if isinstance(col.dtype, pl.Datetime) and col.dtype.time_zone is None:
        col = col.dt.replace_time_zone("UTC")
    col = col.cast(pl.Datetime("us", "UTC"))
    return pl.DataFrame({"url": fetches.get_column("url").cast(pl.String), "fetched_at": col})


def _fetch_arrays(fetches: pl.DataFrame) -> tuple[list[str | None], np.ndarray]:
    if fetches.height == 0:
        return [], np.empty(0, dtype=np.int64)
    df = _normalize_fetches(fetches)
    times = df.get_column("fetched_at").dt.epoch("us").to_numpy().astype(np.int64)
    return df.get_column("url").to_list(), times


class Truth:
    """Maps served URLs to the world's pages and scores fetch histories against the truth."""

    def __init__(self, world: World, base_urls: Mapping[str, str]) -> None:
        self.world = world
        self.base_urls = {k: v.rstrip("/") for k, v in base_urls.items()}
        self._site_by_authority = {
            urlsplit(base).netloc.lower(): site for site, base in self.base_urls.items()
        }
        self.pages: list[Page] = [p for p in world.pages if p.site in self.base_urls]
        self._urls = [self.base_urls[p.site] + p.path for p in self.pages]
        self._index = {u: i for i, u in enumerate(self._urls)}
        self._by_site_path = {(p.site, p.path): i for i, p in enumerate(self.pages)}
        self._by_id = {p.page_id: i for i, p in enumerate(self.pages)}
        n = len(self.pages)
        counts = np.array([len(p.change_times) for p in self.pages], dtype=np.int64)
        self._off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=self._off[1:])
        flat = np.concatenate([p.change_times for p in self.pages]) if n else np.empty(0)
        self._changes = np.round(flat * _US).astype(np.int64)  # whole seconds: exact
        self._born = np.array([round(p.born_at * _US) for p in self.pages], dtype=np.int64)
        self._dies = np.array(
            [round(p.dies_at * _US) if np.isfinite(p.dies_at) else _NEVER for p in self.pages],
            dtype=np.int64,
        )
        self._value = np.array([p.value for p in self.pages], dtype=float)
        self._disallowed = np.array([p.disallowed for p in self.pages], dtype=bool)
        self._url_rank = np.argsort(np.argsort(np.array(self._urls, dtype=object)))

    # ------------------------------------------------------------------ lookup
    def _find(self, url: str) -> int | None:
        i = self._index.get(url)
        if i is not None:
            return i
        # Tolerate the spellings a normalizer may or may not have collapsed (case, fragment,
        # query, dot segments, percent-encoding, /p/<id> redirect aliases): the score should
        # judge the schedule, not punish the crawler for keeping a variant as its key.
        try:
            parts = urlsplit(url.strip())
        except ValueError:
            return None
        if parts.scheme.lower() not in ("http", "https"):
            return None
        authority = parts.netloc.lower().rsplit("@", 1)[-1]
        if authority.endswith(":80") and parts.scheme.lower() == "http":
            authority = authority[:-3]
        site = self._site_by_authority.get(authority)
        if site is None:
            return None
        path = posixpath.normpath(unquote(parts.path) or "/")
        m = _ALIAS.fullmatch(path)
        if m:
            j = self._by_id.get(int(m.group(1)))
            return j if j is not None and self.pages[j].site == site else None
        return self._by_site_path.get((site, path))

    def page(self, url: str) -> Page:
        i = self._find(url)
        if i is None:
            raise KeyError(url)
        return self.pages[i]

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self._find(url) is not None

    def url_of(self, page: Page) -> str:
        return self.base_urls[page.site] + page.path

    def urls(self) -> list[str]:
        """Canonical URLs of every page, including not-yet-born, dead and disallowed ones."""
        return list(self._urls)

    def rate(self, url: str) -> float:
        """True changes per day."""
        return self.page(url).rate

    def value(self, url: str) -> float:
        return self.page(url).value

    def url_class(self, url: str) -> str:
        return self.page(url).url_class

    def version_at(self, url: str, t: datetime | float) -> int:
        return self.page(url).version_at(t)

    def is_alive(self, url: str, t: datetime | float) -> bool:
        return self.page(url).is_alive(t)

    def disallowed(self, url: str) -> bool:
        return self.page(url).disallowed

    def change_counts(self, url: str, t0: datetime | float, t1: datetime | float) -> int:
        """True number of changes in (t0, t1]: what an ideal detector would have counted."""
        ct = self.page(url).change_times
        lo, hi = to_ts(t0), to_ts(t1)
        return int(np.searchsorted(ct, hi, side="right") - np.searchsorted(ct, lo, side="right"))

    def frame(self) -> pl.DataFrame:
        """One row per page with its true parameters, for oracles and benchmark reports."""
        return pl.DataFrame(
            {
                "url": self._urls,
                "site": [p.site for p in self.pages],
                "host": [urlsplit(self.base_urls[p.site]).netloc for p in self.pages],
                "path": [p.path for p in self.pages],
                "url_class": [p.url_class for p in self.pages],
                "value": self._value,
                "rate": [p.rate for p in self.pages],
                "born_at": [to_dt(p.born_at) for p in self.pages],
                "dies_at": [
                    to_dt(p.dies_at) if np.isfinite(p.dies_at) else None for p in self.pages
                ],
                "death_status": [p.death_status for p in self.pages],
                "disallowed": self._disallowed,
            },
            schema_overrides={
                "born_at": pl.Datetime("us", "UTC"),
                "dies_at": pl.Datetime("us", "UTC"),
            },
        )

    # ------------------------------------------------------------------ freshness
    def _fetch_index(self, fetches: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        urls, times = _fetch_arrays(fetches)
        cache: dict[str | None, int] = {}  # a fetch without a URL is cached as -1 too
        idx = np.empty(len(urls), dtype=np.int64)
        for k, u in enumerate(urls):
            i = cache.get(u)
            if i is None:
                found = self._find(u) if u is not None else None
                i = cache[u] = -1 if found is None else found
            idx[k] = i
        return idx, times

    def freshness_table(
        self, fetches: pl.DataFrame, start: datetime, end: datetime
    ) -> pl.DataFrame:
        """Per page: seconds alive in [start, end] and seconds our copy matched the live page.

        Only pages alive at some point of the window and not disallowed are scored (a crawler
        must not be blamed for obeying robots.txt). A fetch at f keeps the copy fresh until the
        first change after f; fetches before `start` count; a never-fetched page is stale.
        Unknown URLs and fetches at times the page did not exist are ignored.
        """
        a, b = _us(start), _us(end)
        if b < a:
            raise ValueError("end before start")
        lo = np.maximum(self._born, a)
        hi = np.minimum(self._dies, b)
        alive = np.clip(hi - lo, 0, None)
        eligible = (alive > 0) & ~self._disallowed
        fresh = np.zeros(len(self.pages), dtype=float)

        idx, f = self._fetch_index(fetches)
        keep = idx >= 0
        idx, f = idx[keep], f[keep]
        keep = eligible[idx] & (self._born[idx] <= f) & (f < self._dies[idx]) & (f <= b)
        idx, f = idx[keep], f[keep]
        if idx.size:
            # Version lookup for all fetches at once: place each page's changes and fetches on
            # its own stretch of one integer axis, then a single searchsorted does every page.
            t0 = min(int(self._changes.min()) if self._changes.size else a, a) - 1
            t1 = max(int(self._changes.max()) if self._changes.size else b, b) + 1
            span = t1 - t0 + 1
            if span * (len(self.pages) + 1) >= 2**62:
                raise OverflowError("world too large for the integer layout; shorten the horizon")
            owner = np.repeat(np.arange(len(self.pages), dtype=np.int64), np.diff(self._off))
            change_keys = owner * span + (self._changes - t0)
            fetch_keys = idx * span + (np.clip(f, t0, t1) - t0)
            j = np.searchsorted(change_keys, fetch_keys, side="right")
            has_next = j < self._off[idx + 1]
            padded = np.append(self._changes, _NEVER)  # so j == len(changes) indexes safely
            nxt = np.where(has_next, padded[j], _NEVER)
            # Fetches of the same page version: only the earliest matters (the copy is fresh
            # from then until the next change), so reduce to one interval per version.
            group = j + idx
            order = np.lexsort((f, group))
            group, f, nxt, idx = group[order], f[order], nxt[order], idx[order]
            first = np.ones(group.size, dtype=bool)
            first[1:] = group[1:] != group[:-1]
            g_idx, g_f, g_next = idx[first], f[first], nxt[first]
            gained = np.clip(np.minimum(g_next, hi[g_idx]) - np.maximum(g_f, lo[g_idx]), 0, None)
            fresh = np.bincount(g_idx, weights=gained.astype(float), minlength=len(self.pages))

        sel = np.flatnonzero(eligible)
        alive_s = alive[sel] / _US
        fresh_s = fresh[sel] / _US
        return pl.DataFrame(
            {
                "url": [self._urls[i] for i in sel],
                "site": [self.pages[i].site for i in sel],
                "host": [urlsplit(self.base_urls[self.pages[i].site]).netloc for i in sel],
                "url_class": [self.pages[i].url_class for i in sel],
                "value": self._value[sel],
                "alive_seconds": alive_s,
                "fresh_seconds": fresh_s,
                "freshness": np.divide(
                    fresh_s, alive_s, out=np.zeros_like(fresh_s), where=alive_s > 0
                ),
            }
        )

    def weighted_freshness(self, fetches: pl.DataFrame, start: datetime, end: datetime) -> float:
        """Value-weighted share of alive time our copy was fresh (weight = value x alive time)."""
        table = self.freshness_table(fetches, start, end)
        v = table.get_column("value").to_numpy()
        den = float((v * table.get_column("alive_seconds").to_numpy()).sum())
        if den <= 0:
            return float("nan")
        return float((v * table.get_column("fresh_seconds").to_numpy()).sum()) / den

    # ------------------------------------------------------------------ baselines
    def uniform_fetches(
        self,
        budget_per_cycle: int,
        cycle_times: Sequence[datetime],
        initial_fetches: pl.DataFrame | None = None,
    ) -> pl.DataFrame:
        """The fetches of an idealised round robin: at each cycle, the `budget_per_cycle` least
        recently fetched pages among those alive and allowed then (ties by URL). It knows the
        full inventory, so it is a slightly generous baseline for a crawler that must discover
        pages born later through sitemaps."""
        n = len(self.pages)
        last = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        if initial_fetches is not None and initial_fetches.height:
            idx, f = self._fetch_index(initial_fetches)
            ok = idx >= 0
            np.maximum.at(last, idx[ok], f[ok])
        out_urls: list[str] = []
        out_times: list[datetime] = []
        for ct in cycle_times:
            t = _us(ct)
            cand = np.flatnonzero(~self._disallowed & (self._born <= t) & (t < self._dies))
            if cand.size == 0 or budget_per_cycle <= 0:
                continue
            chosen = cand[np.lexsort((self._url_rank[cand], last[cand]))[:budget_per_cycle]]
            last[chosen] = t
            when = to_dt(t / _US)
            out_urls.extend(self._urls[i] for i in chosen)
            out_times.extend([when] * chosen.size)
        return pl.DataFrame(
            {"url": out_urls, "fetched_at": out_times},
            schema={"url": pl.String, "fetched_at": pl.Datetime("us", "UTC")},
        )

    def uniform_baseline(
        self,
        budget_per_cycle: int,
        cycle_times: Sequence[datetime],
        start: datetime,
        end: datetime,
        initial_fetches: pl.DataFrame | None = None,
    ) -> float:
        """Weighted freshness of round robin under the same budget: the baseline to beat."""
        fetches = self.uniform_fetches(budget_per_cycle, cycle_times, initial_fetches)
        if initial_fetches is not None and initial_fetches.height:
            fetches = pl.concat([_normalize_fetches(initial_fetches), fetches])
        return self.weighted_freshness(fetches, start, end)
