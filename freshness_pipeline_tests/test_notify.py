"""Change notifications against real parts: a home built by real cycles over the synthetic web
(a shop whose product prices move, a news site whose article is edited), Apprise's json://
target and a webhook receiver on loopback recording what is posted to it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.app.undo import undo_cycle
from freshness_pipeline.config import ConfigError, NotifyConfig, load_config
from freshness_pipeline.defs.notify import (
    MAX_BODY_CHARS,
    NOTIFY_READ_TIMEOUT_S,
    build_message,
    notify_changes,
)
from freshness_pipeline.defs.sensors import change_notifications_sensor
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, World
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import hand_page

S = DEFAULT_START
HOUR = timedelta(hours=1)
T0, T1, T2 = S, S + 6 * HOUR, S + 12 * HOUR
FIELDS = '[url_classes.product.fields]\nprice = ".price"\n'


def _world() -> World:
    pages = [
        hand_page(0, "/products/lamp", "product", (3, 9), site="shop"),  # new price at T1 and at T2
        hand_page(1, "/products/desk", "product", (3,), site="shop"),  # new price at T1
        hand_page(2, "/articles/storm", "article", (3,), site="news"),  # edited at T1
        hand_page(3, "/about", "article", (), site="news"),
    ]
    sites = [SiteSpec("shop", "honest", 2), SiteSpec("news", "honest", 2)]
    return World(seed=5, start=S, horizon_days=1.0, sites=sites, pages=pages)


class Receiver:
    """A webhook on an ephemeral loopback port: records every JSON body posted and answers
    ``status`` (500 plays a notifier that is down) after ``delay`` seconds (a slow one)."""

    def __init__(self, port: int = 0) -> None:
        self.posts: list[dict] = []
        self.status = 200
        self.delay = 0.0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if receiver.status == 200:
                    receiver.posts.append({"path": self.path, **body})
                time.sleep(receiver.delay)
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"json://127.0.0.1:{self.server.server_port}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A home after the T0 and T1 cycles (T1: three changes on two hosts), and the web kept
    up so that a test can run the T2 cycle on its own copy."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    workdir = tmp_path_factory.mktemp("notify")
    home = workdir / "home"
    world = _world()
    with SyntheticWeb(world) as web:
        web.set_now(S)
        load_seeds(
            home, web.seeds_csv(workdir / "seeds.csv", variants=False).read_bytes(), added_at=S
        )
        (home / "freshness.toml").write_text(FIELDS)
        for now in (T0, T1):
            web.set_now(now)
            run_cycle(home, now, budget=1000)
        urls = {p.path: web.url(p) for p in world.pages}
        yield {"home": home, "web": web, "url": urls, "world": world}


@pytest.fixture
def home(site, tmp_path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(site["home"], copy)
    return copy


def _cycle(site, home: Path, now) -> None:
    site["web"].set_now(now)
    run_cycle(home, now, budget=1000)


def test_one_message_per_batch_then_nothing_until_the_next_cycle(site, home, receiver):
    wh = Warehouse(home)
    config = NotifyConfig(urls=(receiver.url,))
    first = notify_changes(wh, config, None)
    assert first.ok and first.sent == 3
    (post,) = receiver.posts
    assert post["path"] == "/hook"
    assert post["title"] == "3 pages changed on 2 hosts"
    body = post["message"]
    lamp, desk, storm = (
        site["url"][p] for p in ("/products/lamp", "/products/desk", "/articles/storm")
    )
    for url in (lamp, desk, storm):
        assert body.count(url + "\n") == 1
    world, pages = site["world"], {p.path: p for p in site["world"].pages}
    old, new = (world.price(pages["/products/lamp"], v) for v in (0, 1))
    assert f"price: ${old} -> ${new}" in body
    assert f"changed at {T1.isoformat()}" in body
    assert "lines" in body and "+" in body

    again = notify_changes(wh, config, first.cursor)
    assert again.sent == 0 and len(receiver.posts) == 1
    assert again.reason == "no new changes to notify"

    _cycle(site, home, T2)
    third = notify_changes(wh, config, again.cursor)
    assert third.sent == 1 and len(receiver.posts) == 2
    assert receiver.posts[1]["title"] == "1 page changed on 1 host"
    assert lamp in receiver.posts[1]["message"] and storm not in receiver.posts[1]["message"]


def test_after_an_undone_cycle_dated_a_year_ahead_the_next_changes_are_sent(site, home, receiver):
    """The cursor had reached the mistaken cycle's time, a year ahead: without stepping back
    with the undo, nothing after it was sent until that year had passed."""
    wh = Warehouse(home)
    config = NotifyConfig(urls=(receiver.url,))
    first = notify_changes(wh, config, None)
    assert first.sent == 3
    mistyped = T2 + timedelta(days=365)
    site["web"].set_now(T2)
    run_cycle(home, mistyped, budget=1000, undo_point=True)  # the lamp's T2 price, dated wrong
    wrong = notify_changes(wh, config, first.cursor)
    assert wrong.sent == 1 and mistyped.isoformat() in receiver.posts[-1]["message"]
    undo_cycle(home)

    _cycle(site, home, T2)
    right = notify_changes(wh, config, wrong.cursor)
    assert right.sent == 1, right.reason
    assert f"changed at {T2.isoformat()}" in receiver.posts[-1]["message"]
    assert notify_changes(wh, config, right.cursor).sent == 0  # stepped back once, not again


def test_several_cycles_at_once_are_one_batch(site, home, receiver):
    _cycle(site, home, T2)
    out = notify_changes(Warehouse(home), NotifyConfig(urls=(receiver.url,)), None)
    (post,) = receiver.posts
    assert out.sent == 4 and post["title"] == "3 pages changed on 2 hosts"
    lamp = site["url"]["/products/lamp"]
    assert post["message"].count(lamp + "\n") == 2  # its T1 and its T2 change


def test_a_failing_target_holds_its_changes_and_gets_them_once_when_back(home, receiver):
    down = Receiver()
    down.status = 500
    try:
        wh = Warehouse(home)
        config = NotifyConfig(urls=(receiver.url, down.url))
        first = notify_changes(wh, config, None)
        assert not first.ok and len(receiver.posts) == 1
        ((name, why),) = first.failures
        assert name == down.url and "500" in why
        assert down.url in first.reason

        second = notify_changes(wh, config, first.cursor)  # still down: retried, not skipped
        assert not second.ok and len(receiver.posts) == 1

        down.status = 200
        third = notify_changes(wh, config, second.cursor)
        assert third.ok and third.delivered_to == (down.url,)
        (held,) = down.posts
        assert held["title"] == "3 pages changed on 2 hosts"
        assert len(receiver.posts) == 1  # the working target never gets them twice

        fourth = notify_changes(wh, config, third.cursor)
        assert fourth.sent == 0 and len(down.posts) == 1 and len(receiver.posts) == 1
    finally:
        down.close()


def test_a_slow_target_is_waited_for_not_sent_the_change_again(home, receiver):
    """A receiver that takes its time (a serverless cold start, a slow downstream) had the
    message when Apprise's 4-second read timeout called the send failed, and got the change
    again at every tick while it stayed slow. A target without its own ``rto`` is given
    NOTIFY_READ_TIMEOUT_S; one that sets it keeps it."""
    receiver.delay = 6.0
    wh = Warehouse(home)
    first = notify_changes(wh, NotifyConfig(urls=(receiver.url,)), None)
    assert first.ok and first.sent == 3 and len(receiver.posts) == 1, first.reason
    assert notify_changes(wh, NotifyConfig(urls=(receiver.url,)), first.cursor).sent == 0
    assert len(receiver.posts) == 1
    # the user's own timeout stands: 1 second is too short for this one
    impatient = f"{receiver.url}?rto=1"
    held = notify_changes(wh, NotifyConfig(urls=(impatient,)), None)
    assert not held.ok and held.failures[0][0].startswith(receiver.url)
    assert NOTIFY_READ_TIMEOUT_S >= 15


def test_an_edited_or_added_target_starts_where_the_others_are(home, receiver):
    """A target's key is its whole URL: one whose token was rotated or given ``rto=`` was a new
    target and got the whole history again (found by an exploratory run). It joins at the
    least advanced of the others: what one of them still lacks, never what all had."""
    wh = Warehouse(home)
    first = notify_changes(wh, NotifyConfig(urls=(receiver.url,)), None)
    assert first.sent == 3 and len(receiver.posts) == 1
    edited = f"{receiver.url}?rto=30"
    again = notify_changes(wh, NotifyConfig(urls=(edited,)), first.cursor)
    assert again.ok and again.sent == 0 and len(receiver.posts) == 1, again.reason
    down, added = Receiver(), Receiver()
    try:
        # added when every target has had everything: nothing to send it
        joined = notify_changes(wh, NotifyConfig(urls=(edited, added.url)), again.cursor)
        assert joined.ok and joined.sent == 0 and not added.posts
        # added while a target is down holding the changes: it gets what that one lacks
        down.status = 500
        held = notify_changes(wh, NotifyConfig(urls=(receiver.url, down.url)), None)
        assert held.failures and len(receiver.posts) == 2 and not down.posts
        down.status = 200
        urls = (receiver.url, down.url, added.url)
        back = notify_changes(wh, NotifyConfig(urls=urls), held.cursor)
        assert back.ok and back.sent == 3 and len(down.posts) == 1 and len(added.posts) == 1
        assert len(receiver.posts) == 2
    finally:
        down.close()
        added.close()


def test_a_closed_port_is_reported_and_the_cursor_stays(home, receiver):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"json://127.0.0.1:{s.getsockname()[1]}/hook"
    wh = Warehouse(home)
    failed = notify_changes(wh, NotifyConfig(urls=(closed,)), None)
    assert failed.failures and failed.failures[0][0] == closed and failed.sent == 0
    assert notify_changes(wh, NotifyConfig(urls=(closed,)), failed.cursor).failures
    # once something listens there, the held changes arrive
    port = int(closed.rsplit(":", 1)[1].split("/")[0])
    back = Receiver(port)
    try:
        live = notify_changes(wh, NotifyConfig(urls=(closed,)), failed.cursor)
        assert live.ok and live.sent == 3 and len(back.posts) == 1
    finally:
        back.close()


def test_a_rerun_cycle_rewriting_its_file_sends_only_what_it_added(site, home, receiver):
    wh = Warehouse(home)
    config = NotifyConfig(urls=(receiver.url,))
    first = notify_changes(wh, config, None)
    shop = wh.read("changes").filter(pl.col("url") == site["url"]["/products/lamp"])
    host = shop["host"][0]
    added = shop.with_columns(url=pl.col("url") + "?rerun")
    # the re-run writes its cycle's file again: the lamp's row replaced, one URL added
    wh.append_cycle("changes", host, T1, pl.concat([shop, added]))
    second = notify_changes(wh, config, first.cursor)
    assert second.sent == 1
    assert receiver.posts[1]["title"] == "1 page changed on 1 host"
    assert site["url"]["/products/lamp"] + "?rerun\n" in receiver.posts[1]["message"]
    assert notify_changes(wh, config, second.cursor).sent == 0


@pytest.mark.parametrize(
    ("watch", "expected"),
    [
        ({"url_classes": ("article",)}, {"/articles/storm"}),
        ({"fields": ("price",)}, {"/products/lamp", "/products/desk"}),
        ({"url_classes": ("article",), "fields": ("price",)}, set()),
    ],
)
def test_watch_filters_select_their_changes(site, home, receiver, watch, expected):
    config = NotifyConfig(urls=(receiver.url,), **watch)
    out = notify_changes(Warehouse(home), config, None)
    assert out.sent == len(expected)
    sent = "".join(p["message"] for p in receiver.posts)
    for path, url in site["url"].items():
        assert (url + "\n" in sent) == (path in expected), path
    # what the filter drops is not owed later either
    assert notify_changes(Warehouse(home), config, out.cursor).sent == 0


def test_a_long_batch_is_capped_and_says_how_many_more():
    n = 500
    rows = pl.DataFrame(
        {
            "url": [f"https://h{i % 3}.example/p/{i}" for i in range(n)],
            "host": [f"h{i % 3}.example" for i in range(n)],
            "changed_at": [T1] * n,
            "changed_fields": [["price"]] * n,
            "old_values": ['{"price": "$1"}'] * n,
            "new_values": ['{"price": "$2"}'] * n,
            "text_lines_added": [1] * n,
            "text_lines_removed": [0] * n,
        }
    )
    title, body = build_message(rows)
    assert title == "500 pages changed on 3 hosts"
    assert len(body) <= MAX_BODY_CHARS
    shown = body.count("changed at ")
    assert 0 < shown < n and body.endswith(f"and {n - shown} more changes (see the changes table)")


def test_the_sensor_sends_and_keeps_its_cursor_through_dagster(home, receiver, monkeypatch):
    monkeypatch.setenv("FRESHNESS_HOME", str(home))
    instance = dg.DagsterInstance.ephemeral()
    with dg.build_sensor_context(instance=instance) as context:
        idle = change_notifications_sensor(context)
    assert "no [notify] urls" in idle.skip_reason.skip_message

    (home / "freshness.toml").write_text(FIELDS + f'\n[notify]\nurls = ["{receiver.url}"]\n')
    with dg.build_sensor_context(instance=instance) as context:
        sent = change_notifications_sensor(context)
    assert sent.skip_reason.skip_message.startswith("sent 3 changes to json://127.0.0.1:")
    assert not sent.run_requests and len(receiver.posts) == 1
    with dg.build_sensor_context(cursor=sent.cursor, instance=instance) as context:
        nothing = change_notifications_sensor(context)
    assert nothing.skip_reason.skip_message == "no new changes to notify"
    assert len(receiver.posts) == 1

    receiver.status = 500  # the receiver stays up but refuses
    Warehouse(home).append_cycle(
        "changes",
        "x.example",
        T2,
        pl.DataFrame({"url": ["https://x.example/"], "host": ["x.example"], "changed_at": [T2]}),
    )
    with dg.build_sensor_context(cursor=nothing.cursor, instance=instance) as context:
        failed = change_notifications_sensor(context)
    assert (
        receiver.url in failed.skip_reason.skip_message
        and "failed" in failed.skip_reason.skip_message
    )
    assert failed.cursor == nothing.cursor


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[notify]\nurls = ["json://127.0.0.1:1/h"]\nemail = "x"\n',
            "takes only urls, url_classes, fields, not email",
        ),
        ('[notify]\nurls = "json://127.0.0.1:1/h"\n', "notify.urls must be a list"),
        ("[notify]\nurls = []\n", "at least one Apprise URL"),
        (
            '[notify]\nurls = ["json://127.0.0.1:1/h", "nosuch://x"]\n',
            "notify.urls[1]: Apprise cannot parse 'nosuch://x'",
        ),
        (
            '[notify]\nurls = ["json://127.0.0.1:1/h"]\nfields = "price"\n',
            "notify.fields must be a list",
        ),
        (
            '[notify]\nurls = ["json://127.0.0.1:1/h"]\nurl_classes = [1]\n',
            "notify.url_classes must be a list",
        ),
        (
            '[notify]\nurls = ["json://127.0.0.1:1/h"]\nfields = ["a-b"]\n',
            "'a-b' is not a field name",
        ),
        ("notify = 3\n", "[notify] takes only"),
    ],
)
def test_config_errors_name_the_setting(tmp_path, text, message):
    (tmp_path / "freshness.toml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert message in str(err.value)


def test_the_readme_example_parses(tmp_path):
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    example = next(b for b in readme.split("```toml\n")[1:] if b.startswith("[notify]"))
    (tmp_path / "freshness.toml").write_text(example.split("```", 1)[0])
    notify = load_config(tmp_path).notify
    assert notify.urls[0] == "json://127.0.0.1:8080/hook" and notify.fields == ("price",)


def test_a_notify_section_parses(tmp_path):
    (tmp_path / "freshness.toml").write_text(
        '[notify]\nurls = ["json://127.0.0.1:8080/hook", "mailto://u:p@example.com"]\n'
        'url_classes = ["product"]\nfields = ["price"]\n'
    )
    notify = load_config(tmp_path).notify
    assert notify == NotifyConfig(
        urls=("json://127.0.0.1:8080/hook", "mailto://u:p@example.com"),
        url_classes=("product",),
        fields=("price",),
    )
    assert load_config(tmp_path / "none").notify == NotifyConfig()


def test_a_message_tells_the_text_only_when_it_changed_and_a_reordering_as_one():
    """A field-only change said "text: +0 / -0 lines", and so did a text whose paragraphs only
    moved, while `freshness diff` showed them move (found by an exploratory run)."""
    rows = pl.DataFrame(
        {
            "url": ["https://a.example/p", "https://a.example/q", "https://a.example/r"],
            "host": ["a.example"] * 3,
            "changed_at": [T1] * 3,
            "changed_fields": [["availability"], ["text"], ["text"]],
            "old_values": ['{"availability": "InStock"}', "{}", "{}"],
            "new_values": ['{"availability": "OutOfStock"}', "{}", "{}"],
            "text_lines_added": [0, 0, 2],
            "text_lines_removed": [0, 0, 1],
        }
    )
    _, body = build_message(rows)
    p, q, r = body.split("https://a.example/")[1:]
    assert "availability: InStock -> OutOfStock" in p and "text" not in p
    assert "text: its lines reordered" in q
    assert "text: +2 / -1 lines" in r
