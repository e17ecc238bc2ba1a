"""url_inventory: every URL we know of per host, and where we learned it.

Sources: the seeds, sitemaps and feeds (from robots.txt ``Sitemap:`` lines, else /sitemap.xml,
asked for about once a day while it is not there) with their ``lastmod``, and the redirect
targets and canonical links (on the page's own host) seen by the previous cycle's fetches.
robots.txt is refreshed here too (cached about 24 h) because the next stage filters by it; a
host that a Retry-After still holds (science.retry_after) is asked for neither until the hold
ends. What the sitemaps gave and what was wrong with them is summed in the run's metadata and
logged once per host and kind of problem, so a host whose sitemap breaks is seen instead of
silently losing URLs.
"""

import contextlib
import logging
import os
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import polars as pl

from freshness_pipeline.science.normalize import as_discovered_column, normalize_url_column
from freshness_pipeline.science.retry_after import retry_holds
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive import ArchiveWriter, archive_dir_for, recover_archive
from freshness_pipeline.warehouse.seeds import merge_seeds
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client import FetchSettings
from freshness_pipeline.web.discovery import (
    COUNT_KEYS,
    DiscoveryTarget,
    HostDiscovery,
    discover_hosts,
)
from freshness_pipeline.web.netguard import IPNetwork
from freshness_pipeline.web.sitemaps.entries import PROBLEM_LABELS, ProblemKind, SitemapProblem


class HttpAccess(Protocol):
    """What discovery needs of the HTTP client's configuration: the Dagster resource has it,
    and so can anything a benchmark or another orchestrator passes."""

    @property
    def archive(self) -> bool: ...

    def settings(self) -> FetchSettings: ...

    def allow_list(self) -> tuple[IPNetwork, ...]: ...


_KEY = ["url", "source"]


def host_base_urls(known: pl.DataFrame, hosts: list[str]) -> dict[str, str]:
    """The origin to ask for robots.txt: the scheme most of a host's URLs use (https if none)."""
    schemes = (
        known.select("host", pl.col("url").str.extract(r"^(https?)://", 1).alias("scheme"))
        .drop_nulls()
        .group_by("host", "scheme")
        .len()
        .sort(["host", "len", "scheme"], descending=[False, True, True])
        .unique(subset="host", keep="first")
    )
    by_host = dict(schemes.select("host", "scheme").iter_rows())
    return {h: f"{by_host.get(h, 'https')}://{h}" for h in hosts}


#: A lastmod further ahead of the cycle's time than this is a placeholder (2099-12-31) or a
#: broken clock: it says nothing of when the page changed, and as the newest lastmod it would
#: outlive every correction the sitemap made (found by an exploratory run).
LASTMOD_AHEAD = timedelta(days=1)


