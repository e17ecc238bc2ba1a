"""``freshness reextract``: re-derive fingerprints and versions from the WARC archive after an
extractor, selectors, fields or json_ld change, fetching nothing.

Without it, the next fetch of every page of a changed class finds a fingerprint of another
version (stages.plan.plan_inputs drops it, with the validators) and fetches the body whole,
comparing it with the archived body read again then (stages.rereading): a cycle's worth of
unconditional fetches for content that did not change. The archive already holds each URL's
last body (url_state.archived), so extracting that body with the class's current settings
(science.fingerprint.class_record, the fetcher's own call) gives the fingerprint the next
fetch would compute; with it stored under the current version, the next fetch is
conditional again and compares like with like.

Each re-extraction is a page_versions row of its own, with outcome 'reextracted': a new reading
of a body the archive kept, not a new version of the page, so it writes no ``changes`` row. It
is dated when it was derived, on the crawl's clock (every time in the tables is a cycle's
``now``, never the wall clock): :data:`DERIVED_AFTER` after the newest cycle that fetched its
host, so it sorts after everything the crawl had seen and before the next cycle, and never
shares its ``observed_at`` with the row whose body it re-read. That keeps one row per URL and
time, which the history of a URL, ``freshness diff`` (its newest row against the one before),
``freshness export`` (the newest row per URL in the window, in the window it was derived in,
so a consumer that already has the body's window still gets the new fields) and the
``changes`` view (a change's ``changed_at`` and ``previous_observed_at`` each name one row)
rely on. url_state's ``version_observed_at`` moves to it, so the next change is diffed against
the current extraction. Another run before the next cycle dates its rows the same and replaces
them (storage.Warehouse.write_partitions ``replace_on``): ``--force`` does not pile them up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from freshness_pipeline.app.cycle_lines import counted
from freshness_pipeline.config import ConfigError, Extraction, PipelineConfig, load_config
from freshness_pipeline.stages.rereading import reread
from freshness_pipeline.stages.versions import drop_excluded_fields
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive import ArchiveReader, archive_dir_for
from freshness_pipeline.warehouse.layout import scan_files
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = ["BATCH_PAGES", "DERIVED_AFTER", "ReextractInputError", "Reextracted", "reextract"]

#: pages extracted before their hosts' files are written: bounds the texts held in memory at
#: any number of URLs, while each write still covers many hosts at once.
BATCH_PAGES = 5000
#: a re-extraction's time past its host's newest cycle: later than every row that cycle
#: wrote (a body fetched then has that time), earlier than any next cycle
DERIVED_AFTER = timedelta(seconds=1)


class ReextractInputError(ValueError):
    """The request cannot be met as asked (no warehouse, an unknown URL class, a bad config):
    the user's to fix, so the CLI exits 2."""


@dataclass(frozen=True)
class Reextracted:
    """What a re-extraction did: pages re-extracted and on how many hosts, and the pages left
    for their next fetch, by why."""

    pages: int = 0
    hosts: int = 0
    left: dict[str, int] = field(default_factory=dict)

    @property
    def without_body(self) -> int:
        return sum(self.left.values())

    def line(self) -> str:
        """What the command says: "re-extracted 0 pages on 0 hosts" alone did not tell that
        every page was current already (found by a newcomer)."""
        if not self.pages and not self.left:
            return (
                "nothing to re-extract: no page's version is of an older extraction than its "
                "class's (--force re-extracts them anyway)"
            )
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(self.left.items()))
        return (
            f"re-extracted {counted(self.pages, 'page')} on {counted(self.hosts, 'host')}; "
            f"{self.without_body} without an archived body, left for their next fetch"
            + (f" ({why})" if why else "")
        )


def reextract(
    home: str | Path | None,
    *,
    url_class: str | None = None,
    force: bool = False,
    batch_pages: int = BATCH_PAGES,
) -> Reextracted:
    """Re-extract every fingerprinted URL whose fingerprint_version is not its class's current
    one (``force``: every fingerprinted URL), or only those of ``url_class``, from its archived
    body, under the home's writer lock. Raises ReextractInputError for bad input, HomeBusy when
    a cycle or seed load holds the home."""
    wh = Warehouse(home)
    if not wh.root.exists():
        raise ReextractInputError(
            f"no warehouse in {wh.home}: run `freshness seed` and `freshness cycle` first"
        )
    try:
        config = load_config(wh.home)
    except ConfigError as exc:
        raise ReextractInputError(str(exc)) from exc
    if url_class is not None:
        _check_class(wh, url_class, set(config.class_extraction))
    with wh.exclusive("reextract"):
        # A seeded home whose first cycle has not ended has nothing to re-extract; it was
        # told it had no warehouse, and during that first cycle exit 2 where a busy home is 75.
        if not wh.hosts_in("url_state"):
            return Reextracted(0, 0, {})
        wh.sweep_temp_files()
        state = current_classes(wh.read("url_state"), wh.read("seeds"), config)
        current = config.version_expr()
        due = state.filter(
            pl.col("fingerprint").is_not_null() & pl.col("fingerprint_version").is_not_null()
        )
        if url_class is not None:
            due = due.filter(pl.col("url_class") == url_class)
        if not force:
            due = due.filter(pl.col("fingerprint_version") != current)
        extractions, index = config.extractions()
        # the crawl's clock per host: its newest cycle (every fetch is stamped with its cycle)
        newest = state.group_by("host").agg(pl.col("last_fetched_at").max().alias("_newest"))
        due = (
            due.select(
                "url", "host", "url_class", "archived", index.alias("_x"), current.alias("_version")
            )
            .join(newest, on="host", how="left")
            .sort("host", "url")
        )
        reader = ArchiveReader(archive_dir_for(wh.home))
        left: Counter[str] = Counter()
        pages, hosts = 0, 0
        for batch in _batches(due, batch_pages):
            rows = []
            for row in batch.iter_rows(named=True):
                version, why = _version(reader, row, extractions[row["_x"]])
                if version is None:
                    left[why] += 1
                else:
                    rows.append(version)
            if rows:
                versions = drop_excluded_fields(
                    pl.DataFrame(rows, schema=tables.SCHEMAS["page_versions"]), config
                )
                _write(wh, state, versions)
                pages += versions.height
                hosts += versions["host"].n_unique()
    return Reextracted(pages, hosts, dict(left))


