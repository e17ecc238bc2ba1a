"""url_candidates: the inventory normalized, deduplicated and checked against robots.txt.

URL variants (tracking parameters, fragments, case, default ports, query order) collapse to one
canonical row. URLs robots.txt forbids stay in the table, marked not allowed, so that url_state
can say 'blocked' instead of silently forgetting them.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version

import polars as pl

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.science.normalize import (
    RULES_VERSION,
    as_discovered,
    normalize_url_column,
    request_spelling,
    url_path,
)
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.discovery import RECORD_COLUMNS, record_from_row
from freshness_pipeline.web.netguard import ALLOW_ENV, IPNetwork, literal_refusal, refusal_lifted
from freshness_pipeline.web.robots import (
    ALLOW_LIST_REASON,
    RobotsPolicy,
    refusal_reason,
    refused_by_allow_list,
    robots_policy,
)


def normalize_inventory(urls: pl.Series, config: PipelineConfig) -> pl.DataFrame:
    """Canonical URLs, with the extra parameters some hosts are configured to strip (session
    ids, sort orders) removed on those hosts only."""
    norm = normalize_url_column(urls)
    for host in config.host_strip_params:
        rows = norm.with_row_index("_i").filter(pl.col("host") == host)["_i"]
        if rows.len():
            special = normalize_url_column(
                urls.gather(rows), strip_params=config.strip_params_for(host)
            )
            norm = norm.with_columns(norm["url"].scatter(rows, special["url"]))
    return norm


def normalization_rules(config: PipelineConfig) -> tuple[str, dict[str, str]]:
    """What a cached canonical form depends on: the rules' version (with w3lib's, which does
    the percent-encoding) for every host, plus the extra parameters stripped on configured
    hosts. A cached row whose rules differ from these is normalized again."""
    base = f"{RULES_VERSION}/w3lib-{version('w3lib')}/idna-{version('idna')}"
    per_host = {
        host: f"{base}/strip:{','.join(sorted(config.strip_params_for(host)))}"
        for host in config.host_strip_params
    }
    return base, per_host


@dataclass
class CachedNormalization:
    """The inventory's URLs normalized (``url``, ``host``, ``error`` in inventory order), the
    cache to keep (one row per raw URL of the inventory), the hosts whose cache changed, and
    how many URLs had to be normalized afresh."""

    norm: pl.DataFrame
    cache: pl.DataFrame
    changed_hosts: list[str]
    normalized: int


def normalize_with_cache(
    inventory: pl.DataFrame, cache: pl.DataFrame, config: PipelineConfig
) -> CachedNormalization:
    """:func:`normalize_inventory` for the inventory's ``url`` column (partitions in ``host``),
    reusing last cycle's answers where the rules are the same (``cache``: the url_canonical
    rows of the inventory's hosts, in the table's schema).

    Normalization is the stage's one loop per URL (w3lib, around 100 us a URL with a query
    string), and an inventory mostly holds the same URLs cycle after cycle: at a million URLs
    it was most of a cycle's CPU. The cache (table url_canonical) keeps each raw URL's
    canonical form, host and error with the rules it was made under.
    """
    base, per_host = normalization_rules(config)
    rules_of = (
        pl.col("canonical_host")
        .replace_strict(per_host, default=base, return_dtype=pl.String)
        .fill_null(base)
        if per_host
        else pl.lit(base)
    )
    raw = inventory.select("host", "url").filter(pl.col("url").is_not_null()).unique()
    valid = cache.filter(pl.col("rules") == rules_of)
    hits = raw.join(valid, on=["host", "url"], how="inner")
    misses = raw.join(valid, on=["host", "url"], how="anti")
    fresh = normalize_inventory(misses["url"], config)
    made = misses.with_columns(
        canonical=fresh["url"], canonical_host=fresh["host"], error=fresh["error"]
    ).with_columns(rules=rules_of)
    kept = tables.conform("url_canonical", pl.concat([hits, made], how="diagonal_relaxed"))
    before = cache.group_by("host").len()
    after = hits.group_by("host").len()
    shrunk = before.join(after, on="host", how="left", suffix="_kept").filter(
        pl.col("len_kept").fill_null(0) < pl.col("len")
    )
    changed = sorted(set(made["host"].to_list()) | set(shrunk["host"].to_list()))
    norm = (
        inventory.select("host", "url")
        .join(kept, on=["host", "url"], how="left", maintain_order="left")
        .select(
            pl.col("canonical").alias("url"),
            pl.col("canonical_host").alias("host"),
            pl.when(pl.col("canonical").is_null())
            .then(pl.col("error").fill_null("empty URL"))
            .alias("error"),
        )
    )
    return CachedNormalization(norm, kept, changed, misses.height)


#: which source's value and URL class a candidate takes, first to last
SOURCE_RANK = {"seed": 0, "sitemap": 1, "feed": 2, "canonical": 3, "redirect": 4}

#: the quantile of a host's seed values at which each counts in its typical value
#: (:func:`typical_seed_value`)
TYPICAL_VALUE_QUANTILE = 0.99


def typical_seed_value(seeded: pl.Expr, host: str = "host") -> pl.Expr:
    """What a page of the host is worth when nothing says: the mean of the values of the
    user's seeds on that host (``seeded``: each seed's value as its candidate has it, 1.0 for
    one loaded without; null on rows that are no seed), each counted at most at the host's
    :data:`TYPICAL_VALUE_QUANTILE`; null on a host without seeds.

    A page a sitemap or feed brings has no value of its own, and 1.0 is a number on no scale
    in particular: against seeds valued 3 on a news site and 0.5 on an archive, every page
    found on the news site ranked below the seeds it sat among, and every page found in the
    archive above them (found by an outside held-out web whose seeds were some of each host's
    pages: its most valued host was fetched far less than an oracle fetched it, its least
    valued far more). The mean is what a page drawn from the host is worth on average; the cap
    keeps one page valued a thousand times its neighbours (a home page) from making every page
    found beside it worth a hundred of them."""
    cap = seeded.quantile(TYPICAL_VALUE_QUANTILE, interpolation="lower").over(host)
    return seeded.clip(upper_bound=cap).mean().over(host)


def canonical_candidates(
    inventory: pl.DataFrame,
    hosts: list[str],
    now: datetime,
    config: PipelineConfig | None = None,
    norm: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, int]:
    """Collapse the inventory to one row per canonical URL; returns (rows, invalid count).
    ``norm``: the inventory's URLs already normalized (:func:`normalize_with_cache`)."""
    config = config or PipelineConfig()
    if norm is None:
        norm = normalize_inventory(inventory["url"], config)
    rows = inventory.drop("host").with_columns(
        canonical=norm["url"], canonical_host=norm["host"], error=norm["error"]
    )
    invalid = rows.filter(pl.col("error").is_not_null()).height
    rows = rows.filter(pl.col("error").is_null() & pl.col("canonical_host").is_in(hosts))
    # Only a lastmod from a sitemap or feed read in this cycle counts: an older listing says
    # nothing about changes since it was read, and a URL dropped from the sitemap may be gone
    # while its old lastmod would claim "unchanged" forever. Only a sitemap's listing dates
    # the page as listed: a feed keeps its recent items, and an item that left it is still there.
    listed_now = pl.col("source").is_in(["sitemap", "feed"]) & (
        pl.col("last_seen_at") == pl.lit(now).cast(tables.UTC_TIME)
    )
    in_sitemap = pl.col("source") == "sitemap"
    rows = rows.with_columns(
        lastmod=pl.when(listed_now).then("lastmod"),
        listed_until=pl.when(in_sitemap).then("last_seen_at"),
        listed_in=pl.when(in_sitemap).then(
            pl.col("listed_in") if "listed_in" in rows.columns else pl.lit(None, pl.String)
        ),
    )
    # The user's own seed row speaks for a URL first: a value and class a URL inherited from
    # the page that redirected or pointed to it gave way to none of theirs before, and which
    # class won went by the sources' alphabetical order. Between the two come the class the
    # configured patterns give the URL and that class's value (PipelineConfig.url_class_expr,
    # class_value_expr): a pattern says what the URL is, an inheritance only guesses (a
    # discontinued product redirected to its category does not make the category a product).
    rank = pl.col("source").replace_strict(
        SOURCE_RANK, default=len(SOURCE_RANK), return_dtype=pl.Int8
    )
    seeded = pl.col("source") == "seed"
    seed_row = pl.col("sources").str.contains("seed", literal=True)
    grouped = (
        rows.sort(rank, maintain_order=True)
        .group_by("canonical")
        .agg(
            pl.col("canonical_host").first().alias("host"),
            pl.col("value").filter(seeded).drop_nulls().last().alias(_SEEDED_VALUE),
            pl.col("value").max(),
            pl.col("url_class").filter(seeded).drop_nulls().first().alias(_SEEDED_CLASS),
            pl.col("url_class").drop_nulls().first(),
            pl.col("source").unique().sort().str.join(",").alias("sources"),
            pl.col("url").n_unique().cast(pl.Int64).alias("n_variants"),
            # the spellings it was found under, for robots.txt (apply_robots); not kept
            pl.col("url").unique().alias(VARIANTS),
            pl.col("lastmod").max(),
            pl.col("first_seen_at").min(),
            pl.col("listed_until").max(),
            # the file of the newest listing, whose next complete read without it is news
            pl.col("listed_in")
            .filter(pl.col("listed_until") == pl.col("listed_until").max())
            .drop_nulls()
            .first(),
            (pl.col("url") == pl.col("canonical")).any().alias(_KEY_WRITTEN),
            pl.col("url").first().alias(_SPELLING),  # rows are in SOURCE_RANK order
        )
        .rename({"canonical": "url"})
        .with_columns(url_class=config.url_class_expr(_SEEDED_CLASS, "url_class"))
        # a seed loaded without a value has 1.0; a page the crawl found with none, its host's
        # seeds' typical value
        .with_columns(
            value=pl.coalesce(
                _SEEDED_VALUE, config.class_value_expr(), "value", pl.when(seed_row).then(1.0)
            )
        )
        .with_columns(
            value=pl.coalesce(
                "value", typical_seed_value(pl.when(seed_row).then("value")), pl.lit(1.0)
            )
        )
        .drop(_SEEDED_VALUE, _SEEDED_CLASS)
    )
    return with_request_spellings(grouped, config), invalid


