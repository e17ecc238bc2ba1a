"""`freshness diff` and `freshness export` on a home built by real cycles over the synthetic web:
a page edited twice, a page whose title changes, a page that goes gone (410) and a page born
after the seeds, so that every answer of the two commands is known in advance."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from freshness_pipeline.app.cli import app
from freshness_pipeline.synthweb import DEFAULT_START, Page, SiteSpec, SyntheticWeb, World
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import crawl
from freshness_pipeline_tests.support import (
    readme_history_of,
    readme_sql_blocks,
    run_into_closed_pipe,
)

S = DEFAULT_START
HOUR = timedelta(hours=1)
T0, T1, T2 = S, S + 6 * HOUR, S + 12 * HOUR  # the three cycles (crawls.crawl: 6 h apart)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RETITLED = "/articles/storm"


class RetitlingWorld(World):
    """The synthetic web, except that one page's <title> says it was updated once its content
    changed: a change of a field other than the text."""

    def render(self, page, t, *, volatile=None):
        html = super().render(page, t, volatile=volatile)
        if page.path == RETITLED and page.version_at(t) > 0:
            html = re.sub(r"<title>(.*?)</title>", r"<title>\1 (updated)</title>", html)
        return html


def _page(pid, site, path, *, changes=(), born=None, dies=None):
    ts = S.timestamp()
    return Page(
        page_id=pid,
        site=site,
        path=path,
        url_class="article",
        value=1.0,
        rate=0.5,
        change_times=np.array([ts + h * 3600 for h in changes], dtype=float),
        born_at=ts + born * 3600 if born is not None else ts - 90 * 86_400,
        dies_at=ts + dies * 3600 if dies is not None else float("inf"),
        death_status=410,
        disallowed=False,
    )


def _world() -> World:
    pages = [
        _page(0, "shop", "/products/lamp", changes=(3, 9)),  # versions at T0, T1, T2
        _page(1, "shop", "/products/chair", dies=9),  # 410 from T2 on
        _page(2, "shop", "/about"),  # one version
        _page(3, "shop", "/products/desk", born=3),  # not seeded: found in the sitemap
        _page(4, "news", RETITLED, changes=(3,)),  # text and title change by T1
        _page(5, "news", "/articles/harbour"),
    ]
    sites = [SiteSpec("shop", "honest", 4), SiteSpec("news", "no_validators", 2)]
    return RetitlingWorld(seed=5, start=S, horizon_days=1.0, sites=sites, pages=pages)


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    workdir = tmp_path_factory.mktemp("copy")
    home = workdir / "home"
    with SyntheticWeb(_world()) as web:
        for _ in crawl(web, home, workdir, 3):
            pass
        urls = {page.path: web.url(page) for page in web.world.pages}
    return {"home": home, "url": urls}


def invoke(*args: str):
    result = CliRunner().invoke(
        app, list(args), env={"FORCE_COLOR": None, "TTY_COMPATIBLE": None, "NO_COLOR": None}
    )
    # an exit code, never a traceback
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def versions(home: Path) -> pl.DataFrame:
    return Warehouse(home).read("page_versions").sort("url", "observed_at")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------ the home


def test_the_home_holds_the_history_the_web_was_built_to_give(copy):
    """What the rest of this file relies on, checked against the tables the cycles wrote."""
    url = copy["url"]
    got = {
        (row["url"], row["observed_at"], row["outcome"])
        for row in versions(copy["home"]).iter_rows(named=True)
    }
    lamp, storm = url["/products/lamp"], url[RETITLED]
    assert {(lamp, T0, "new"), (lamp, T1, "changed"), (lamp, T2, "changed")} <= got
    assert (storm, T1, "changed") in got and (url["/products/desk"], T1, "new") in got
    assert not any(u == url["/about"] and t > T0 for u, t, _ in got)
    state = Warehouse(copy["home"]).read("url_state")
    gone = state.filter(pl.col("status") == "gone")
    assert gone.select("url", "gone_at").rows() == [(url["/products/chair"], T2)]


# ------------------------------------------------------------------------------ diff


def _text(home: Path, url: str, at: datetime) -> list[str]:
    frame = versions(home).filter((pl.col("url") == url) & (pl.col("observed_at") == at))
    return frame["text"][0].splitlines()


def test_diff_shows_the_lines_removed_and_added_by_the_newest_change(copy):
    home, lamp = copy["home"], copy["url"]["/products/lamp"]
    done = invoke("diff", lamp, "--home", str(home))
    assert done.exit_code == 0, done.output
    out = done.stdout.splitlines()
    before, after = _text(home, lamp, T1), _text(home, lamp, T2)
    removed = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    assert removed and added
    assert f"--- {lamp} text @ {iso(T1)} (changed)" in out
    assert f"+++ {lamp} text @ {iso(T2)} (changed)" in out
    assert {line[1:] for line in out if line.startswith("-") and not line.startswith("---")} == set(
        removed
    )
    assert {line[1:] for line in out if line.startswith("+") and not line.startswith("+++")} == set(
        added
    )
    assert any(line.startswith("@@ ") for line in out)
    # the title did not change: no fields section
    assert not any(" fields @ " in line for line in out)


def test_diff_shows_a_changed_field_with_its_old_and_new_value(copy):
    home, storm = copy["home"], copy["url"][RETITLED]
    done = invoke("diff", storm, "--home", str(home))
    assert done.exit_code == 0, done.output
    out = done.stdout.splitlines()
    title = "Article storm - news"
    assert out[0] == f"--- {storm} fields @ {iso(T0)} (new)"
    assert out[1] == f"+++ {storm} fields @ {iso(T1)} (changed)"
    assert f'-title: "{title}"' in out and f'+title: "{title} (updated)"' in out
    assert f"--- {storm} text @ {iso(T0)} (new)" in out


@pytest.mark.parametrize(
    ("at", "old", "new"),
    [
        (T2 - HOUR, T0, T1),  # the newest version at or before it is T1's
        (T1, T0, T1),  # at is inclusive
        (T2, T1, T2),
        (T2 + 30 * HOUR, T1, T2),
    ],
)
def test_diff_at_picks_the_version_at_or_before_it_and_the_one_before(copy, at, old, new):
    lamp = copy["url"]["/products/lamp"]
    done = invoke("diff", lamp, "--at", at.isoformat(), "--home", str(copy["home"]))
    assert done.exit_code == 0, done.output
    assert f"--- {lamp} text @ {iso(old)}" in done.stdout
    assert f"+++ {lamp} text @ {iso(new)}" in done.stdout
    removed = [line for line in _text(copy["home"], lamp, old) if line.startswith("Revision")]
    assert f"-{removed[0]}" in done.stdout.splitlines()


def test_a_page_with_one_version_is_shown_all_added_with_a_note(copy):
    home, about, lamp = copy["home"], copy["url"]["/about"], copy["url"]["/products/lamp"]
    for args, url in ((["diff", about], about), (["diff", lamp, "--at", iso(T1 - HOUR)], lamp)):
        done = invoke(*args, "--home", str(home))
        assert done.exit_code == 0, done.output
        out = done.stdout.splitlines()
        assert out[0] == "--- /dev/null"
        assert f"+++ {url} text @ {iso(T0)} (new)" in out
        text_from = out.index(f"+++ {url} text @ {iso(T0)} (new)") + 2  # past its @@ line
        assert [line[1:] for line in out[text_from:]] == _text(home, url, T0)
        assert all(line.startswith("+") for line in out[text_from:])
        assert "only one version" in done.stderr and "shown as all added" in done.stderr


def test_diff_is_plain_when_piped_and_coloured_on_a_terminal(copy):
    home, lamp = copy["home"], copy["url"]["/products/lamp"]
    piped = invoke("diff", lamp, "--home", str(home))
    assert piped.exit_code == 0 and piped.stdout
    assert "\x1b" not in piped.stdout
    script = Path(sys.executable).with_name("freshness")
    command = (
        [str(script)] if script.exists() else [sys.executable, "-m", "freshness_pipeline.app.cli"]
    )
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "400"}
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)
    shown = _on_a_terminal([*command, "diff", lamp, "--home", str(home)], env)
    assert "\x1b[" in shown  # rich coloured it
    plain = ANSI.sub("", shown).replace("\r\n", "\n")
    assert plain.splitlines() == piped.stdout.splitlines()


def _on_a_terminal(command: list[str], env: dict[str, str]) -> str:
    """What ``command`` writes to a pseudo-terminal: a real tty, so the program sees one."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                raise AssertionError("no output from the command on the terminal")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        assert proc.wait(60) == 0
    return b"".join(chunks).decode()


