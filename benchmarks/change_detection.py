"""Change detection on real pages: false- and missed-change rates, and CPU per page.

Serves each real page (newspaper4k's test fixtures, ``freshness_pipeline_tests/real_pages.py``)
``--fetches`` times with fresh volatile noise on every response and a content edit every
third fetch (``freshness_pipeline_tests/page_mutations.py``), fingerprints every body, and
counts: an unchanged fetch whose fingerprint differs from the previous fetch's is a false
change, an edited one whose fingerprint equals it a missed change. Each page is also served
with no semantic markup at all (landmarks turned into ``<div>``, ARIA roles and microdata
removed). Contenders, on the same bodies:

- ``v1``: the fingerprint before this change (``FINGERPRINT_VERSION`` 1), loaded from the
  newest commit in git history whose ``science/fingerprint.py`` has that version;
- ``v<FINGERPRINT_VERSION>`` (``NOW``): ``content_fingerprint`` as it is now;
- ``trafilatura`` (``--trafilatura``): trafilatura's main-content extraction in a throwaway
  venv under ``~/.cache/freshness-bench`` (made on first use; not a project dependency), the
  page title added, then the current normalization; the venv replays the same fetches from the seeds.

Then CPU ms per page (``time.process_time``, v1 and the current version alternating in one process, median of
``--rounds``) on 300 generated ~5 KB pages (``benchmarks/fetch_rate.py``'s ``page_html``)
and on the corpus as served. Prints the tables and writes ``docs/change_detection.md``.

    .venv/bin/python benchmarks/change_detection.py                  # ~5 min on 2 shared cores
    .venv/bin/python benchmarks/change_detection.py --trafilatura    # + the comparison
    .venv/bin/python benchmarks/change_detection.py --quick          # 13 fetches, no doc
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
import types
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import xxhash  # noqa: E402
from fetch_rate import page_html  # noqa: E402
from harness import cpu_model  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from freshness_pipeline.science import fingerprint as current  # noqa: E402
from freshness_pipeline_tests import page_mutations, real_pages  # noqa: E402

#: the current fingerprint's label in the tables
NOW = f"v{current.FINGERPRINT_VERSION}"

# Where the fingerprint lived as one module, which is where version 1 is found.
FINGERPRINT_PATH = "freshness_pipeline/science/fingerprint.py"
# jusText, which trafilatura imports, needs lxml's html cleaner, now a package of its own.
TRAFILATURA_SPEC = ("trafilatura==2.3.1", "lxml_html_clean")
CACHE_HOME = real_pages.cache_dir().parent
TARGET = 0.02

Fingerprinter = Callable[[bytes], str]


# ---- contenders -------------------------------------------------------------------------------


def baseline_module() -> tuple[str, types.ModuleType] | None:
    """The newest committed fingerprint module with FINGERPRINT_VERSION 1, and its commit."""
    try:
        revs = subprocess.run(
            ["git", "log", "--format=%H", "--", FINGERPRINT_PATH],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        for rev in revs:
            shown = subprocess.run(
                ["git", "show", f"{rev}:{FINGERPRINT_PATH}"],
                cwd=ROOT, capture_output=True, text=True,
            )  # fmt: skip
            if shown.returncode != 0:  # the commit that made the module a package
                continue
            source = shown.stdout
            if re.search(r"^FINGERPRINT_VERSION: int = 1$", source, re.M):
                module = types.ModuleType("fingerprint_v1")
                exec(compile(source, f"{rev[:10]}:{FINGERPRINT_PATH}", "exec"), module.__dict__)
                return rev, module
    except (OSError, subprocess.CalledProcessError):
        pass
    return None


def html_fingerprinter(module: types.ModuleType) -> Fingerprinter:
    return lambda body: module.content_fingerprint(body, content_type="text/html")


def ensure_trafilatura() -> Path:
    venv = CACHE_HOME / "trafilatura-venv"
    python = venv / "bin" / "python"
    if (
        python.exists()
        and subprocess.run([str(python), "-c", "import trafilatura"]).returncode == 0
    ):
        return python
    print(f"creating {venv} with {' '.join(TRAFILATURA_SPEC)} (once) ...", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *TRAFILATURA_SPEC],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return python


# The child replays the same fetches in the trafilatura venv and prints each extracted text.
TRAFILATURA_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import lxml.html, trafilatura
import page_mutations
spec = json.load(sys.stdin)
out = {"texts": {}, "cpu": {}}
for job in spec["jobs"]:
    html = open(job["path"], "rb").read()
    if not job["semantic"]:
        html = page_mutations.without_semantics(html)
    texts, cpu = [], 0.0
    for fetch in page_mutations.fetches(html, job["article_text"], seed=job["seed"],
                                        count=spec["count"]):
        start = time.process_time()
        main = trafilatura.extract(fetch.body) or ""
        title = lxml.html.document_fromstring(fetch.body).findtext(".//title") or ""
        cpu += time.process_time() - start
        texts.append(f"{title.strip()}\n{main}")
    out["texts"][job["key"]] = texts
    out["cpu"][job["key"]] = cpu / len(texts)
corpus_cpu = []
for path in spec["corpus"]:
    html = open(path, "rb").read()
    start = time.process_time()
    trafilatura.extract(html)
    corpus_cpu.append(time.process_time() - start)
small = spec["small"]
start = time.process_time()
for page in small:
    trafilatura.extract(page)
out["small_ms"] = (time.process_time() - start) / len(small) * 1000
out["corpus_ms"] = sum(corpus_cpu) / len(corpus_cpu) * 1000
json.dump(out, sys.stdout)
"""