#: canonical_candidates' temporary columns: whether the site (or a seed) ever wrote the key
#: itself, and the spelling a request takes when not; a seed row's own value and class
_KEY_WRITTEN = "_key_written"
_SPELLING = "_spelling"
_SEEDED_VALUE = "_seeded_value"
_SEEDED_CLASS = "_seeded_class"


def with_request_spellings(grouped: pl.DataFrame, config: PipelineConfig) -> pl.DataFrame:
    """``request_url``: what a fetch asks the server for, where it is not the key. A key that
    appears as written somewhere is sent as it is; otherwise the first source's spelling (a
    seed's before a sitemap's, as SOURCE_RANK orders them) less tracking and session
    parameters (science.normalize.request_spelling). Only those rows go through the per-URL
    call: most keys are spelled as their sites write them."""
    unwritten = grouped.filter(~pl.col(_KEY_WRITTEN))
    spelled = pl.DataFrame(
        {
            "url": unwritten["url"],
            "request_url": [
                request_spelling(written, key, strip_params=config.strip_params_for(host))
                for written, key, host in zip(
                    unwritten[_SPELLING], unwritten["url"], unwritten["host"], strict=True
                )
            ],
        },
        schema={"url": pl.String, "request_url": pl.String},
    )
    return grouped.join(spelled, on="url", how="left", maintain_order="left").drop(
        _KEY_WRITTEN, _SPELLING
    )