def test_diff_errors_exit_2_naming_the_problem(copy):
    home, url = str(copy["home"]), copy["url"]
    unknown = url["/products/lamp"].replace("/products/lamp", "/products/sofa")
    cases = [
        (["diff", unknown], [unknown, "no version", "not a URL this home crawls"]),
        (
            ["diff", url["/products/lamp"], "--at", "2024-12-31T00:00:00Z"],
            [
                "no version",
                "at or before --at 2024-12-31T00:00:00Z",
                f"first was observed at {iso(T0)}",
            ],
        ),
        (
            ["diff", url["/products/lamp"], "--at", "yesterday"],
            ["--at 'yesterday' is not an ISO 8601 time"],
        ),
        (["diff", "ftp://example.com/x"], ["'ftp://example.com/x' is not a page address"]),
        (["diff", url["/about"], "--home", str(Path(home) / "nowhere")], ["no warehouse in"]),
    ]
    for args, words in cases:
        done = invoke(*args, *(["--home", home] if "--home" not in args else []))
        assert done.exit_code == 2, (args, done.output)
        assert not done.stdout
        message = " ".join(done.stderr.split())
        for word in words:
            assert word in message, (args, message)


def test_diff_finds_a_page_typed_with_a_tracking_parameter(copy):
    lamp = copy["url"]["/products/lamp"]
    done = invoke("diff", lamp + "?utm_source=mail", "--home", str(copy["home"]))
    assert done.exit_code == 0, done.output
    assert f"+++ {lamp} text @ {iso(T2)} (changed)" in done.stdout


