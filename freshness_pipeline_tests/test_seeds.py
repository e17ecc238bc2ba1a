from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from freshness_pipeline.science.normalize import normalize_url, normalize_url_column, url_authority
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.seeds import (
    merge_seeds,
    normalize_seed_urls,
    parse_seeds,
    plain_urls,
)
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_freshness

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_csv_with_bad_rows_keeps_the_good_ones():
    data = (
        b"url,value,url_class\n"
        b"https://A.example/x?utm_source=n,2.5,article\n"
        b"ftp://a.example/file,1,\n"
        b"not a url,1,\n"
        b"https://b.example/y,abc,\n"
        b"https://b.example/z,-1,\n"
        b"https://b.example/ok,,listing\n"
        b"https://a.example/x,3,article\n"
        b"https://c.example/\xff\xfe,1,\n"
    )
    parsed = parse_seeds(data)
    assert parsed.fatal is None
    assert sorted(parsed.rows["url"].to_list()) == ["https://a.example/x", "https://b.example/ok"]
    lines = {line for line, _ in parsed.errors}
    assert lines == {3, 4, 5, 6, 9}
    reasons = dict(parsed.errors)
    assert "scheme" in reasons[3]
    assert "not a number" in reasons[5]
    assert ">= 0" in reasons[6]
    assert "UTF-8" in reasons[9]
    assert parsed.duplicates == 1
    row = parsed.rows.filter(pl.col("url") == "https://a.example/x").row(0, named=True)
    assert row["value"] == 3.0 and row["host"] == "a.example" and row["url_class"] == "article"


def test_plain_text_and_fatal_cases():
    parsed = parse_seeds(b"https://a.example/\n\n# comment\nhttp://b.example:80/p#frag\n")
    assert parsed.rows["url"].to_list() == ["https://a.example/", "http://b.example/p"]
    assert parse_seeds(b"").fatal == "the seed file has no URLs"
    assert "no 'url' column" in parse_seeds(b"link,value\nhttps://a.example/,1\n").fatal
    assert parse_seeds(b"nope\n").fatal == "no valid URL in the seed file"
    # every URL valid, every value not: the URLs are not what was wrong
    bad_values = parse_seeds(b"url,value\nhttps://a.example/,lots\nhttps://b.example/,-1\n")
    assert bad_values.fatal == "no usable row in the seed file (2 with a bad value, listed above)"
    assert [line for line, _ in bad_values.errors] == [2, 3]
    long_line = b"https://a.example/" + b"a" * 1_000_000 + b"\nhttps://b.example/\n"
    parsed = parse_seeds(long_line)
    assert parsed.rows["url"].to_list() == ["https://b.example/"]
    assert parsed.errors[0][0] == 1 and "long" in parsed.errors[0][1]


def test_tab_and_semicolon_tables_are_read_by_their_header():
    """A spreadsheet export in many locales separates with ';' (or tabs): its header line was
    once skipped as a bad URL and every row seeded with its cells glued onto the URL."""
    for sep in (b"\t", b";"):
        data = (
            b"url" + sep + b"value" + sep + b"url_class\n"
            b"https://a.example/1" + sep + b"2.5" + sep + b"article\n"
            b'"https://a.example/2?q=x"' + sep + b'"1"' + sep + b"\n"
            b"https://a.example/3" + sep + b"abc" + sep + b"\n"
        )
        parsed = parse_seeds(data)
        assert parsed.fatal is None and parsed.notes == []
        rows = {r["url"]: (r["value"], r["url_class"]) for r in parsed.rows.iter_rows(named=True)}
        assert rows == {
            "https://a.example/1": (2.5, "article"),
            "https://a.example/2?q=x": (1.0, None),
        }
        assert [line for line, _ in parsed.errors] == [4]
    # a quoted cell may hold the separator; a URL with ';' in a plain list stays one URL
    quoted = parse_seeds(b'url;value\n"https://a.example/2?q=a;b";3\n')
    # (the query's ';' kept as the site wrote it: a separator to some servers)
    assert quoted.rows.select("url", "value").row(0) == ("https://a.example/2?q=a;b", 3.0)
    plain = parse_seeds(b"https://a.example/p;v=1\nhttps://a.example/q\n")
    assert plain.rows["url"].to_list() == ["https://a.example/p;v=1", "https://a.example/q"]