def cached_normalization(
    wh: Warehouse, hosts: list[str], inventory: pl.DataFrame, config: PipelineConfig
) -> CachedNormalization:
    """:func:`normalize_with_cache` over the run's url_canonical files; only the hosts whose
    cache changed are written back (a pure cache: a run that dies afterwards loses nothing)."""
    cached = normalize_with_cache(inventory, wh.read("url_canonical", hosts), config)
    changed = cached.changed_hosts
    if changed:
        wh.write_partitions(
            "url_canonical", changed, cached.cache.filter(pl.col("host").is_in(changed))
        )
    return cached


#: canonical_candidates' temporary column: the inventory spellings of each candidate
VARIANTS = "_variants"


def _allowed_as_written(
    policy: RobotsPolicy, url: str, host: str, variants: list[str] | None, config: PipelineConfig
) -> bool:
    """robots.txt's word on a candidate: on its key, and on every spelling it was found under
    (as the site wrote it, less tracking and session parameters: science.normalize.
    as_discovered). Any of them disallowed, the key is: rules are written against the site's
    own spellings, and the key's sorted query slipped past ``Disallow: /?s=``."""
    if not policy.can_fetch(url):
        return False
    if not variants:
        return True
    stripped = config.strip_params_for(host)
    for variant in variants:
        if variant == url:
            continue
        try:
            written = as_discovered(variant, strip_params=stripped)
        except ValueError:
            continue
        if written != url and not policy.can_fetch(written):
            return False
    return True