# ------------------------------------------------------------------------------ export


def export_rows(home: Path, *args: str, fmt: str = "jsonl") -> list[dict]:
    """The export's rows as dicts of text (times as ISO strings, fields as an object), whatever
    the format, so that the formats can be compared."""
    done = invoke("export", *args, "--format", fmt, "--home", str(home))
    assert done.exit_code == 0, done.output
    data = done.stdout_bytes
    if fmt == "jsonl":
        return [json.loads(line) for line in data.decode().splitlines()]
    rows: list[dict]
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(data.decode(), newline="")))
    else:
        frame = pl.read_parquet(io.BytesIO(data))
        assert frame.schema["observed_at"] == pl.Datetime("us", "UTC")
        assert frame.schema["gone_at"] == pl.Datetime("us", "UTC")
        rows = [
            {k: (iso(v) if isinstance(v, datetime) else v) for k, v in row.items()}
            for row in frame.iter_rows(named=True)
        ]
    out = []
    for row in rows:
        if row["status"] == "gone":
            out.append({"url": row["url"], "status": "gone", "gone_at": row["gone_at"]})
        else:
            assert not row["status"] and not row["gone_at"]
            keep = ("url", "observed_at", "outcome", "title", "text", "fields", "fingerprint")
            out.append({k: row[k] for k in keep} | {"fields": json.loads(row["fields"])})
    return out


def newest(home: Path, url: str, since: datetime, until: datetime | None) -> dict:
    frame = versions(home).filter(
        (pl.col("url") == url)
        & (pl.col("observed_at") >= since)
        & ((pl.col("observed_at") < until) if until else pl.lit(True))
    )
    row = frame.sort("observed_at").row(-1, named=True)
    return {
        "url": url,
        "observed_at": iso(row["observed_at"]),
        "outcome": row["outcome"],
        "title": row["title"],
        "text": row["text"],
        "fields": json.loads(row["fields"]),
        "fingerprint": row["fingerprint"],
    }


