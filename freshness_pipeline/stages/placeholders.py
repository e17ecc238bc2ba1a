"""A placeholder a host serves with HTTP 200 in place of its pages (a maintenance notice, an
error or a sign-in page), told apart by what one page cannot show: several pages of the host
that read differently before all read the same now.

One page's error page is caught by its words as it is read (science.fingerprint.error_pages:
"Site under maintenance"); a notice titled with the site's own name ("ACME Store: our store is
closed for an upgrade tonight") is not, and each page it stood in for was a false change, then
another when the page came back, a notification each time, and a version in the crawled copy
that the page never had (found by an exploratory run). Its mark is across the host's answers of
one cycle, after the fetches: pages whose last versions differed answering with one
fingerprint. A host whose pages always read alike (an app shell, a JavaScript page the
extraction sees nothing of) has pages that did not differ before, and is left as it is.

Such answers become errors, as a recognized error page is: the last version of each page stands
and is compared again at the next fetch. A never-fetched page answering with the same
placeholder in that cycle gets no first copy either.

Pages are counted by the document they are: a page that names another URL as its canonical
(``canonical``, when the results carry it) is that URL's. One page under several spellings
(``/p/3``, ``/p/3/``, ``/P/3``, ``/p/3/index.html``, each naming ``/p/3``) reads alike at every
spelling, and the spellings' last versions differ by when each was fetched: counted as pages,
every change of such a page was a placeholder, its new version discarded (36 of a held-out
web's changes to one host's pages, its spellings put in 'error'). A placeholder that names one
canonical for every page it stands in for is thereby missed here; its words may still give it
away (science.fingerprint.error_pages).
"""

from __future__ import annotations

import polars as pl

from freshness_pipeline.science.normalize import url_path

__all__ = ["MIN_PAGES", "placeholder_answers"]

#: pages with distinct last versions that must answer with one fingerprint in a cycle
MIN_PAGES = 3


def placeholder_answers(raw: pl.DataFrame, plan: pl.DataFrame) -> pl.DataFrame:
    """``raw`` (the fetcher's results: url, host, outcome, fingerprint, error) with the answers
    that are one host's placeholder made errors. ``plan``: the cycle's plan rows, every
    candidate (url, host and ``fingerprint``, each page's last version, the one its fetch was
    compared with).

    Two marks, either enough: pages whose last versions differed answer alike; or pages never
    fetched, at other paths, answer alike with content none of the host's pages has, on a host
    whose pages read differently (a cold start that met the notice: 15 first copies of an
    exploratory run's were the notice)."""
    if raw.is_empty() or "fingerprint" not in plan.columns:
        return raw
    last = plan.select("url", pl.col("fingerprint").alias("_last")).unique(
        "url", keep="last", maintain_order=True
    )
    canonical = pl.col("canonical") if "canonical" in raw.columns else pl.lit(None, pl.String)
    work = raw.join(last, on="url", how="left", maintain_order="left").with_columns(
        _doc=pl.coalesce(canonical, pl.col("url"))
    )
    has_fp = pl.col("fingerprint").is_not_null()
    moved = (pl.col("outcome") == "changed") & pl.col("_last").is_not_null()
    # one row a document: its spellings' last versions differ by when each was fetched
    moved_docs = work.filter(moved & has_fp).unique(["host", "fingerprint", "_doc"], keep="first")
    were_different = moved_docs.group_by("host", "fingerprint").agg(
        pl.col("_last").n_unique().alias("_were")
    )
    # the host's pages as they read, before this cycle
    known = (
        plan.filter(pl.col("fingerprint").is_not_null())
        .group_by("host")
        .agg(
            pl.col("fingerprint").n_unique().alias("_kinds"),
            pl.col("fingerprint").unique().alias("_known"),
        )
    )
    path = url_path(pl.col("_doc"))
    first_copies = (
        work.filter((pl.col("outcome") == "new") & pl.col("_last").is_null() & has_fp)
        .join(moved_docs, on=["host", "fingerprint", "_doc"], how="anti")
        .group_by("host", "fingerprint")
        .agg(path.n_unique().alias("_were"))
        .join(known, on="host", how="inner")
        .filter(
            (pl.col("_kinds") >= MIN_PAGES) & ~pl.col("_known").list.contains(pl.col("fingerprint"))
        )
        .select("host", "fingerprint", "_were")
    )
    shared = (
        pl.concat([were_different, first_copies])
        .group_by("host", "fingerprint")
        .agg(pl.col("_were").sum())
        .filter(pl.col("_were") >= MIN_PAGES)
    )
    if shared.is_empty():
        return raw
    hit = work.join(shared, on=["host", "fingerprint"], how="left", maintain_order="left")
    stood_in = pl.col("_were").is_not_null() & pl.col("outcome").is_in(["changed", "new"])
    said = pl.format(
        "the same content as pages of the host that read differently ({} of them): a "
        "placeholder served with HTTP 200 (maintenance, an error or a sign-in page); the last "
        "version stands",
        pl.col("_were"),
    )
    return hit.with_columns(
        outcome=pl.when(stood_in).then(pl.lit("error")).otherwise(pl.col("outcome")),
        error=pl.when(stood_in).then(said).otherwise(pl.col("error")),
        fingerprint=pl.when(stood_in).then(None).otherwise(pl.col("fingerprint")),
    ).drop("_last", "_were", "_doc")