def current_classes(
    state: pl.DataFrame, seeds: pl.DataFrame, config: PipelineConfig
) -> pl.DataFrame:
    """url_state with each URL in the class the next cycle's candidates give it: its seed row's
    class, else the first class whose ``match`` patterns find it, else the one it has. A class
    added or re-patterned since the last cycle is re-extracted now, as its selectors would be,
    instead of by whole fetches once the next cycle re-classes its URLs."""
    seeded = seeds.filter(pl.col("url_class").is_not_null()).select(
        "url", pl.col("url_class").alias("_seeded")
    )
    return (
        state.join(seeded.unique("url", keep="last"), on="url", how="left", maintain_order="left")
        .with_columns(url_class=config.url_class_expr("_seeded", "url_class"))
        .drop("_seeded")
    )


def _check_class(wh: Warehouse, url_class: str, configured: set[str]) -> None:
    """An unknown class is a typo far more often than a class with nothing to do: name the
    ones the config and the crawl know."""
    files = wh.files("url_state")
    crawled = (
        scan_files(files, missing_columns="insert", extra_columns="ignore")
        .select(pl.col("url_class").drop_nulls().unique())
        .collect()["url_class"]
        .to_list()
        if files
        else []
    )
    known = configured | set(crawled)
    if url_class not in known:
        raise ReextractInputError(
            f"unknown URL class {url_class!r}; the known ones are "
            + (", ".join(sorted(known)) or "none (no URL has a class)")
        )


def _batches(due: pl.DataFrame, pages: int) -> Iterator[pl.DataFrame]:
    """``due`` (sorted by host) in slices of whole hosts, about ``pages`` rows each: a host's
    files are written once per run, whole."""
    if due.is_empty():
        return
    counts = due.group_by("host", maintain_order=True).len()
    batch: list[str] = []
    size = 0
    for host, n in counts.iter_rows():
        batch.append(host)
        size += n
        if size >= pages:
            yield due.filter(pl.col("host").is_in(batch))
            batch, size = [], 0
    if batch:
        yield due.filter(pl.col("host").is_in(batch))


def _version(
    reader: ArchiveReader, row: dict[str, Any], extraction: Extraction
) -> tuple[dict[str, Any] | None, str]:
    """The page_versions row of one URL's archived body under its class's extraction, or None
    and why the page is left for its next fetch."""
    got, why = reread(reader, row["archived"], extraction)
    if got is None:
        return None, why
    record, original, where = got.record, got.original, got.location
    return {
        "url": row["url"],
        "host": row["host"],
        "observed_at": derived_at(original.date, row["_newest"]),
        "outcome": "reextracted",
        "url_class": row["url_class"],
        "fingerprint": record.fingerprint,
        "fingerprint_version": row["_version"],
        "title": record.title,
        "text": record.text,
        "fields": record.fields_json,
        "content_type": got.content_type,
        "warc_filename": where.warc_filename,
        "warc_offset": where.warc_offset,
        "warc_length": where.warc_length,
        "payload_digest": original.payload_digest,
    }, ""


def derived_at(body_observed: datetime | None, host_newest: datetime | None) -> datetime | None:
    """When a re-extraction is dated (module docstring): just after the host's newest cycle,
    or after the body's own time where url_state knows no fetch of the host later than it."""
    known = [t for t in (body_observed, host_newest) if t is not None]
    return max(known) + DERIVED_AFTER if known else None


def _write(wh: Warehouse, state: pl.DataFrame, versions: pl.DataFrame) -> None:
    """page_versions first, then url_state, each host's file whole: a kill between them leaves
    the old fingerprint version in url_state, so the next run does the page again and its row
    (dated the same, unless a cycle ran in between) replaces the one written now."""
    hosts = sorted(versions["host"].unique().to_list())
    wh.write_partitions("page_versions", hosts, versions, replace_on=("url", "outcome"))
    updates = versions.select(
        "url",
        pl.col("fingerprint").alias("_fp"),
        pl.col("fingerprint_version").alias("_fpv"),
        pl.col("observed_at").alias("_observed"),
    )
    rows = (
        state.filter(pl.col("host").is_in(hosts))
        .join(updates, on="url", how="left", maintain_order="left")
        .with_columns(
            fingerprint=pl.coalesce("_fp", "fingerprint"),
            fingerprint_version=pl.coalesce("_fpv", "fingerprint_version"),
            version_observed_at=pl.coalesce("_observed", "version_observed_at"),
        )
    )
    wh.write_partitions("url_state", hosts, rows)