WINDOWS = [
    # (since, until, paths with their newest version in the window, paths gone in the window)
    (
        T0,
        None,
        ["/products/lamp", "/about", "/products/desk", RETITLED, "/articles/harbour"],
        ["/products/chair"],
    ),
    (T1, T2, ["/products/lamp", "/products/desk", RETITLED], []),  # the gone one is at T2
    (T0, T1, ["/products/lamp", "/products/chair", "/about", RETITLED, "/articles/harbour"], []),
    (T2, None, ["/products/lamp"], ["/products/chair"]),
    (T1 + HOUR, None, ["/products/lamp"], ["/products/chair"]),
    (T2 + HOUR, None, [], []),
]


@pytest.mark.parametrize(("since", "until", "changed", "gone"), WINDOWS)
def test_export_has_the_newest_version_of_each_changed_url_and_gone_tombstones(
    copy, since, until, changed, gone
):
    home, url = copy["home"], copy["url"]
    args = ["--since", since.isoformat()] + (["--until", until.isoformat()] if until else [])
    rows = export_rows(home, *args)
    by_url = {row["url"]: row for row in rows}
    assert len(by_url) == len(rows)  # one row per URL
    assert set(by_url) == {url[p] for p in changed + gone}
    for path in changed:
        assert list(by_url[url[path]]) == [
            "url",
            "observed_at",
            "outcome",
            "title",
            "text",
            "fields",
            "fingerprint",
        ]
        assert by_url[url[path]] == newest(home, url[path], since, until)
        assert isinstance(by_url[url[path]]["fields"], dict)
    for path in gone:
        assert by_url[url[path]] == {"url": url[path], "status": "gone", "gone_at": iso(T2)}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_parquet_and_csv_carry_the_same_rows_as_json_lines(copy, fmt):
    home = copy["home"]
    for window in (["--since", iso(T0)], ["--since", iso(T1), "--until", iso(T2)]):
        expected = sorted(export_rows(home, *window), key=lambda r: r["url"])
        got = sorted(export_rows(home, *window, fmt=fmt), key=lambda r: r["url"])
        assert got == expected and expected


def test_export_writes_a_file_by_renaming_a_complete_one(copy, tmp_path):
    home = copy["home"]
    out = tmp_path / "copy.jsonl"
    out.write_text("the previous export\n")
    earlier = tmp_path / "earlier.jsonl"
    os.link(out, earlier)  # a reader holding the old file
    done = invoke("export", "--since", iso(T0), "--out", str(out), "--home", str(home))
    assert done.exit_code == 0, done.output
    assert not done.stdout  # the data went to the file
    assert "exported 6 URLs (5 versions, 1 gone)" in done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_url = sorted(export_rows(home, "--since", iso(T0)), key=lambda r: r["url"])
    assert sorted(rows, key=lambda r: r["url"]) == by_url
    # replaced by a rename, not rewritten in place: the old file is whole where it was held
    assert earlier.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.jsonl", "earlier.jsonl"]
    # parquet too, through a temporary name beside it
    target = tmp_path / "copy.parquet"
    done = invoke(
        "export",
        "--since",
        iso(T0),
        "--format",
        "parquet",
        "--out",
        str(target),
        "--home",
        str(home),
    )
    assert done.exit_code == 0, done.output
    assert pl.read_parquet(target).height == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "copy.jsonl",
        "copy.parquet",
        "earlier.jsonl",
    ]


