"""Optional per-host and per-URL-class settings, from ``<home>/freshness.toml``.

```toml
[hosts."shop.example"]
strip_params = ["sid", "sort"]     # query parameters that make no difference on this host,
                                   # stripped in addition to the tracking list
[url_classes.product]
match = ['/products/[^/?]+$', '/product/']  # regular expressions searched in a URL: one whose
                                   # seed row gives no class (found by a sitemap, say) is a product
value = 5                          # what a URL of the class is worth when given no value
selectors = ["h1", ".price"]       # fingerprint only these parts of the page (plus the title)
json_ld = true                     # schema.org JSON-LD name, offers.price, offers.availability
                                   # as the fields name, price and availability, from the
                                   # page's main item (unset: a sold item's only; false: none)
[url_classes.listing.fields]       # more fields beside the title and the text: name = CSS
price = ".price"                   # selector, the text of its first match (null without one)
stock = "#stock .label"

[url_classes.product.retention]     # what the crawled copy keeps of a class (default: all)
versions_days = 90                 # page_versions and changes rows older than this go
                                   # (not a live URL's newest version)
exclude_fields = ["email"]         # configured fields never written to page_versions/changes
keep_history = false               # only each URL's newest version; no changes rows

[retention]
archive_days = 180                 # whole WARC files of cycles older than this are pruned

[partitioning]
host_buckets = 256                 # Dagster partitions are 256 hash buckets of hosts; 0: one
                                   # per host; "auto" (the default): see below

[dagster]
keep_runs_days = 30                # delete Dagster runs (and their events) older than this

[notify]
urls = ["json://127.0.0.1:8080/hook"]   # Apprise URLs: each batch of changes goes to each
url_classes = ["product"]          # optional: only changes of pages of these classes
fields = ["price"]                 # optional: only changes that moved one of these fields

[planning]
objective = "capture"              # or "freshness" (the default), see below
cost = "credits"                   # or "fetches" (the default) or "bytes", see below

[planning.credits]                 # with cost = "credits": what one fetch of a class costs
product = 5                        # e.g. fetched through a rendering API
default = 1                        # every other class (1 when omitted)
```

``match`` and ``value``: a seed file gives the URLs it lists a class and a value, but the pages
a site adds later come in through its sitemaps, feeds and redirects with neither, and would be
extracted (no fields) and valued (1) like any page. A URL whose seed row gives no class takes
the first class, in the order the classes first appear in the file, with a pattern found
anywhere in its normalized URL (scheme and host included); that goes before a class inherited
from a page that redirected or pointed to it, because a pattern says what the URL is and an
inheritance only guesses (a discontinued product redirected to its category does not make the
category a product). Its value is its seed row's, else its class's ``value``, else the highest
it inherited, else 1. A seed loaded without a value is stored with 1.0, so a seeded URL keeps
its own even where its class sets one: give seeds their value in the seed file. Patterns are
polars' (the Rust regex crate's) syntax, with no look-around or backreferences; each is run
when the file is read, so one polars refuses fails the load, named. A backslash is best
written in a TOML literal string ('\\d+'): in a "basic" one it must be doubled. Candidates are
classed every cycle, so a rule added or changed reclassifies the URLs already found at the
next cycle (and one that no longer matches a URL takes the class away): the new class's
extraction re-extracts the page (as below) and its change-rate estimate is redone under the
class's prior.

``objective``: "freshness" keeps the value-weighted share of fresh copies highest (pages that
change far faster than the budget can follow get less); "capture" counts every change a fetch
catches, so the fastest pages get the most (a change feed, an archive). A run's
``resources.cycle.config.objective`` overrides it for that run.

``cost``: what a page's gain is divided by (science.cost). "fetches" counts every fetch alike;
"bytes" uses the mean bytes a request of that host and URL class transferred over the last
30 days (the fetch_totals table; 304s are cheap); "credits" the ``[planning.credits]`` table. The budget
still counts fetches; the cost decides which fetches it buys.

``host_buckets``: Dagster's bookkeeping costs a few events per asset and partition, so one
partition per host is what a small crawl reads best in the UI and what a large one cannot
afford. "auto" (or no setting) therefore keeps one partition per host up to
``partitions.AUTO_HOST_LIMIT`` seeded hosts and uses ``partitions.AUTO_HOST_BUCKETS`` buckets
past that; a number pins the choice (0: per host). The code location reads it when it loads,
so reload it after a change (or after a seed load crosses the limit); the CLI reads it at every
cycle. The warehouse keeps one file per host either way, so a home can switch modes between
cycles.

``keep_runs_days`` (default 30; 0: keep every run): each cycle, CLI or scheduled, deletes the
runs older than this from the Dagster instance, with their event logs, and compacts the
instance's index once much of it is free space: the warehouse is the crawl's history, the
instance only the operations log, and at one run an hour it otherwise grows without bound.

``[notify]``: the notification sensor (notify.notify_changes) sends each batch of new rows of
``changes`` to every Apprise URL; ``url_classes`` and ``fields`` narrow what it watches (both
given: a change must match both). Each URL is parsed by Apprise when the file is read, so a
typo fails the load naming it rather than every notification silently.

Fields: every version in page_versions has the fields ``title`` and ``text``; a class's
``fields`` add named values beside them, read from the page as served (a price in a block the
content rules drop still counts), and a change in ``changes`` names each field that moved
with its old and new value. JSON-LD's ``name``, ``price`` and ``availability`` join them where
the page states them: by default (``json_ld`` unset, and every URL of no class) from an item
that is sold or is a product, event, book and the like, under names the class's ``fields``
leave free, so that a shop whose price and stock live in structured data alone has its
changes seen; with ``json_ld = true`` from the page's main item whatever it is, the three
names reserved; ``json_ld = false`` reads none. Field names are identifiers (letters, digits,
``_``) so that SQL reads them as ``'$.name'``; ``title`` and ``text`` are taken. Every
selector is compiled when the file is read: a bad one fails the cycle naming it, not every
fetch of its class.

Retention (``[url_classes.C.retention]`` per class, ``[retention]`` home-wide; every default
keeps everything): the crawled copy is a copy of other people's pages, so a home can bound
what it keeps. ``exclude_fields`` names fields of the class (its ``fields`` or, unless
``json_ld = false``, name/price/availability) that never reach disk: they are dropped from
page_versions.fields and from changes' changed_fields and old and new values when the rows
are built, yet still count in the fingerprint (a changed excluded field is still a change;
a field's value that also shows in the page's text stays in the ``text`` column, and the
body in the WARC archive until ``archive_days`` prunes it).
``keep_history = false`` keeps only each URL's newest version in page_versions and writes no
changes rows for the class; ``versions_days`` drops the class's page_versions and changes
rows observed more than that many days before a cycle's ``now``, but not a live URL's newest
version (a page unchanged for longer than the window still has its copy, and its next change
a version to be diffed against). ``archive_days`` removes
whole WARC files of cycles older than that, carrying over the originals that kept revisit
records refer to (archive.prune). Rows are expired by retention.prune_history after every
successful cycle, as of the cycle's ``now``; a row's class is its URL's class in url_state.

Selectors, fields and json_ld change what a fingerprint means (configured fields are hashed
with the content), so each class's combination of them gets its own fingerprint version:
changing any of them makes the next fetch of those pages an unconditional one and a
re-extraction (outcome 'new' in fetch_log, 'reextracted' in page_versions, no change
observation), not a wave of false changes.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard, get_args

import polars as pl

from freshness_pipeline.science.cost import COST_BASES
from freshness_pipeline.science.fingerprint import (
    FIELD_RULES_VERSION,
    FINGERPRINT_VERSION,
    JSON_LD_FIELDS,
    css_selector_error,
)
from freshness_pipeline.science.normalize import TRACKING_PARAMS, normalize_url, url_authority
from freshness_pipeline.science.schedule import Objective

CONFIG_FILE = "freshness.toml"
MAX_HOST_BUCKETS = 4096
#: ``[dagster] keep_runs_days`` when a home does not say
DEFAULT_KEEP_RUNS_DAYS = 30.0
AUTO = "auto"
OBJECTIVES: tuple[str, ...] = get_args(Objective)
PLANNING_KEYS = frozenset({"objective", "cost", "credits"})
NOTIFY_KEYS = ("urls", "url_classes", "fields")
URL_CLASS_KEYS = ("selectors", "fields", "json_ld", "match", "value", "retention")
CLASS_RETENTION_KEYS = ("versions_days", "exclude_fields", "keep_history")
RETENTION_KEYS = ("archive_days",)
#: Fields every version has, whatever a class configures.
DEFAULT_FIELDS = ("title", "text")
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class NotifyConfig:
    """Where change notifications go and which changes they watch (empty: every change)."""

    urls: tuple[str, ...] = ()
    url_classes: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()


class ConfigError(ValueError):
    """The config file is unreadable or has a setting of the wrong shape (named in the message)."""


def _only_keys(section: object, allowed: Iterable[str], name: str, path: Path) -> dict[str, Any]:
    """``section`` as a table of ``allowed`` keys; a ConfigError naming the section, what it
    takes and any key it does not (a typo must not be lost in the list of what is allowed)."""
    allowed = tuple(allowed)
    keys = ", ".join(allowed)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [{name}] takes only {keys}")
    unknown = sorted(map(str, set(section) - set(allowed)))
    if unknown:
        raise ConfigError(f"{path}: [{name}] takes only {keys}, not {', '.join(unknown)}")
    return section


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where} must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def extractor_version(
    selectors: tuple[str, ...] = (),
    fields: Mapping[str, str] | None = None,
    json_ld: bool | None = None,
) -> int:
    """FINGERPRINT_VERSION for the default extractor; a distinct number per combination of
    selectors, fields and json_ld (None: not set, the default reading), since each hashes
    other parts of a page. A selectors-only combination's key is its selectors alone, as it
    was before fields existed; field order is ignored because the fingerprint hashes fields
    sorted by name. FIELD_RULES_VERSION is in the key of the combinations with fields or a
    json_ld of their own: a change to how fields are hashed re-extracts those classes alone
    (the default reads JSON-LD too, so a change to that reading is a FINGERPRINT_VERSION's)."""
    if not selectors and not fields and json_ld is None:
        return FINGERPRINT_VERSION
    key = "\n".join(selectors)
    if fields or json_ld is not None:
        extra = {
            "fields": dict(sorted((fields or {}).items())),
            "json_ld": json_ld,
            "rules": FIELD_RULES_VERSION,
        }
        key += "\0" + json.dumps(extra, sort_keys=True)
    digest = zlib.crc32(key.encode()) % 1_000_000
    return FINGERPRINT_VERSION + 1000 * (digest + 1)


@dataclass(frozen=True)
class Extraction:
    """What a URL class's fingerprint and versions read from its pages. One object per class,
    shared by all of its fetch requests."""

    selectors: tuple[str, ...] = ()
    #: field name -> CSS selector; None when the class configures none
    fields: dict[str, str] | None = None
    #: True: the class asks for JSON-LD's values; False: it turns them off; None: it does not
    #: say, and a sold item's values are read where its own fields leave the names free
    json_ld: bool | None = None

    @property
    def version(self) -> int:
        return extractor_version(self.selectors, self.fields, self.json_ld)


DEFAULT_EXTRACTION = Extraction()


@dataclass(frozen=True)
class ClassRetention:
    """What the crawled copy keeps of one URL class's pages (the defaults: everything)."""

    #: None: versions and changes rows never expire
    versions_days: float | None = None
    exclude_fields: tuple[str, ...] = ()
    keep_history: bool = True

    @property
    def keeps_everything(self) -> bool:
        return self == KEEP_EVERYTHING


KEEP_EVERYTHING = ClassRetention()


@dataclass(frozen=True)
class PipelineConfig:
    host_strip_params: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    class_extraction: Mapping[str, Extraction] = field(default_factory=dict)
    #: None: "auto" (partitions.choose_partitioning decides by the number of hosts)
    host_buckets: int | None = None
    #: 30 days unless set: the instance is the operations log, and kept whole it outgrew the
    #: crawl's own data tenfold (about 160 KB per host and cycle with a partition per host)
    keep_runs_days: float = DEFAULT_KEEP_RUNS_DAYS
    objective: str = "freshness"
    cost_basis: str = "fetches"
    class_credits: Mapping[str, float] = field(default_factory=dict)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    class_retention: Mapping[str, ClassRetention] = field(default_factory=dict)
    #: None: WARC files never expire
    archive_days: float | None = None
    #: class -> the regular expressions that give a URL the class, in the file's order of classes
    class_patterns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: class -> the value of a URL of the class that was given none of its own
    class_values: Mapping[str, float] = field(default_factory=dict)

    def retention_for(self, url_class: str | None) -> ClassRetention:
        return self.class_retention.get(url_class or "", KEEP_EVERYTHING)

    def strip_params_for(self, host: str) -> frozenset[str]:
        return TRACKING_PARAMS | frozenset(self.host_strip_params.get(host, ()))

    def url_key(self, url: str) -> str:
        """``url`` as the candidates key it, the host's own ``strip_params`` included (InvalidURL
        when it does not normalize). The fetcher tells a redirect to another spelling of the
        page from a move by it: with the common rules only, a page that redirects to itself
        plus a session parameter the host strips was a move back onto itself, never fetched."""
        if not self.host_strip_params:
            return normalize_url(url)
        return normalize_url(url, strip_params=self.strip_params_for(url_authority(url)))

    def extraction_for(self, url_class: str | None) -> Extraction:
        return self.class_extraction.get(url_class or "", DEFAULT_EXTRACTION)

    def selectors_for(self, url_class: str | None) -> tuple[str, ...]:
        return self.extraction_for(url_class).selectors

    def fields_for(self, url_class: str | None) -> dict[str, str] | None:
        return self.extraction_for(url_class).fields

    def json_ld_for(self, url_class: str | None) -> bool | None:
        return self.extraction_for(url_class).json_ld

    def extractions(self) -> tuple[list[Extraction], pl.Expr]:
        """The distinct extractions (the default first) and an expression giving each row's
        index into them by its url_class: code that builds an object per URL maps the class
        column once instead of looking the class up row by row."""
        configured = list(self.class_extraction)
        index = {c: i for i, c in enumerate(configured, start=1)}
        expr = (
            pl.col("url_class").replace_strict(index, default=0, return_dtype=pl.Int64).fill_null(0)
        )
        return [DEFAULT_EXTRACTION, *self.class_extraction.values()], expr

    def version_expr(self) -> pl.Expr:
        """The fingerprint version each row's url_class calls for: the one definition that
        plans (a stored fingerprint of another version is not compared), fetch results and
        page versions all use."""
        mapping = {c: e.version for c, e in self.class_extraction.items()}
        return (
            pl.col("url_class")
            .replace_strict(mapping, default=FINGERPRINT_VERSION, return_dtype=pl.Int64)
            .fill_null(FINGERPRINT_VERSION)
        )

    def matched_class_expr(self, url: str = "url") -> pl.Expr:
        """The class whose ``match`` patterns find the URL in column ``url`` (null: none), the
        first class in the file winning, so that a specific class listed before a catch-all
        takes its URLs. One expression over the whole column: the candidates of a large crawl
        are classed in one pass, and each pattern is compiled once."""
        rules = [
            pl.when(pl.any_horizontal(pl.col(url).str.contains(p) for p in patterns)).then(
                pl.lit(url_class)
            )
            for url_class, patterns in self.class_patterns.items()
        ]
        none = pl.lit(None, dtype=pl.String)
        return pl.coalesce(*rules, none) if rules else none

    def url_class_expr(self, seeded: str, otherwise: str, url: str = "url") -> pl.Expr:
        """The class a URL is crawled as: its seed row's (column ``seeded``), else the first
        whose ``match`` patterns find it, else ``otherwise`` (one it inherited through a
        redirect or canonical link, or had). A pattern says what the URL is; an inheritance
        only guesses (a discontinued product redirected to its category does not make the
        category a product)."""
        return pl.coalesce(seeded, self.matched_class_expr(url), otherwise)

    def class_value_expr(self, url_class: str = "url_class") -> pl.Expr:
        """The value the class in column ``url_class`` gives its URLs (null: its class sets
        none, or it has no class)."""
        return pl.col(url_class).replace_strict(
            dict(self.class_values), default=None, return_dtype=pl.Float64
        )


def load_config(home: Path) -> PipelineConfig:
    path = home / CONFIG_FILE
    if not path.exists():
        return PipelineConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    sections = {
        "hosts",
        "url_classes",
        "partitioning",
        "planning",
        "dagster",
        "notify",
        "retention",
    }
    unknown = set(data) - sections
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {sorted(unknown)}")
    hosts: dict[str, tuple[str, ...]] = {}
    for host, settings in (data.get("hosts") or {}).items():
        settings = _only_keys(settings, ("strip_params",), f'hosts."{host}"', path)
        hosts[host.lower()] = _strings(
            settings.get("strip_params", []), f'{path}: hosts."{host}".strip_params'
        )
    url_classes = data.get("url_classes") or {}
    if not isinstance(url_classes, dict):
        raise ConfigError(f"{path}: [url_classes] must be a table of URL classes")
    classes = {
        url_class: _extraction(settings, path, url_class)
        for url_class, settings in url_classes.items()
    }
    retention = {
        url_class: _class_retention(settings.get("retention"), path, url_class, classes[url_class])
        for url_class, settings in url_classes.items()
        if isinstance(settings, dict) and "retention" in settings
    }
    rules = {
        url_class: _class_rule(settings, path, url_class)
        for url_class, settings in url_classes.items()
    }
    planning = data.get("planning")
    if planning is None:
        planning = {}
    planning = _only_keys(planning, sorted(PLANNING_KEYS), "planning", path)
    return PipelineConfig(
        host_strip_params=hosts,
        class_extraction=classes,
        host_buckets=_host_buckets(data.get("partitioning"), path),
        keep_runs_days=_keep_runs_days(data.get("dagster"), path),
        objective=_choice(planning, "objective", OBJECTIVES, path),
        cost_basis=_choice(planning, "cost", COST_BASES, path),
        class_credits=_credits(planning.get("credits", {}), path),
        notify=_notify(data.get("notify"), path),
        class_retention={c: r for c, r in retention.items() if not r.keeps_everything},
        archive_days=_archive_days(data.get("retention"), path),
        class_patterns={c: patterns for c, (patterns, _) in rules.items() if patterns},
        class_values={c: value for c, (_, value) in rules.items() if value is not None},
    )


def _notify(section: object, path: Path) -> NotifyConfig:
    if section is None:
        return NotifyConfig()
    section = _only_keys(section, NOTIFY_KEYS, "notify", path)
    urls = _strings(section.get("urls", []), f"{path}: notify.urls")
    if not urls:
        raise ConfigError(f"{path}: notify.urls must name at least one Apprise URL")
    # imported here: only a home that notifies pays for Apprise's plugin discovery
    import apprise

    for i, url in enumerate(urls):
        if apprise.Apprise.instantiate(url) is None:
            raise ConfigError(
                f"{path}: notify.urls[{i}]: Apprise cannot parse {url!r} (unknown scheme or "
                "malformed URL; see https://github.com/caronc/apprise/wiki)"
            )
    fields = _strings(section.get("fields", []), f"{path}: notify.fields")
    for name in fields:
        if not _FIELD_NAME.fullmatch(name):
            raise ConfigError(f"{path}: notify.fields: {name!r} is not a field name")
    url_classes = _strings(section.get("url_classes", []), f"{path}: notify.url_classes")
    return NotifyConfig(urls=urls, url_classes=url_classes, fields=fields)


def _extraction(settings: object, path: Path, url_class: str) -> Extraction:
    where = f"{path}: url_classes.{url_class}"
    settings = _only_keys(settings, URL_CLASS_KEYS, f"url_classes.{url_class}", path)
    selectors = _strings(settings.get("selectors", []), f"{where}.selectors")
    for i, selector in enumerate(selectors):
        error = css_selector_error(selector)
        if error is not None:
            raise ConfigError(
                f"{where}.selectors[{i}]: invalid CSS selector {selector!r} ({error})"
            )
    json_ld = settings.get("json_ld")
    if json_ld is not None and not isinstance(json_ld, bool):
        raise ConfigError(f"{where}.json_ld must be true or false, not {json_ld!r}")
    fields = _fields(settings.get("fields", {}), where, json_ld)
    return Extraction(selectors, fields or None, json_ld)


def _class_rule(
    settings: dict[str, Any], path: Path, url_class: str
) -> tuple[tuple[str, ...], float | None]:
    """A class's ``match`` patterns and ``value`` (None: not set). Each pattern is run once
    through polars, whose regex engine the candidates use: Python's ``re`` takes look-around
    and backreferences that engine refuses, and a pattern it refuses would otherwise fail
    every cycle's candidates instead of the load, named."""
    where = f"{path}: url_classes.{url_class}"
    patterns = settings.get("match", [])
    if isinstance(patterns, str):
        raise ConfigError(
            f"{where}.match must be a list of regular expressions, not a single string "
            f'(write match = ["..."])'
        )
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        raise ConfigError(
            f"{where}.match must be a list of non-empty regular expressions, not {patterns!r}"
        )
    for i, pattern in enumerate(patterns):
        error = _regex_error(pattern)
        if error is not None:
            raise ConfigError(
                f"{where}.match[{i}]: polars cannot run the regular expression {pattern!r}: "
                f"{error} (Rust regex syntax: no look-around, no backreferences)"
            )
    value = settings.get("value")
    if value is not None and not _is_positive_number(value):
        raise ConfigError(f"{where}.value must be a positive number, not {value!r}")
    return tuple(dict.fromkeys(patterns)), None if value is None else float(value)


def _regex_error(pattern: str) -> str | None:
    """Why polars' regex engine (the Rust ``regex`` crate) refuses ``pattern``, or None."""
    try:
        pl.Series([""], dtype=pl.String).str.contains(pattern)
    except pl.exceptions.PolarsError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        said = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
        said += [line.removeprefix("regex error: ") for line in lines[:1]]
        return said[0].rstrip(".") if said else type(exc).__name__
    return None


def _is_positive_number(value: object) -> TypeGuard[int | float]:
    """A TOML integer or float above 0 and finite (a boolean is no number here)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and value > 0


def _days(value: object, where: str) -> float:
    if not _is_positive_number(value):
        raise ConfigError(f"{where} must be a positive number of days, not {value!r}")
    return float(value)


def _class_retention(
    section: object, path: Path, url_class: str, extraction: Extraction
) -> ClassRetention:
    where = f"{path}: url_classes.{url_class}.retention"
    section = _only_keys(section, CLASS_RETENTION_KEYS, f"url_classes.{url_class}.retention", path)
    days = section.get("versions_days")
    versions_days = None if days is None else _days(days, f"{where}.versions_days")
    keep_history = section.get("keep_history", True)
    if not isinstance(keep_history, bool):
        raise ConfigError(f"{where}.keep_history must be true or false, not {keep_history!r}")
    excluded = _strings(section.get("exclude_fields", []), f"{where}.exclude_fields")
    # Only a field the class extracts can be left out: a typo would otherwise keep writing
    # the very value it was meant to keep off disk, silently.
    known = set(extraction.fields or ()) | (
        set(JSON_LD_FIELDS) if extraction.json_ld is not False else set()
    )
    for name in excluded:
        if name in DEFAULT_FIELDS:
            raise ConfigError(
                f"{where}.exclude_fields: {name!r} is every version's own column and cannot "
                "be excluded"
            )
        if name not in known:
            raise ConfigError(
                f"{where}.exclude_fields: {name!r} is not a field of the class (its fields: "
                f"{', '.join(sorted(known)) or 'none configured'})"
            )
    return ClassRetention(versions_days, tuple(dict.fromkeys(excluded)), keep_history)


def _archive_days(section: object, path: Path) -> float | None:
    if section is None:
        return None
    section = _only_keys(section, RETENTION_KEYS, "retention", path)
    days = section.get("archive_days")
    return None if days is None else _days(days, f"{path}: retention.archive_days")


def _fields(table: object, where: str, json_ld: bool | None) -> dict[str, str]:
    if not isinstance(table, dict):
        raise ConfigError(
            f"{where}.fields must be a table of field name = CSS selector, not {table!r}"
        )
    taken = dict.fromkeys(DEFAULT_FIELDS, "every version's own (title and text always are)")
    if json_ld:
        taken |= dict.fromkeys(JSON_LD_FIELDS, "read from JSON-LD (json_ld = true)")
    fields: dict[str, str] = {}
    for name, selector in table.items():
        if not _FIELD_NAME.fullmatch(name):
            raise ConfigError(
                f"{where}.fields: field name {name!r} must be an identifier (letters, digits "
                "and _, not starting with a digit)"
            )
        if name in taken:
            raise ConfigError(
                f"{where}.fields.{name}: the field {name!r} is {taken[name]}; name it otherwise"
            )
        if not isinstance(selector, str) or not selector.strip():
            raise ConfigError(
                f"{where}.fields.{name} must be a CSS selector string, not {selector!r}"
            )
        error = css_selector_error(selector.strip())
        if error is not None:
            raise ConfigError(f"{where}.fields.{name}: invalid CSS selector {selector!r} ({error})")
        fields[name] = selector.strip()
    return fields


def _choice(section: dict, key: str, allowed: tuple[str, ...], path: Path) -> str:
    value = section.get(key, allowed[0])
    if value not in allowed:
        raise ConfigError(
            f"{path}: planning.{key} must be one of {', '.join(allowed)}, not {value!r}"
        )
    return value


def _credits(section: object, path: Path) -> dict[str, float]:
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [planning.credits] must be a table of URL class = credits")
    credits: dict[str, float] = {}
    for url_class, value in section.items():
        if not _is_positive_number(value):
            raise ConfigError(
                f"{path}: planning.credits.{url_class} must be a positive number, not {value!r}"
            )
        credits[url_class.strip().lower()] = float(value)
    return credits


def _host_buckets(section: object, path: Path) -> int | None:
    if section is None:
        return None
    section = _only_keys(section, ("host_buckets",), "partitioning", path)
    n = section.get("host_buckets", AUTO)
    if n == AUTO:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_HOST_BUCKETS:
        raise ConfigError(
            f'{path}: partitioning.host_buckets must be "{AUTO}" or an integer from 0 (one '
            f"partition per host) to {MAX_HOST_BUCKETS}, not {n!r}"
        )
    return n


def _keep_runs_days(section: object, path: Path) -> float:
    if section is None:
        return DEFAULT_KEEP_RUNS_DAYS
    section = _only_keys(section, ("keep_runs_days",), "dagster", path)
    days = section.get("keep_runs_days", DEFAULT_KEEP_RUNS_DAYS)
    ok = isinstance(days, int | float) and not isinstance(days, bool)
    if not ok or not math.isfinite(days) or days < 0:
        raise ConfigError(
            f"{path}: dagster.keep_runs_days must be a number of days >= 0 (0: keep every "
            f"run), not {days!r}"
        )
    return float(days)