def apply_robots(
    candidates: pl.DataFrame,
    robots: pl.DataFrame,
    allow: Iterable[IPNetwork] = (),
    config: PipelineConfig | None = None,
) -> pl.DataFrame:
    """Mark what robots.txt disallows. Without a robots record (a dry run before the first
    fetch) a URL is allowed for planning; the fetch stage never runs without one. A host
    written as an address ``allow`` refuses is refused whatever its record says, as the real
    cycle would refuse its robots.txt request: a dry run of a home that had fetched, run
    without the allow-list, planned 7 URLs that the real cycle then held back (found by a
    newcomer).

    A record of a robots.txt request the network allow-list refused counts as no record once
    ``allow`` (the allow-list now) admits an address it named: a dry run after the allow-list
    was opened plans as the real cycle, which asks again, will fetch, instead of repeating
    the old refusal. A real cycle's records are this cycle's, made under the same ``allow``.

    A host allowed or refused whole (no robots.txt, an unreachable one) is decided by one join;
    only the URLs of hosts with rules go through the parser, one call each (and one per other
    spelling they were found under, :func:`_allowed_as_written`)."""
    allow = tuple(allow)
    config = config or PipelineConfig()
    refused = {
        host: f"{ALLOW_LIST_REASON} ({ALLOW_ENV})"
        for host in candidates["host"].drop_nulls().unique().to_list()
        if literal_refusal(host, allow) is not None
    }
    records = (record_from_row(row) for row in robots.iter_rows(named=True))
    policies = {
        record.host: robots_policy(record)
        for record in records
        if record.host not in refused
        and not (refused_by_allow_list(record) and refusal_lifted(record.error or "", allow))
    }
    whole = pl.DataFrame(
        {
            "host": [*policies, *refused],
            "_all": [
                None if p.mode not in ("allow_all", "disallow_all") else p.mode == "allow_all"
                for p in policies.values()
            ]
            + [False] * len(refused),
            "_reason": [refusal_reason(p) for p in policies.values()] + list(refused.values()),
        },
        schema={"host": pl.String, "_all": pl.Boolean, "_reason": pl.String},
    )
    spellings = [VARIANTS] if VARIANTS in candidates.columns else []
    ruled = candidates.select("url", "host", *spellings).join(
        whole.filter(pl.col("_all").is_null()).select("host"), on="host", how="semi"
    )
    variants = ruled[VARIANTS].to_list() if spellings else [None] * ruled.height
    by_rules = pl.DataFrame(
        {
            "url": ruled["url"],
            "host": ruled["host"],
            "_rules": [
                _allowed_as_written(policies[host], url, host, written, config)
                for url, host, written in zip(ruled["url"], ruled["host"], variants, strict=True)
            ],
        },
        schema={"url": pl.String, "host": pl.String, "_rules": pl.Boolean},
    )
    allowed = pl.coalesce("_rules", "_all", pl.lit(True))
    return (
        candidates.join(whole, on="host", how="left")
        .join(by_rules, on=["url", "host"], how="left")
        .with_columns(allowed.alias("allowed"))
        .with_columns(
            blocked_reason=pl.when(pl.col("allowed")).then(None).otherwise(pl.col("_reason"))
        )
        .drop("_all", "_reason", "_rules", *spellings)
    )


