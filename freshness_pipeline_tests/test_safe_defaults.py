"""Safe by default: servers the project starts listen on loopback only, the crawler reaches no
private or loopback address unless told to, and the documented UI command binds to loopback."""

from __future__ import annotations

import ipaddress
import re
import shutil
from pathlib import Path

from freshness_pipeline.synthweb import SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.web.netguard import allowed_networks, blocked_reason

README = Path(__file__).resolve().parents[1] / "README.md"


def test_synthetic_web_listens_on_loopback_only():
    world = build_world(
        1,
        sites=[
            SiteSpec("a", "honest", 3),
            SiteSpec("b", "polite", 3, crawl_delay=0.01, disallow=("/private/",)),
        ],
    )
    with SyntheticWeb(world) as web:
        for authority in web.hosts.values():
            host = authority.rsplit(":", 1)[0]
            assert ipaddress.ip_address(host).is_loopback, authority


def test_without_an_allow_list_private_and_metadata_addresses_are_refused():
    allow = allowed_networks({})
    assert allow == ()
    for address in ("127.0.0.1", "10.1.2.3", "192.168.0.1", "169.254.169.254", "::1", "fd00::1"):
        assert blocked_reason(address, allow) is not None, address
    assert (
        blocked_reason("127.0.0.1", allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}))
        is None
    )


def test_documented_dagster_dev_binds_to_loopback():
    commands = re.findall(r"^dagster dev .*$", README.read_text(), flags=re.M)
    assert commands and all("-h 127.0.0.1" in c for c in commands)


def test_a_cycle_says_what_held_its_urls_back(tmp_path):
    """Loopback seeds without FRESHNESS_ALLOW_NETWORKS: every robots.txt fetch is refused, so
    nothing is planned; the summary says so and why instead of a bare "0 planned". With the
    allow-list, what robots.txt disallows is counted as held back by it."""
    from datetime import timedelta

    from freshness_pipeline.synthweb import DEFAULT_START
    from freshness_pipeline_tests.support import run_freshness

    world = build_world(
        3,
        start=DEFAULT_START,
        horizon_days=1,
        sites=[
            SiteSpec("a", "honest", 4),
            SiteSpec("b", "polite", 4, crawl_delay=0.01, disallow=("/private/",), n_private=2),
        ],
    )
    now = DEFAULT_START.isoformat()
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        seeds = web.seeds_csv(tmp_path / "seeds.csv", variants=False)
        refused_home, allowed_home = tmp_path / "refused", tmp_path / "allowed"
        assert run_freshness("seed", str(seeds), home=refused_home).returncode == 0
        shutil.copytree(refused_home, allowed_home)  # seeded alike (a home's copy is a home)
        refused = run_freshness(
            "cycle", "--now", now, home=refused_home, env={"FRESHNESS_ALLOW_NETWORKS": ""}
        )
        allowed = run_freshness("cycle", "--now", now, home=allowed_home)
        # the user does as told, minutes later: the refusal is not held against the hosts
        soon = (DEFAULT_START + timedelta(minutes=10)).isoformat()
        dry_after = run_freshness("cycle", "--dry-run", "--now", soon, home=refused_home)
        # (a narrow terminal, or a log's 80 columns: the summary must not wrap)
        real_after = run_freshness("cycle", "--now", soon, home=refused_home, env={"COLUMNS": "40"})
        earlier = (DEFAULT_START - timedelta(hours=6)).isoformat()
        backwards = run_freshness("cycle", "--now", earlier, home=allowed_home)
        onwards = run_freshness("cycle", "--now", now, home=allowed_home)
    assert refused.returncode == 0, refused.stderr
    assert "0 planned" in refused.stdout
    summary = " ".join(refused.stderr.split())
    assert re.search(
        r"nothing planned, held back: address not allowed \(FRESHNESS_ALLOW_NETWORKS\): \d+ URLs",
        summary,
    ), summary
    for after in (dry_after, real_after):
        assert after.returncode == 0 and "address not allowed" not in after.stderr, after.stderr
        assert re.search(r"2 hosts, [1-9]\d* planned", after.stdout), after.stdout
    assert re.search(r" [1-9]\d* requests sent", real_after.stdout), real_after.stdout
    # piped, the summary is still one line: a log read "(new" and "3)" apart (found by a
    # newcomer)
    (line,) = [x for x in real_after.stdout.splitlines() if x.startswith("cycle ")]
    assert re.search(r"requests sent \([a-z_]+ \d+(, [a-z_]+ \d+)*\)", line), real_after.stdout
    assert allowed.returncode == 0, allowed.stderr
    assert "robots.txt disallows: 2 URLs" in " ".join(allowed.stderr.split()), allowed.stderr
    assert "address not allowed" not in allowed.stderr
    # a --now before the home's newest cycle is said (a backfill, or a clock mix-up)
    assert "before the newest cycle of 2 of the 2 hosts" in " ".join(backwards.stderr.split())
    assert backwards.returncode == 0 and "before the newest cycle" not in onwards.stderr
