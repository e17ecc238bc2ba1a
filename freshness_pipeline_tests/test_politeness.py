"""web/politeness.py: the per-host ledger of request starts that Crawl-delay waits on."""

from __future__ import annotations

import asyncio
import time

from freshness_pipeline.web.politeness import HostLedger


def test_a_turn_waits_out_the_delay_since_the_last_start_and_claims_it() -> None:
    ledger = HostLedger()
    assert ledger.last_start("a") is None
    ledger.note_start("a", at=100.0)
    ledger.note_start("a", at=50.0)  # an earlier start never moves the mark back
    assert ledger.last_start("a") == 100.0

    ledger.note_start("b")
    before = time.monotonic()
    asyncio.run(ledger.wait_turn("b", 0.3))
    assert time.monotonic() - before >= 0.25
    assert ledger.last_start("b") >= before  # the turn is claimed
    before = time.monotonic()
    asyncio.run(ledger.wait_turn("c", 5.0))  # a host never seen does not wait
    assert time.monotonic() - before < 1.0


def test_a_hold_keeps_every_turn_of_its_host_until_it_ends() -> None:
    ledger = HostLedger()
    now = time.monotonic()
    ledger.hold("a", now + 0.3)
    ledger.hold("a", now + 0.1)  # a shorter pause never cuts a longer one
    held = ledger.held_until("a")
    assert held is not None and held >= now + 0.3
    assert ledger.held_until("b") is None
    assert ledger.ready_at("a", None) >= now + 0.3
    before = time.monotonic()
    asyncio.run(ledger.wait_turn("a", None))
    assert time.monotonic() >= now + 0.3 and time.monotonic() - before >= 0.2
    assert ledger.held_until("a") is None  # over