def test_unknown_columns_and_extra_cells_are_said_once():
    parsed = parse_seeds(
        b"url,value,url_clas\nhttps://a.example/1,1,news\nhttps://a.example/2,2,news,x\n"
        b"https://a.example/3,2,news,x,y\n"
    )
    assert parsed.rows.height == 3 and parsed.rows["url_class"].null_count() == 3
    assert len(parsed.notes) == 2, parsed.notes
    assert "'url_clas' ignored" in parsed.notes[0] and "url, value, url_class" in parsed.notes[0]
    assert parsed.notes[1].startswith("2 row(s) have more cells") and "line 3" in parsed.notes[1]
    assert parse_seeds(b"url,value,url_class\nhttps://a.example/1,1,news\n").notes == []
    assert parse_seeds(b"https://a.example/1\n").notes == []


def test_a_row_separated_otherwise_than_its_header_is_reported_not_seeded_as_one_url():
    """A ``url;value;url_class`` header over ``http://x/index.html,1,`` seeded the URL
    ``http://x/index.html,1,`` and said 0 rows skipped (found by a newcomer). A URL's own
    commas and semicolons, and a row of the URL alone, stay as they are."""
    parsed = parse_seeds(
        b"url;value;url_class\nhttps://a.example/index.html,1,\nhttps://a.example/b;2;news\n"
        b"https://a.example/c\nhttps://a.example/d,2,news\n"
    )
    assert parsed.rows["url"].to_list() == ["https://a.example/b", "https://a.example/c"]
    assert [n for n, _ in parsed.errors] == [2, 5], parsed.errors
    assert "ends in ',1,'" in parsed.errors[0][1] and "header uses ';'" in parsed.errors[0][1]
    reverse = parse_seeds(
        b"url,value\nhttps://a.example/x.html;2\nhttps://a.example/wiki/Paris,_Texas\n"
        b"https://a.example/p;jsessionid=AB12\n"
    )
    assert [n for n, _ in reverse.errors] == [2, 3], reverse.errors
    assert "a row separated by ';'" in reverse.errors[0][1]
    assert reverse.rows["url"].to_list() == ["https://a.example/p"]  # the session id stripped


def test_merge_is_idempotent_and_keeps_first_added():
    rows = parse_seeds(b"url,value\nhttps://a.example/1,1\nhttps://a.example/2,2\n").rows
    first = merge_seeds(tables.empty("seeds"), rows, added_at=T0)
    again = merge_seeds(first, rows, added_at=T0.replace(day=5))
    assert again.equals(first)
    updated_rows = parse_seeds(b"url,value\nhttps://a.example/1,9\n").rows
    updated = merge_seeds(first, updated_rows, added_at=T0.replace(day=9))
    row = updated.filter(pl.col("url") == "https://a.example/1").row(0, named=True)
    assert row["value"] == 9.0 and row["added_at"] == T0


def test_an_empty_value_or_class_keeps_what_was_given_before():
    """An empty ``value`` or ``url_class`` cell gives nothing: it overrode an explicit value
    with the default 1.0 (and a class with none), within a file and when seeding again."""
    parsed = parse_seeds(
        b"url,value,url_class\n"
        b"http://127.0.5.9/v?b=1&a=2,1000,product\n"
        b"http://127.0.5.9/v?a=2&b=1,,\n"
    )
    assert parsed.duplicates == 1
    assert parsed.rows.select("url", "value", "url_class").rows() == [
        ("http://127.0.5.9/v?a=2&b=1", 1000.0, "product")
    ]

    def seeded(seeds: pl.DataFrame) -> dict[str, tuple[float, str | None]]:
        return {r["url"]: (r["value"], r["url_class"]) for r in seeds.iter_rows(named=True)}

    table = b"url,value,url_class\n"
    first = merge_seeds(
        tables.empty("seeds"),
        parse_seeds(table + b"https://a.example/1,7,news\nhttps://a.example/2,,\n").rows,
        added_at=T0,
    )
    assert seeded(first) == {
        "https://a.example/1": (7.0, "news"),
        "https://a.example/2": (1.0, None),
    }
    for again in (
        table + b"https://a.example/1,,\nhttps://a.example/2,,\n",
        b"url\nhttps://a.example/1\nhttps://a.example/2\n",
        b"https://a.example/1\nhttps://a.example/2\n",
    ):
        merged = merge_seeds(first, parse_seeds(again).rows, added_at=T0.replace(day=5))
        assert merged.equals(first), again
    # a value or class given again still replaces the one before, 0 included
    later = merge_seeds(
        first, parse_seeds(table + b"https://a.example/1,0,\n").rows, added_at=T0.replace(day=9)
    )
    assert seeded(later)["https://a.example/1"] == (0.0, "news")
    later = merge_seeds(
        later, parse_seeds(table + b"https://a.example/1,,listing\n").rows, added_at=T0
    )
    assert seeded(later)["https://a.example/1"] == (0.0, "listing")