def test_a_failed_export_leaves_the_previous_file_and_no_temporary_one(copy, tmp_path):
    """A page_versions file of the window is corrupt: the export fails half-way (exit 1, the
    reason on stderr) and the file it was to replace is untouched."""
    home = tmp_path / "home"
    shutil.copytree(copy["home"] / "warehouse", home / "warehouse")
    damaged = sorted((home / "warehouse" / "page_versions").glob("host=*/cycle-*.parquet"))[-1]
    damaged.write_bytes(damaged.read_bytes()[:100])
    out = tmp_path / "out" / "copy.jsonl"
    out.parent.mkdir()
    out.write_text("the previous export\n")
    for fmt in ("jsonl", "parquet"):
        done = invoke(
            "export", "--since", iso(T0), "--format", fmt, "--out", str(out), "--home", str(home)
        )
        assert done.exit_code == 1, done.output
        assert "export failed" in done.stderr
        assert out.read_text() == "the previous export\n"
        assert [p.name for p in out.parent.iterdir()] == ["copy.jsonl"]


def test_export_errors_exit_2_naming_the_problem(copy, tmp_path):
    home = str(copy["home"])
    cases = [
        (["--since", "last week"], ["--since 'last week' is not an ISO 8601 time"]),
        (["--since", iso(T0), "--until", "soon"], ["--until 'soon' is not an ISO 8601 time"]),
        (
            ["--since", iso(T1), "--until", iso(T0)],
            [f"--until {iso(T0)} is before --since {iso(T1)}"],
        ),
        (["--since", iso(T0), "--format", "xml"], ["'xml' is not one of"]),
        (
            ["--since", iso(T0), "--out", str(tmp_path / "missing" / "x.jsonl")],
            [f"--out {tmp_path / 'missing' / 'x.jsonl'}", "does not exist"],
        ),
        (["--since", iso(T0), "--out", str(tmp_path)], [f"--out {tmp_path} is a folder"]),
        ([], ["Missing option '--since'"]),
    ]
    for args, words in cases:
        done = invoke("export", *args, "--home", home)
        assert done.exit_code == 2, (args, done.output)
        assert not done.stdout
        message = " ".join(done.stderr.replace("│", " ").split())
        for word in words:
            assert word in message, (args, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written anywhere


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_reader_that_stops_early_ends_the_export_quietly(copy, fmt):
    """`freshness export ... | head`: the reader goes away (here before the first byte); polars'
    writers say so with a plain OSError, which once printed "export failed: Broken pipe", and
    then exited 1, which a harness under pipefail read as a failed export (a contract audit):
    the reader has what it asked for."""
    done = run_into_closed_pipe(
        "export", "--since", iso(T0), "--format", fmt, "--home", str(copy["home"])
    )
    assert done.returncode == 0
    assert done.stderr == "", done.stderr  # nothing to report: the reader asked for no more


def test_an_empty_window_is_an_empty_export_not_an_error(copy):
    done = invoke("export", "--since", iso(T1), "--until", iso(T1), "--home", str(copy["home"]))
    assert done.exit_code == 0, done.output
    assert done.stdout == "" and "exported 0 URLs" in done.stderr


# ------------------------------------------------------------------------------ README


def _crawled_copy_examples() -> list[str]:
    return [b for b in readme_sql_blocks() if re.search(r"\b(page_versions|changes)\b", b)]


def test_the_readme_crawled_copy_queries_answer_on_a_crawled_home(copy):
    """The README's queries over page_versions and changes, on a home where titles and texts
    changed (test_end_to_end runs every README query on a bigger home; this one knows the
    answers)."""
    home, url = copy["home"], copy["url"]
    Warehouse(home).ensure_views()
    blocks = _crawled_copy_examples()
    assert len(blocks) >= 4
    con = duckdb.connect(str(home / "freshness.duckdb"), read_only=True)
    try:
        # every example runs here; the one-page history asks about this home's page
        history = next(b for b in blocks if "FROM page_versions" in b and "LIKE" in b)
        results = {
            block: con.sql(
                readme_history_of(url["/products/lamp"]) if block == history else block
            ).pl()
            for block in blocks
        }
    finally:
        con.close()
    since = results[next(b for b in blocks if "changed_at >= TIMESTAMPTZ" in b)]
    assert sorted(since["url"].to_list()) == sorted([url["/products/lamp"]] * 2 + [url[RETITLED]])
    titles = results[next(b for b in blocks if "'$.title'" in b)]
    assert titles.rows() == [
        (url[RETITLED], T1, "Article storm - news", "Article storm - news (updated)")
    ]
    prices = results[next(b for b in blocks if "'$.price'" in b)]
    assert prices.height == 0 and "old_price" in prices.columns  # no price field configured
    steps = results[history]
    assert steps["observed_at"].to_list() == [T0, T1, T2]
    assert steps["outcome"].to_list() == ["new", "changed", "changed"]


def test_a_pages_control_characters_reach_a_terminal_escaped() -> None:
    """A crawled page's ESC, BEL and NUL went to the terminal as they were: a page could
    recolour, retitle or write the clipboard of whoever ran `freshness diff` (exploratory
    run). Shown escaped on a terminal; a pipe still gets the text as it is, for patch."""
    import io
    from datetime import UTC, datetime

    from rich.console import Console

    from freshness_pipeline.app.crawled_copy import DiffLine, Version, VersionDiff, print_diff

    version = Version(datetime(2026, 1, 1, tzinfo=UTC), "new", None, "x", {}, None)
    hostile = "+\x1b]0;owned\x07\x1b[31mred\x00\tend\x9b"
    diff = VersionDiff("http://a.test/", version, None, [DiffLine("added", hostile)])
    screen = io.StringIO()
    print_diff(diff, Console(file=screen, force_terminal=True, color_system=None, width=200))
    shown = screen.getvalue()
    assert not any(c in shown for c in "\x1b\x07\x00\x9b")
    assert shown.startswith("+\\x1b]0;owned\\x07\\x1b[31mred\\x00") and "end\\x9b" in shown
    pipe = io.StringIO()
    print_diff(diff, Console(file=pipe, force_terminal=False))
    assert pipe.getvalue() == hostile + "\n"


def test_a_diff_of_bytes_says_they_changed_and_where_the_archive_holds_them(tmp_path) -> None:
    """A PDF's two versions were diffed as "no difference in fields or text", although the
    changes view had the change (found by an exploratory run): content that is not text has
    no text to compare, and the diff says so and where its bytes are."""
    from freshness_pipeline.warehouse import tables

    wh = Warehouse(tmp_path)
    url = "http://files.example/report.pdf"
    rows = pl.DataFrame(
        {
            "url": [url, url],
            "host": ["files.example"] * 2,
            "observed_at": [T0, T1],
            "outcome": ["new", "changed"],
            "fingerprint": ["aaaa", "bbbb"],
            "fields": ["{}", "{}"],
            "warc_filename": ["c1.warc.gz", "c2.warc.gz"],
            "warc_offset": [0, 512],
        },
        schema_overrides={"observed_at": tables.UTC_TIME},
    )
    wh.write_partition("page_versions", "files.example", tables.conform("page_versions", rows))
    result = invoke("diff", url, "--home", str(tmp_path))
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "is not text (its versions are its bytes): they changed between" in said
    assert "archive/c1.warc.gz at offset 0" in said and "archive/c2.warc.gz at offset 512" in said
    assert "no difference" not in said


def test_an_export_past_a_running_cycles_time_is_refused(copy, tmp_path) -> None:
    """A cycle dates its rows with its now and writes them at its end: a window exported while
    it ran, ending after its now, missed its versions, and so did the next window (found by an
    exploratory run). Such an export says so and exits 2; one that ends at the running cycle's
    time goes ahead."""
    home = copy["home"]
    running = T2 + 6 * HOUR
    with Warehouse(home).exclusive(f"cycle {running.isoformat()}"):
        refused = invoke("export", "--since", iso(T0), "--home", str(home), "--out", "-")
        ended = invoke(
            "export", "--since", iso(T0), "--until", iso(T2 + 7 * HOUR), "--home", str(home)
        )
        allowed = invoke("export", "--since", iso(T0), "--until", iso(running), "--home", str(home))
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and ended.exit_code == 2, refused.output
    assert f"a cycle as of {iso(running)} is running" in said
    assert f"--until {iso(running)}" in said
    assert allowed.exit_code == 0, allowed.output
    assert invoke("export", "--since", iso(T0), "--home", str(home)).exit_code == 0  # ended