def merge_inventory(previous: pl.DataFrame, found: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """Union by (url, source): the first sighting and the newest lastmod (none in the future:
    :data:`LASTMOD_AHEAD`), value and class win. The newest rather than the latest, so that a
    URL two sitemaps list with different dates, read in different cycles, keeps one date.

    A URL is seen no later than the cycle that sees it: a seed's first sighting is when it was
    added, which is the wall clock unless ``freshness seed --now`` said otherwise, and a crawl
    run on its own clock (backfills, simulations: cycles dated before the seeding) had seeds
    first seen after their first fetch, which the rules that compare when pages appeared
    (science.redirects) then misread."""
    at = pl.lit(now).cast(tables.UTC_TIME)
    found = tables.conform("url_inventory", found).with_columns(
        pl.min_horizontal(pl.coalesce("first_seen_at", at), at).alias("first_seen_at"),
        pl.lit(now).cast(tables.UTC_TIME).alias("last_seen_at"),
    )
    both = pl.concat([tables.conform("url_inventory", previous), found], how="vertical_relaxed")
    return (
        both.group_by(_KEY, maintain_order=True)
        .agg(
            pl.col("host").last(),
            pl.col("value").drop_nulls().last(),
            pl.col("url_class").drop_nulls().last(),
            pl.col("lastmod").filter(pl.col("lastmod") <= now + LASTMOD_AHEAD).max(),
            pl.col("first_seen_at").min(),
            pl.col("last_seen_at").max(),
            pl.col("listed_in").drop_nulls().last(),
        )
        .select(list(tables.URL_INVENTORY))
        .sort(["host", "url", "source"])
    )


#: what the inventory reads of last cycle's fetch_results: where answers pointed
#: (:func:`pointers`) and the Retry-After answers' columns (science.retry_after.retry_holds)
RESULT_COLUMNS = (
    "url",
    "host",
    "outcome",
    "location",
    "canonical",
    "feeds",
    "fetched_at",
    "http_status",
    "retry_after_s",
)
#: what a URL found by a pointer takes from the url_state row of the URL that pointed to it
STATE_COLUMNS = ("url", "value", "url_class")


def announced_by_host(results: pl.DataFrame) -> dict[str, tuple[str, ...]]:
    """The feeds each host's pages announced at their last fetch (or that were feeds), most
    announced first."""
    if "feeds" not in results.columns:  # a results frame from before the column
        return {}
    counted = (
        results.select("host", pl.col("feeds").explode().alias("feed"))
        .drop_nulls()
        .group_by("host", "feed")
        .len()
        .sort(["host", "len", "feed"], descending=[False, True, False])
    )
    by_host: dict[str, list[str]] = {}
    for host, feed, _ in counted.iter_rows():
        by_host.setdefault(host, []).append(feed)
    return {host: tuple(feeds) for host, feeds in by_host.items()}


def pointers(results: pl.DataFrame) -> pl.DataFrame:
    """Last cycle's answers that point from a URL to another (``url``, ``target`` as given,
    ``source``): a redirect's Location, and a page's canonical link. A canonical is a hint
    about the page's own host: one naming another host is not followed (a syndicated copy
    would otherwise bring the original's whole site into the crawl)."""
    moved = results.filter(
        (pl.col("outcome") == "redirect") & pl.col("location").is_not_null()
    ).select("url", "host", pl.col("location").alias("target"), pl.lit("redirect").alias("source"))
    if "canonical" not in results.columns:  # a results frame from before the column
        return moved
    named = results.filter(pl.col("canonical").is_not_null()).select(
        "url", "host", pl.col("canonical").alias("target"), pl.lit("canonical").alias("source")
    )
    return pl.concat([moved, named]) if named.height else moved


def pointed_discoveries(results: pl.DataFrame, state: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """URLs found by last cycle's :func:`pointers`, keyed to the host they are on; each
    inherits the value and class of the URL that pointed to it (``state``: url_state's
    ``STATE_COLUMNS`` at least). A pointer to the URL itself (a canonical that differs only
    in how it is written) finds nothing. Canonical links are stored normalized
    (stages.fetch.normalized_canonicals), so only redirect targets are normalized here, one
    Python call each; a normalized URL's authority is its host key. ``written``: the target as
    the site wrote it (a redirect's Location), the spelling robots.txt is read against."""
    found = pointers(results)
    if found.is_empty():
        return tables.empty("url_inventory").with_columns(written=pl.lit(None, pl.String))
    moved = found.filter(pl.col("source") == "redirect")
    norm = normalize_url_column(moved["target"])
    named = found.filter(pl.col("source") == "canonical").with_columns(
        target_host=pl.col("target").str.extract(r"^[a-z][a-z0-9+.-]*://([^/?#]+)")
    )
    return (
        pl.concat(
            [
                moved.with_columns(written="target").with_columns(
                    target=norm["url"], target_host=norm["host"]
                ),
                named.with_columns(written="target"),
            ],
            how="diagonal_relaxed",
        )
        .filter(
            pl.col("target").is_not_null()
            & (pl.col("target") != pl.col("url"))
            & ((pl.col("source") != "canonical") | (pl.col("target_host") == pl.col("host")))
        )
        .join(state.select("url", "value", "url_class"), on="url", how="left")
        .select(
            pl.col("target").alias("url"),
            pl.col("target_host").alias("host"),
            "source",
            "value",
            "url_class",
            pl.lit(now).cast(tables.UTC_TIME).alias("first_seen_at"),
            "written",
        )
        .unique(subset=["url", "source"], keep="first", maintain_order=True)
    )


def hand_over_to_other_hosts(wh: Warehouse, found: pl.DataFrame, now: datetime) -> int:
    """URLs found here that belong to hosts outside this run become seeds of their own host,
    where the next cycle (and the new-hosts sensor) picks them up."""
    handed = 0
    for (host,), rows in found.partition_by("host", as_dict=True).items():
        known = wh.read("seeds", [host])
        fresh = rows.join(known.select("url"), on="url", how="anti")  # a user's seed row wins
        if fresh.height:
            wh.write_partition(
                "seeds", host, merge_seeds(known, fresh, added_at=now, source="redirect")
            )
            handed += fresh.height
    return handed


def seeds_as_written(previous: pl.DataFrame, seeds: pl.DataFrame) -> pl.DataFrame:
    """Last cycle's inventory with each seed's row under the spelling the seed now has: rows of
    releases that entered seeds by their key, or a seed given again spelled otherwise, would
    stay beside the new spelling and, being the key written, keep the key the one asked for.
    The row's first sighting goes with it."""
    spelled = tables.conform("seeds", seeds).select(
        "url", pl.col("source").fill_null("seed"), pl.coalesce("written", "url").alias("_as")
    )
    return (
        previous.join(spelled, on=["url", "source"], how="left", maintain_order="left")
        .with_columns(pl.coalesce("_as", "url").alias("url"))
        .drop("_as")
    )


def seed_rows(seeds: pl.DataFrame) -> pl.DataFrame:
    """The seeds as url_inventory rows, first seen when they were added, each spelled as it was
    given (candidates key it, and ask for it as written). Public because
    benchmarks/orchestration.py replays url_inventory's body without Dagster."""
    return tables.conform("seeds", seeds).select(
        pl.coalesce("written", "url").alias("url"),
        "host",
        pl.col("source").fill_null("seed"),
        "value",
        "url_class",
        pl.col("added_at").alias("first_seen_at"),
    )


#: per-host discovery lines logged per cycle and severity; each is an event in the Dagster
#: instance, so ten thousand hosts without a sitemap would write ten thousand events (about
#: 10 ms each in sqlite) to say one thing. Past it, one line counts the rest by kind.
MAX_HOST_LINES = 20


def log_discovery(log: logging.Logger, found: list[HostDiscovery]) -> None:
    """One warning per host and kind of problem (the first one named, with how many more),
    however many entries or files it hit; notes are info lines. At most MAX_HOST_LINES of
    each, then a count of the rest by kind (the robots and inventory tables keep them all)."""
    warnings: list[tuple[str, str]] = []  # (kind, line)
    notes: list[tuple[str, str]] = []
    for f in found:
        if f.robots_error:
            warnings.append(("robots.txt", f"{f.host}: robots.txt: {f.robots_error}"))
        by_kind: dict[ProblemKind, list[SitemapProblem]] = {}
        for problem in f.problems:
            by_kind.setdefault(problem.kind, []).append(problem)
        for kind, problems in by_kind.items():
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            label = PROBLEM_LABELS[kind]
            warnings.append((label, f"{f.host}: {label}: {problems[0]}{more}"))
        for note in f.notes:
            notes.append((note.split(" and ")[0], f"{f.host}: {note}"))
    for lines, emit in ((warnings, log.warning), (notes, log.info)):
        for _, line in lines[:MAX_HOST_LINES]:
            emit(line)
        rest = lines[MAX_HOST_LINES:]
        if rest:
            counts: dict[str, int] = {}
            for label, _ in rest:
                counts[label] = counts.get(label, 0) + 1
            summary = "; ".join(f"{label}: {n:,}" for label, n in sorted(counts.items()))
            emit(f"... and {len(rest):,} more host lines like these ({summary})")


def refresh_robots_and_sitemaps(
    wh: Warehouse,
    hosts: list[str],
    known: pl.DataFrame,
    now: datetime,
    http: HttpAccess,
    log: logging.Logger | None = None,
    answers: pl.DataFrame | None = None,
    previous: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, dict[str, int]]:
    """Fetch robots.txt where the cache is stale and every host's sitemaps; write the robots
    table and return the sitemap entries as inventory rows, with the run's discovery counts
    (web.discovery.COUNT_KEYS summed over its hosts).

    Retry-After holds: the last cycle's answers (fetch_results, still on disk) and the holds
    the robots rows carry give each host's ``retry_until`` (``answers``: those fetch_results
    rows when the caller has them already, else they are read). A held host keeps its cached robots
    row, stale or not, with the hold in it: none of its pages is planned until the hold ends,
    and the first cycle after it refreshes the row before planning.

    A sitemap or feed file that answered 304 lists again what it listed at its last complete
    read: ``previous`` (last cycle's inventory rows) gives those rows, by ``listed_in``."""
    cached = wh.read("robots", hosts)
    cached_by_host = {row["host"]: row for row in cached.iter_rows(named=True)}
    if answers is None:
        answers = wh.read("fetch_results", hosts, columns=RESULT_COLUMNS)
    holds = retry_holds(answers, now, carried=cached)
    held = dict(holds.iter_rows())
    bases = host_base_urls(known, hosts)
    pace = dict(wh.read("host_capacity", hosts, columns=["host", "gap_s"]).iter_rows())
    announced = announced_by_host(answers)
    listing = listing_files(previous)
    targets = [
        DiscoveryTarget(
            host=h,
            base_url=bases[h],
            cached=cached_by_host.get(h),
            min_gap_s=pace.get(h),
            feeds=announced.get(h, ()),
            listing_files=None if listing is None else listing.get(h, frozenset()),
        )
        for h in hosts
        if h not in held
    ]
    # robots.txt and sitemap answers are archived beside the pages, in a file of their own
    # that is complete before the robots table is written
    with discovery_archive(wh, now, http.archive) as writer:
        found = discover_hosts(
            targets, now=now, settings=http.settings(), allow=http.allow_list(), archive=writer
        )
    kept = [{**cached_by_host.get(h, {"host": h}), "retry_until": t} for h, t in held.items()]
    robots_rows = [f.robots_row for f in found] + kept
    wh.write_partitions(
        "robots", hosts, pl.DataFrame(robots_rows, schema=tables.empty("robots").schema)
    )
    entries = [
        {
            "url": e.loc,
            "lastmod": e.lastmod,
            "source": "feed" if e.from_feed else "sitemap",
            "listed_by": f.host,
            "listed_in": e.source_url,
        }
        for f in found
        for e in f.entries
    ]
    again = listed_again(previous, found)
    counts: Counter[str] = Counter(dict.fromkeys(COUNT_KEYS, 0))
    for f in found:
        counts.update(f.counts)
    if log is not None:
        log_discovery(log, found)
        for host, until in held.items():
            log.info(f"{host}: Retry-After holds it until {until.isoformat()}; not fetched")
    if not entries:
        return again, dict(counts)
    frame = pl.DataFrame(
        entries,
        schema={
            "url": pl.String,
            "lastmod": tables.UTC_TIME,
            "source": pl.String,
            "listed_by": pl.String,
            "listed_in": pl.String,
        },
    )
    # As the site wrote them less their session and tracking parameters: a sitemap that
    # writes a new ;jsessionid= into every URL at every read added a row per URL per cycle,
    # each counted as a new URL (found by an exploratory run)
    frame = frame.with_columns(url=as_discovered_column(frame["url"]))
    norm = normalize_url_column(frame["url"])
    # A host's sitemaps speak for that host alone (the sitemaps protocol: a sitemap found
    # through a host's robots.txt, wherever it is stored, lists that host's URLs): an entry
    # for another host is dropped, or any site could plant URLs in a host it does not own.
    frame = frame.with_columns(host=norm["host"])
    own = frame.filter(pl.col("host") == pl.col("listed_by"))
    counts["sitemap_entries_of_other_hosts"] = frame.height - own.height
    listed = tables.conform("url_inventory", own.drop("listed_by"))
    return pl.concat([listed, again]) if again.height else listed, dict(counts)


def listing_files(previous: pl.DataFrame | None) -> dict[str, frozenset[str]] | None:
    """Per host, the sitemap and feed files that listed the URLs of ``previous`` (the
    inventory): a 304 from one of them gives its URLs back from there, from another it could
    not (an inventory restored from before the read), so that one is asked for whole. None:
    no inventory given, every file may answer 304."""
    if previous is None or "listed_in" not in previous.columns:
        return None
    pairs = previous.select("host", "listed_in").drop_nulls().unique()
    files: dict[str, set[str]] = {}
    for host, url in pairs.iter_rows():
        files.setdefault(host, set()).add(url)
    return {host: frozenset(urls) for host, urls in files.items()}


def listed_again(previous: pl.DataFrame | None, found: list[HostDiscovery]) -> pl.DataFrame:
    """The inventory rows (``previous``) of the sitemap and feed files that answered 304 this
    cycle, as sightings of now: the file lists them still, dated as at its last read."""
    unchanged = [(f.host, url) for f in found for url in f.unchanged]
    if previous is None or not unchanged or previous.height == 0:
        return tables.empty("url_inventory")
    files = pl.DataFrame(
        unchanged, schema={"host": pl.String, "listed_in": pl.String}, orient="row"
    )
    rows = tables.conform("url_inventory", previous).filter(
        pl.col("source").is_in(["sitemap", "feed"])
    )
    return rows.join(files, on=["host", "listed_in"], how="semi").with_columns(
        first_seen_at=pl.lit(None, dtype=tables.UTC_TIME),
        last_seen_at=pl.lit(None, dtype=tables.UTC_TIME),
    )


def discovery_archive(
    wh: Warehouse, now: datetime, enabled: bool
) -> contextlib.AbstractContextManager[ArchiveWriter | None]:
    """The inventory's archive writer for this cycle (None when archiving is off)."""
    if not enabled:
        return contextlib.nullcontext()
    recover_archive(archive_dir_for(wh.home))  # what a killed run left, before this one writes
    return ArchiveWriter(archive_dir_for(wh.home), now, writer=f"discovery{os.getpid()}")


@dataclass(frozen=True)
class CycleInventory:
    """A cycle's inventory, with what the asset reports of where it came from."""

    frame: pl.DataFrame
    #: redirect targets on hosts outside the run, added to those hosts' seeds
    handed_over: int
    #: robots.txt, sitemap and feed counts (web.discovery.COUNT_KEYS), summed over the hosts
    discovery: dict[str, int]


def cycle_inventory(
    wh: Warehouse,
    hosts: list[str],
    now: datetime,
    *,
    http: HttpAccess | None,
    log: logging.Logger | None = None,
) -> CycleInventory:
    """The inventory of ``hosts`` as of ``now``: last cycle's, the seeds, last cycle's
    redirects (those to other hosts handed over to their seeds), and, given ``http``, what the
    hosts' robots.txt, sitemaps and feeds list now (``http=None``: a dry run, which fetches
    nothing). The url_inventory asset is this before Dagster writes it; benchmarks call it to
    build the inventory as the product does without Dagster."""
    previous = wh.read("url_inventory", hosts)
    seeds = wh.read("seeds", hosts)
    # Read once for the pointers and the Retry-After holds; url_state only when something
    # pointed elsewhere, and only what a URL found that way inherits.
    results = wh.read("fetch_results", hosts, columns=RESULT_COLUMNS)
    state = (
        wh.read("url_state", hosts, columns=STATE_COLUMNS)
        if pointers(results).height
        else tables.empty("url_state").select(STATE_COLUMNS)
    )
    pointed = pointed_discoveries(results, state, now)
    handed_over = hand_over_to_other_hosts(wh, pointed.filter(~pl.col("host").is_in(hosts)), now)
    # this run's own targets enter the inventory as the site wrote them (candidates key them),
    # so robots.txt is read against that spelling too (stages.candidates.apply_robots)
    own = pointed.filter(pl.col("host").is_in(hosts)).with_columns(url="written")
    found = [seed_rows(seeds), own.drop("written")]
    previous = seeds_as_written(previous, seeds)
    discovery = dict.fromkeys(COUNT_KEYS, 0)
    if http is not None:
        known = pl.concat([previous.select("url", "host"), seeds.select("url", "host")])
        listed, discovery = refresh_robots_and_sitemaps(
            wh, hosts, known, now, http, log, answers=results, previous=previous
        )
        found.append(listed)
    found_rows = pl.concat(
        [tables.conform("url_inventory", f) for f in found], how="vertical_relaxed"
    )
    return CycleInventory(merge_inventory(previous, found_rows, now), handed_over, discovery)