#: a path deeper than this, or one segment three times in a row, is a crawler trap (relative
#: links or redirects that grow the path on every answer: /a/a/a/..., a calendar's /2026/12/...
#: nested without end); the limits of Heritrix's TooManyPathSegments and PathologicalPath rules
MAX_PATH_SEGMENTS = 20
TRAP_REPEATS = 3
TRAP_REASON = (
    f"looks like a crawler trap: a path segment repeated {TRAP_REPEATS} times, or over "
    f"{MAX_PATH_SEGMENTS} segments"
)


def hold_back_traps(candidates: pl.DataFrame) -> pl.DataFrame:
    """Mark the URLs whose path only a trap makes (not allowed, with the reason): each such
    URL found a cycle was kept and fetched again every cycle after, the plan growing without
    end (found by an exploratory run)."""
    path = url_path(pl.col("url")).replace("", "/").fill_null("/")
    segments = path.str.strip_chars_start("/").str.split("/")
    same_as_before = [pl.element() == pl.element().shift(k) for k in range(1, TRAP_REPEATS)]
    repeated = segments.list.eval(pl.all_horizontal(pl.element() != "", *same_as_before)).list.any()
    trap = repeated | (segments.list.len() > MAX_PATH_SEGMENTS)
    return (
        candidates.with_columns(_trap=trap)
        .with_columns(
            allowed=pl.col("allowed") & ~pl.col("_trap"),
            blocked_reason=pl.when(pl.col("allowed") & pl.col("_trap"))
            .then(pl.lit(TRAP_REASON))
            .otherwise("blocked_reason"),
        )
        .drop("_trap")
    )


@dataclass(frozen=True)
class CycleCandidates:
    """A cycle's candidates, with what the asset reports of how they were made."""

    frame: pl.DataFrame
    #: inventory URLs dropped as not valid http(s) URLs
    invalid: int
    #: inventory URLs the normalization cache did not hold
    normalized_afresh: int


def cycle_candidates(
    wh: Warehouse,
    hosts: list[str],
    inventory: pl.DataFrame,
    now: datetime,
    config: PipelineConfig,
    allow: Iterable[IPNetwork] = (),
) -> CycleCandidates:
    """The candidates of ``hosts`` from their inventory: normalized through the url_canonical
    cache (which it updates), deduplicated, and checked against the robots rows (``allow``:
    the network allow-list now, :func:`apply_robots`). The
    url_candidates asset is this between Dagster's read of the inventory and its write;
    benchmarks call it to build candidates as the product does without Dagster."""
    cached = cached_normalization(wh, hosts, inventory, config)
    candidates, invalid = canonical_candidates(inventory, hosts, now, config, norm=cached.norm)
    robots = wh.read("robots", hosts, columns=list(RECORD_COLUMNS))
    candidates = hold_back_traps(apply_robots(candidates, robots, allow, config))
    frame = tables.conform("url_candidates", candidates).sort(["host", "url"])
    return CycleCandidates(frame, invalid, cached.normalized)