def trafilatura_texts(jobs: list[dict], count: int, small: list[str]) -> dict:
    python = ensure_trafilatura()
    version = subprocess.run(
        [str(python), "-c", "import trafilatura; print(trafilatura.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    corpus = [j["path"] for j in jobs if j["semantic"]]
    spec = {"jobs": jobs, "count": count, "corpus": corpus, "small": small}
    done = subprocess.run(
        [str(python), "-c", TRAFILATURA_CHILD, str(ROOT / "freshness_pipeline_tests")],
        input=json.dumps(spec), capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    result["version"] = version
    return result


def hash_text(text: str) -> str:
    return xxhash.xxh3_64_hexdigest(current.normalize_content(text).encode("utf-8", "replace"))


# ---- measurement ------------------------------------------------------------------------------


def has_semantic_markup(html: bytes) -> bool:
    tree = LexborHTMLParser(html)
    return tree.css_first('main, article, [role="main" i], [itemprop~="articleBody" i]') is not None


def score_streams(
    pages: list[real_pages.RealPage], fingerprinters: dict[str, Fingerprinter], count: int
) -> tuple[dict, list[dict]]:
    """Scores per (contender, variant) and per page, plus the streams' edit kinds."""
    totals: dict[tuple[str, str], page_mutations.Score] = defaultdict(page_mutations.Score)
    per_page: list[dict] = []
    for variant in ("as served", "no semantic markup"):
        for i, page in enumerate(pages):
            html = (
                page.html if variant == "as served" else page_mutations.without_semantics(page.html)
            )
            stream = list(page_mutations.fetches(html, page.article_text, seed=i, count=count))
            row: dict[str, Any] = {"page": page.name, "variant": variant, "stream": stream,
                   "semantic": has_semantic_markup(page.html)}  # fmt: skip
            for name, fingerprint in fingerprinters.items():
                fps = [fingerprint(f.body) for f in stream]
                score = page_mutations.score(fps, stream)
                totals[(name, variant)].add(score)
                row[name] = score
                row[f"{name} fps"] = fps
            per_page.append(row)
        print(f"  scored {variant}", flush=True)
    return totals, per_page


def by_edit_kind(per_page: list[dict], name: str, variant: str) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in per_page:
        if row["variant"] != variant:
            continue
        fps, stream = row[f"{name} fps"], row["stream"]
        for before, after, fetch in zip(fps, fps[1:], stream[1:], strict=False):
            if fetch.edit is not None:
                out[fetch.edit][0] += before == after
                out[fetch.edit][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def ablation(
    pages: list[real_pages.RealPage], fingerprinters: dict[str, Fingerprinter], count: int
) -> dict[str, dict[str, page_mutations.Score]]:
    """False changes from each kind of noise alone (no edits), as served."""
    out: dict[str, dict[str, page_mutations.Score]] = {}
    for kind in page_mutations.VOLATILE_KINDS:
        out[kind] = {name: page_mutations.Score() for name in fingerprinters}
        for i, page in enumerate(pages):
            stream = list(
                page_mutations.fetches(
                    page.html, page.article_text, seed=1000 + i, count=count,
                    volatile=(kind,), edit_kinds=(),
                )
            )  # fmt: skip
            for name, fingerprint in fingerprinters.items():
                out[kind][name].add(
                    page_mutations.score([fingerprint(f.body) for f in stream], stream)
                )
    return out


def cpu_ms(fingerprinters: dict[str, Fingerprinter], bodies: list[bytes], rounds: int) -> dict:
    """Median CPU ms per body over ``rounds``, the contenders taking turns in each round."""
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        for name, fingerprint in fingerprinters.items():
            start = time.process_time()
            for body in bodies:
                fingerprint(body)
            samples[name].append((time.process_time() - start) / len(bodies) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


# ---- report -----------------------------------------------------------------------------------


def rate(score: page_mutations.Score) -> tuple[str, str]:
    return (
        f"{score.false_change_rate:.3f} ({score.false_changes}/{score.unchanged})",
        f"{score.missed_change_rate:.3f} ({score.missed_changes}/{score.edited})",
    )


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


RULES = """
## What the fingerprint drops and keeps

Structure first (`extract_content`): the text is the page's marked main content (`<main>`,
`role=main`, its top-level `<article>`s, a schema.org `articleBody`), or the whole body when
nothing is marked or the mark holds under 15 % of the body's text (a teaser `<article>` in a
sidebar), plus any visible `<h1>` outside it and the title. What a browser shows in place
counts where it shows: declarative shadow roots (`<template shadowrootmode>`) and React's
streamed Suspense content (`<div hidden id="S:0">`, put where its `<template id="B:0">` and
fallback stood). A shell showing under 80 characters is read with the prose of its JSON data
blobs after what it shows. Class and id words leave out build hashes (`svelte-9ad7x2p`,
`Body_p__q9ad4`) and read a BEM element by its own name (`article-banner__standfirst`).
Before that go: markup that is
never visible text (scripts, styles, iframes, `<time>`, buttons, selects, dialogs); hidden
elements (`hidden`, `aria-hidden=true`, `display:none`, `visibility:hidden`); elements whose
class or id has an ad, sponsor, promo, banner, outbrain or taboola word, or a cookie, consent
or gdpr word, as a whole word or a part split at `-`, `_`, digits or camelCase humps (so `ad-slot`,
`top_ad`, `adContainer`, `div-gpt-ad-1` go and `header`, `shadow`, `download`, `loading`
stay; a `promo-price` stays too); short counter elements (`view-count`, `share-count`; not
`stock-count`: a class naming a price or stock is content); `rel=sponsored` links with the
containers that hold only them (or a short lead-in); blocks whose first text is a label
("Sponsored", "Sponsored: ...", "Advertisement", "Promoted", "Anzeige", "Werbung",
"Publicité", "Publicidad", "Pubblicità", "Реклама", "إعلان", "広告", "广告", "광고", "PR", ...,
alone or before a separator, so "Anzeige gegen Unbekannt ..." stays) up to the smallest
ancestor with other text, and a bare label's short next element; recirculation lists, the
heading ("Related articles", "Lesen Sie auch", "À lire aussi", "Te puede interesar",
"Читайте также", "相关文章", "関連記事", "관련 기사", "Most read", "Trending in your area",
"Picked for you", "Customers who bought ...", "Recently viewed", ...) and the element after
it; then nav, aside, page-level header and footer (unless one holds half the page's text:
a page wrapped in its header is the page), the ARIA roles
navigation, banner, contentinfo, complementary, search, dialog, timer and marquee, and forms
that do not wrap the page (an add-to-cart form stays: a shop's product and price are in it). None of the class, attribute or label rules removes an element that
holds the main content, an `<h1>`, or half the body's text (a `<body class="ads-enabled">`, a
wrapper made `aria-hidden` while a pop-up shows). Configured selectors win over all of it: a
selected element counts wherever it is, and only what the rules drop inside it goes.

Then tokens (`normalize_content`), in the major languages of the web: the text is composed
(Unicode NFC) first, so the same words served decomposed are the same, and its white space
(the source's line breaks, `&nbsp;`, runs of spaces) is one space before the token rules, so
"June 30, 2015" is a date however the server wraps it ("today" and "yesterday" ending a line
of the source are read before). Dropped: dates (ISO,
numeric when they are plausible dates, day or month first, with weekday, month names and
abbreviations in English, German, French, Spanish, Italian, Portuguese, Dutch, Polish, Russian,
Ukrainian, Arabic and Thai, CJK and Korean forms, "today" and "yesterday" before a time),
clock times (an hour of 0-23: "14:03", "14.03 Uhr", "14h03", "14時03分", "오후 2:03") and
zones, relative times ("5 minutes ago", "an hour ago", "5m ago", "just now", "vor 5 Minuten",
"il y a 5 min", "5 ore fa", "3 часа назад", "3時間前", "3小时前", "3시간 전", "منذ 3 ساعات"),
counters ("1.2K views", "34 comments", "Views: 1234", "1.234 Aufrufe", "Просмотров: 1234",
"阅读 1234", "조회 1234", "Shares: 1841", "Comments (12)", "评论(12)", "浏览次数：1234", "Read
1,234 times", "52 people are reading this now") and visitor counters in the words such counters use ("You are
visitor number 12359", "37 users online"), "N shares", a shop's urgency widgets ("12 sold
in last 24 hours", "order within 2 hrs 13 mins"), a live blog's "3 new updates", "12 thoughts on"
over comments, buttons showing a bare number (likes), how long the page took ("generated in
0.44 seconds", "Time: 0.12s", "23 queries") and which machine served it ("served by node web5", "rendered on
app-03.example.net in 321 ms"), the year after "©" or "Copyright", UUIDs, hex identifiers of
8+ characters mixing digits and letters (with the rest of a hyphenated id they are part of:
"7f3a9c12-3d80"), base64-like tokens of 16+ characters, and runs of 10+
digits (ids, epoch timestamps with their fraction, cache busters). In scripts written without
spaces a number glued to a word still stands alone ("更新于14:03").
Kept, because they are content: every other number, so prices ("$1,249.00", "1.234,56 €"),
counts ("12,000 employees", "3,500 units"), scores ("won 3-1", "28:25": no hour 28),
versions ("2.4.10"), quantities and percentages; a year in a sentence ("founded in 1998");
phone numbers ("+7 (495) 123-45-67"; a page's number is stable, and a changed one is a change;
a site that rotates call-tracking numbers per visitor reads as changing, which the selectors
in `freshness.toml` can fix); "N votes" and "N visitors", which are news in an election story
more often than counters; "served on 3 plates" (a machine name has letters and a digit).
"""


def trafilatura_verdict(totals: dict, small: dict, corpus: dict, traf: dict) -> list[str]:
    ours, theirs = page_mutations.Score(), page_mutations.Score()
    for variant in ("as served", "no semantic markup"):
        ours.add(totals[(NOW, variant)])
        theirs.add(totals[("trafilatura", variant)])
    slower_small, slower_corpus = traf["small_ms"] / small[NOW], traf["corpus_ms"] / corpus[NOW]
    better = (
        theirs.false_change_rate < ours.false_change_rate
        and theirs.missed_change_rate <= ours.missed_change_rate
    )
    verdict = (
        "It detects changes better on these pages; whether that is worth its CPU is the question."
        if better
        else "It does not detect changes better on these pages, so nothing pays for its CPU "
        "and its dependencies, and the product stays on selectolax."
    )
    return [
        "",
        "## trafilatura for comparison",
        "",
        f"trafilatura {traf['version']} (`extract`, its defaults, in its own venv), both "
        f"variants together: false-change {theirs.false_change_rate:.3f}, missed-change "
        f"{theirs.missed_change_rate:.3f}, against {NOW}'s {ours.false_change_rate:.3f} and "
        f"{ours.missed_change_rate:.3f}; its extraction alone takes {slower_small:.1f}x {NOW}'s "
        f"whole fingerprint's CPU on ~5 KB pages and {slower_corpus:.1f}x on the corpus. "
        + verdict,
    ]


def machine_note() -> str:
    return f"{cpu_model()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fetches", type=int, default=31, help="fetches per page and variant")
    parser.add_argument("--rounds", type=int, default=5, help="CPU timing rounds")
    parser.add_argument("--quick", action="store_true", help="13 fetches, 3 rounds, no doc")
    parser.add_argument("--trafilatura", action="store_true", help="compare with trafilatura")
    parser.add_argument("--out", default=str(ROOT / "docs" / "change_detection.md"))
    args = parser.parse_args()
    if args.quick:
        args.fetches, args.rounds, args.out = 13, 3, ""

    if real_pages.missing_reason() is not None:
        print("fetching the real pages ...", flush=True)
        real_pages.fetch()
    pages = real_pages.load()
    fingerprinters: dict[str, Fingerprinter] = {}
    baseline = baseline_module()
    if baseline is None:
        print("no committed FINGERPRINT_VERSION 1 in git history: v1 left out", flush=True)
    else:
        fingerprinters["v1"] = html_fingerprinter(baseline[1])
    fingerprinters[NOW] = html_fingerprinter(current)
    print(f"{len(pages)} pages, {args.fetches} fetches per page and variant", flush=True)

    started = time.time()
    totals, per_page = score_streams(pages, fingerprinters, args.fetches)
    rng = random.Random(5)
    small = [page_html(rng, 1, i, 5000) for i in range(300)]
    traf = None
    if args.trafilatura:
        jobs = [
            {"key": f"{row['variant']}|{row['page']}", "semantic": row["variant"] == "as served",
             "path": str(real_pages.pages_dir() / "tests" / "data" / "html" / f"{row['page']}.html"),
             "article_text": next(p.article_text for p in pages if p.name == row["page"]),
             "seed": next(i for i, p in enumerate(pages) if p.name == row["page"])}
            for row in per_page
        ]  # fmt: skip
        traf = trafilatura_texts(jobs, args.fetches, small)
        for row in per_page:
            fps = [hash_text(t) for t in traf["texts"][f"{row['variant']}|{row['page']}"]]
            score = page_mutations.score(fps, row["stream"])
            totals[("trafilatura", row["variant"])].add(score)
            row["trafilatura"], row["trafilatura fps"] = score, fps
    names = [*fingerprinters, *(["trafilatura"] if traf else [])]
    ablation_count = max(5, args.fetches // 3)
    noise = ablation(pages, fingerprinters, ablation_count)
    print("  ablation done", flush=True)

    small_bodies = [p.encode() for p in small]
    corpus_bodies = [p.html for p in pages]
    speed_small = cpu_ms(fingerprinters, small_bodies, args.rounds)
    speed_corpus = cpu_ms(fingerprinters, corpus_bodies, args.rounds)
    elapsed = time.time() - started

    lines: list[str] = []
    say = lines.append
    say("# Change detection on real pages")
    say("")
    say("Generated by `.venv/bin/python benchmarks/change_detection.py"
        f"{' --trafilatura' if traf else ''}` (~{elapsed / 60:.0f} min here); "
        "the method is in `benchmarks/README.md`.")  # fmt: skip
    say("")
    say(f"{len(pages)} real pages (newspaper4k {real_pages.NEWSPAPER4K_VERSION}'s "
        "`tests/data/html`: news and portal pages in several languages), each served "
        f"{args.fetches} times with new volatile noise on every response and a content edit "
        "every third fetch; the first fetch of each page is the baseline. "
        f"Machine: {machine_note()}.")  # fmt: skip
    if baseline:
        say(f"v1 is `{FINGERPRINT_PATH}` at commit {baseline[0][:10]} (FINGERPRINT_VERSION 1).")
    say("")
    say("## False- and missed-change rates")
    say("")
    rows = []
    native = [r for r in per_page if r["variant"] == "as served" and not r["semantic"]]
    for name in names:
        for variant in ("as served", "no semantic markup"):
            rows.append([name, variant, *rate(totals[(name, variant)])])
        sub = page_mutations.Score()
        for row in native:
            sub.add(row[name])
        rows.append(
            [name, f"as served, the {len(native)} pages without semantic markup", *rate(sub)]
        )
    lines += table(["contender", "pages", "false-change rate", "missed-change rate"], rows)
    say("")
    say(f"Targets: false-change <= {TARGET}, missed-change <= {TARGET}. \"No semantic markup\" "
        "is every page with its landmarks turned into `<div>` and its ARIA roles and microdata "
        "removed; the pages without semantic markup are those with no `<main>`, `<article>`, "
        "`role=main` or schema.org `articleBody` as served.")  # fmt: skip
    say("")
    say("Missed changes by kind of edit (missed / edits, both variants):")
    say("")
    kinds = page_mutations.EDIT_KINDS
    rows = []
    for name in names:
        cells = []
        for kind in kinds:
            missed = total = 0
            for variant in ("as served", "no semantic markup"):
                m, t = by_edit_kind(per_page, name, variant).get(kind, (0, 0))
                missed, total = missed + m, total + t
            cells.append(f"{missed}/{total}")
        rows.append([name, *cells])
    lines += table(["contender", *kinds], rows)
    say("")
    say(f"False changes from each kind of noise alone (as served, {ablation_count} fetches "
        "per page, no edits):")  # fmt: skip
    say("")
    rows = [[kind, *(rate(noise[kind][n])[0] for n in fingerprinters)] for kind in noise]
    lines += table(["noise", *fingerprinters], rows)
    say("")
    wrong = [r for r in per_page if NOW in r and r[NOW].false_changes + r[NOW].missed_changes]
    worst = sorted(wrong, key=lambda r: -(r[NOW].false_changes + r[NOW].missed_changes))[:8]
    say(
        f"Pages where {NOW} erred (false changes, missed changes): "
        + (
            ", ".join(
                f"{r['page']} ({r['variant']}: {r[NOW].false_changes}, {r[NOW].missed_changes})"
                for r in worst
            )
            or "none"
        )
        + "."
    )
    say("")
    say("## CPU per page")
    say("")
    say(f"`time.process_time()` per `content_fingerprint` call, median of {args.rounds} rounds "
        f"with the contenders taking turns; the same process and inputs for v1 and {NOW}.")  # fmt: skip
    say("")
    rows = []
    for name in fingerprinters:
        rows.append([name, f"{speed_small[name]:.3f}", f"{speed_corpus[name]:.2f}"])
    if traf:
        rows.append([f"trafilatura {traf['version']} (extract only, own venv)",
                     f"{traf['small_ms']:.3f}", f"{traf['corpus_ms']:.2f}"])  # fmt: skip
    avg_kb = sum(map(len, corpus_bodies)) / len(corpus_bodies) / 1024
    lines += table(
        ["contender", "~5 KB page (ms)", f"corpus page, mean {avg_kb:.0f} KB (ms)"], rows
    )
    if "v1" in speed_small:
        say("")
        say(f"{NOW} / v1: {speed_small[NOW] / speed_small['v1']:.2f} on ~5 KB pages, "
            f"{speed_corpus[NOW] / speed_corpus['v1']:.2f} on the corpus.")  # fmt: skip
    if traf:
        lines += trafilatura_verdict(totals, speed_small, speed_corpus, traf)
    lines += RULES.splitlines()
    report = "\n".join(lines) + "\n"
    print()
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