def test_seed_command_exit_codes_and_messages(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from freshness_pipeline.app.cli import app
    from freshness_pipeline.warehouse.storage import Warehouse

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = tmp_path / "home"
    runner = CliRunner()

    def seed(content: bytes | None, name: str = "seeds.csv"):
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        return runner.invoke(app, ["seed", str(path), "--home", str(home)])

    missing = seed(None, "nope.csv")
    assert missing.exit_code == 2 and "does not exist" in missing.output
    empty = seed(b"")
    assert empty.exit_code == 2, empty.output
    no_column = seed(b"link,value\nhttps://a.example/,1\n", "nocol.csv")
    assert no_column.exit_code == 2 and "no 'url' column" in no_column.output
    mixed = seed(
        b"url,value\nhttps://a.example/,1\nmailto:x@y,1\nhttps://b.example/,-2\n", "mixed.csv"
    )
    assert mixed.exit_code == 0, mixed.output
    assert ":3: skipped" in mixed.output and ":4: skipped" in mixed.output
    assert Warehouse(home).read("seeds")["url"].to_list() == ["https://a.example/"]
    again = seed(b"url,value\nhttps://a.example/,1\n", "again.csv")
    assert again.exit_code == 0 and "0 new partitions" in again.output
    typo = seed(b"url,vaule\nhttps://a.example/,1\n", "typo.csv")
    assert typo.exit_code == 0 and "'vaule' ignored" in typo.output
    assert Warehouse(home).read("seeds").height == 1


def test_a_cycle_for_a_host_never_seeded_is_a_usage_error(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("https://a.example/\nhttp://b.example:8080/x\n")
    assert run_freshness("seed", str(seeds), home=tmp_path).returncode == 0
    plan = ("cycle", "--dry-run", "--now", "2026-11-30T12:00:00Z")
    # a key, or a URL or name in another case, with the default port (what the keys drop)
    for named in ("a.example", "https://A.example:443/any/page", "A.EXAMPLE"):
        planned = run_freshness(*plan, "--host", named, home=tmp_path)
        assert planned.returncode == 0, planned.stderr
        assert "1 planned" in planned.stdout and "sent" not in planned.stdout  # nothing was
    typo = run_freshness(*plan, "--host", "nosuch.example", home=tmp_path)
    assert typo.returncode == 2, typo.stderr  # bad arguments, not a failed pipeline
    assert "unknown host(s): nosuch.example" in typo.stderr and "Traceback" not in typo.stderr
    # a host named without its port: the seeded key is suggested
    portless = run_freshness(*plan, "--host", "b.example", home=tmp_path)
    assert portless.returncode == 2, portless.stderr
    assert "b.example (did you mean b.example:8080?)" in portless.stderr


# ------------------------------------------------------------------ columnar parsing


def test_quoted_cells_line_endings_and_comments_keep_their_line_numbers():
    data = (
        b"\xef\xbb\xbfurl,value,url_class\r\n"
        b'"https://a.example/x,y",2,article\r\n'
        b"# a comment\r"
        b"https://a.example/plain,1_000,\n"
        b"\n"
        b'https://b.example/q,"3.5","listing"\n'
        b"https://b.example/only-url\n"
        b",4,\n"
    )
    parsed = parse_seeds(data)
    rows = {r["url"]: r for r in parsed.rows.iter_rows(named=True)}
    assert (
        rows["https://a.example/x,y"]["line"] == 2 and rows["https://a.example/x,y"]["value"] == 2
    )
    assert rows["https://a.example/plain"]["line"] == 4
    assert rows["https://a.example/plain"]["value"] == 1000.0  # what Python's float() reads
    assert rows["https://b.example/q"]["url_class"] == "listing"
    # not given: merge_seeds makes it 1.0 unless the URL has a value already
    assert rows["https://b.example/only-url"]["value"] is None
    assert parsed.errors == [(8, "no url in this row")]


def test_a_url_only_header_keeps_each_line_whole():
    """Under a header naming only ``url``, a line is one URL: a comma in it was taken for a
    separator, and ``/wiki/Paris,_Texas`` was seeded as ``/wiki/Paris`` with only a note about
    extra cells."""
    data = (
        b"\xef\xbb\xbfURL\r\n"
        b"http://127.0.5.9/wiki/Paris,_Texas\r\n"
        b"  https://a.example/list?ids=1,2,3  \r\n"
        b"# a comment\r\n"
        b'"https://a.example/quoted,cell"\r\n'
        b'https://a.example/"a",b\r\n'
        b'""\r\n'
        b"https://a.example/p;v=1,2\r\n"
    )
    parsed = parse_seeds(data)
    rows = dict(parsed.rows.select("line", "url").iter_rows())
    assert rows == {
        2: "http://127.0.5.9/wiki/Paris,_Texas",
        3: normalize_url("https://a.example/list?ids=1,2,3"),
        5: "https://a.example/quoted,cell",
        6: normalize_url('https://a.example/"a",b'),
        8: normalize_url("https://a.example/p;v=1,2"),
    }
    assert parsed.notes == []
    assert parsed.errors == [(7, "no url in this row")]
    # a header with other columns still splits at its separator
    two = parse_seeds(b"url,value\nhttp://127.0.5.9/wiki/Paris,2\n")
    assert two.rows.select("url", "value").row(0) == ("http://127.0.5.9/wiki/Paris", 2.0)


label = st.from_regex(r"[a-z0-9_]([a-z0-9_-]{0,70}[a-z0-9_])?", fullmatch=True)
hosts = st.lists(label, min_size=1, max_size=4).map(".".join)
ports = st.one_of(st.none(), st.integers(0, 70_000).map(str), st.sampled_from(["080", "443", "80"]))
paths = st.lists(st.text(alphabet="aZ09-_~!$&'()*+,=:@.%;é /", max_size=6), max_size=4).map(
    lambda parts: "/" + "/".join(parts)
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["http", "https", "HTTP"]),
    hosts,
    ports,
    paths,
    st.sampled_from(["", "?a=1", "#f"]),
)
def test_urls_taken_as_already_normal_are_what_normalize_url_makes_of_them(
    scheme, host, port, path, tail
):
    url = f"{scheme}://{host}{'' if port is None else ':' + port}{path}{tail}"
    plain = plain_urls(pl.Series([url])).row(0, named=True)
    if plain["url"] is None:
        return  # left to normalize_url_column
    assert normalize_url(url) == url
    assert url_authority(url) == plain["host"]


def test_seed_normalization_equals_the_normalizer_on_a_mixed_column():
    urls = pl.Series(
        [
            "http://127.64.0.1:8080/p/12",
            "https://Shop.example/a?utm_source=x&b=2",
            "http://a.example:80/",
            "http://a.example/./x",
            "https://a.example/r%C3%A9sum%C3%A9",
            "mailto:x@y",
            "http://a.example",
            "https://xn--bcher-kva.example/p",
        ]
    )
    assert_frame_equal(normalize_seed_urls(urls), normalize_url_column(urls))


def test_seeding_leaves_each_seeds_canonical_form_for_the_first_cycle(tmp_path):
    from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle

    home = tmp_path / "home"
    (home).mkdir()
    (home / "freshness.toml").write_text('[hosts."b.example"]\nstrip_params = ["sid"]\n')
    load_seeds(
        home, b"url\nhttps://a.example/1\nhttps://a.example/2\nhttps://b.example/1\n", added_at=T0
    )
    wh = Warehouse(home)
    cache = wh.read("url_canonical")
    assert sorted(cache["url"].to_list()) == ["https://a.example/1", "https://a.example/2"]
    assert (cache["url"] == cache["canonical"]).all()
    # Seeding again keeps what the cache already knew and adds the new seeds.
    load_seeds(home, b"url\nhttps://a.example/3\n", added_at=T0)
    assert wh.read("url_canonical", ["a.example"]).height == 3
    outcome = run_cycle(home, T0, dry_run=True)
    assert outcome.planned == 4
    candidates = wh.read("url_candidates")
    assert candidates.height == 4
    # Only b.example's seed, normalized under its own strip_params, was normalized again.
    (observed,) = (
        open_instance(home).fetch_observations(dg.AssetKey("url_candidates"), limit=5).records
    )
    assert observed.asset_observation.metadata["urls_normalized_afresh"].value == 1
