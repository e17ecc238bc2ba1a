"""The code location as a Dagster user meets it: `dagster dev` on loopback, the UI's GraphQL
API showing the assets, host partitions, schedule, sensor and checks, and a one-host run launched
the way the UI launches it, against the synthetic web. Then the whole process group must stop.

`dagster dev` runs in its own session so that SIGINT reaches the webserver, the daemon and the
code servers together, and so that the test can prove nothing of it is left running. It starts
with SIGINT at its default: a test run launched as a background job of a non-interactive shell
(`nohup bash .ci/run &`) ignores SIGINT (POSIX, without job control), every child inherits that
through exec and a new session alike, and `dagster dev` then shrugs off the test's Ctrl-C
(its daemon stops, the CLI and webserver stay).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from freshness_pipeline.defs.partitions import RANGE_END_TAG, RANGE_START_TAG
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.storage import Warehouse

ASSETS = {
    "url_inventory",
    "url_candidates",
    "revisit_plan",
    "fetch_results",
    "host_capacity",
    "page_versions",
    "changes",
    "url_state",
    "retention",
    # the side tables the steps' stages write, assets of those steps
    "robots",
    "url_canonical",
    "fetch_log",
    "validator_evidence",
    "validator_latest",
    "fetch_totals",
    "change_prior",
    "lastmod_evidence",
}
CHECKS = {
    "robots": {"robots_one_row_per_host"},
    "url_candidates": {"candidates_have_unique_urls"},
    "revisit_plan": {"plan_within_budget"},
    "fetch_results": {"results_account_for_plan", "verify_sample_matches_the_model"},
    "url_state": {"state_keeps_every_candidate"},
}
LOCATION = "freshness_pipeline.definitions"
PAGES = 12


def executable(name: str) -> str | None:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name)


DAGSTER = executable("dagster")
pytestmark = pytest.mark.skipif(DAGSTER is None, reason="the `dagster` executable is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def describe(pids: list[int]) -> str:
    """pid, state and command line of each process, for a failure message."""
    out = []
    for pid in pids:
        try:
            cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
            state = (Path("/proc") / str(pid) / "stat").read_text().split(") ")[1][0]
        except OSError:
            continue
        out.append(f"{pid} [{state}] {cmd.decode(errors='replace')[:200]}")
    return "; ".join(out)


def wait_for_run_workers(pgid: int, before: set[int], timeout: float = 30.0) -> None:
    """Until the processes the run added to the group (its worker) have exited. A run reads
    SUCCESS before its worker has torn down; twice in CI the whole group outlived a Ctrl-C sent
    right as a run ended (cause not found), and this takes that race out of the test."""

    def workers() -> list[int]:
        # the code server's multiprocessing resource tracker stays until the server stops
        added = set(group_members(pgid)) - before
        return [pid for pid in added if "resource_tracker" not in describe([pid])]

    deadline = time.monotonic() + timeout
    while workers() and time.monotonic() < deadline:
        time.sleep(0.2)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in a process group, from /proc: ``os.killpg(pgid, 0)`` also
    succeeds on zombies an init-less container never reaps."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Dagit:
    """A `dagster dev` process group and a GraphQL client for it."""

    def __init__(self, port: int, env: dict[str, str], cwd: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = cwd / "dagster-dev.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [DAGSTER, "dev", "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)],
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_default_sigint,
            )
        self.pgid = self.proc.pid

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
            answer = json.load(response)
        assert "errors" not in answer, answer["errors"]
        return answer["data"]

    def wait_until_loaded(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"dagster dev exited early:\n{self.tail()}"
            try:
                data = self.graphql(REPOSITORIES)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
                continue
            nodes = data["repositoriesOrError"].get("nodes") or []
            if nodes:
                return nodes[0]
            time.sleep(0.5)
        raise AssertionError(f"dagster dev did not answer within {timeout}s:\n{self.tail()}")

    def stop(self, timeout: float = 150.0, linger: float = 30.0) -> list[int]:
        """SIGINT to the whole group, as Ctrl-C would; returns whatever is still alive.

        ``dagster dev`` gives its webserver and its daemon 60 s each to stop before it kills
        them (dagster/_cli/dev.py), so its own worst case is about two minutes: ``timeout``
        waits past that, then ``linger`` for the group's last processes. Usually it stops in
        about 2 s; in CI its webserver sometimes took over a minute.
        """
        if not group_members(self.pgid):
            return []
        os.killpg(self.pgid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        deadline = time.monotonic() + linger
        while group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        return group_members(self.pgid)

    def kill(self) -> None:
        if group_members(self.pgid):
            os.killpg(self.pgid, signal.SIGKILL)
        self.proc.wait(10)


REPOSITORIES = """{ repositoriesOrError { ... on RepositoryConnection { nodes {
  name location { name } jobs { name }
  schedules { name cronSchedule executionTimezone scheduleState { status } }
  sensors { name minIntervalSeconds sensorState { status } }
} } } }"""

ASSET_NODES = """{ assetNodes {
  assetKey { path } groupName
  partitionDefinition { type dimensionTypes { type dynamicPartitionsDefinitionName } }
  partitionKeysByDimension { partitionKeys }
  assetChecksOrError { ... on AssetChecks { checks { name blocking } } }
} }"""

SCHEDULE_DRY_RUN = """mutation($selector: ScheduleSelector!, $timestamp: Float) {
  scheduleDryRun(selectorData: $selector, timestamp: $timestamp) {
    __typename
    ... on DryRunInstigationTick { evaluationResult {
      skipReason error { message }
      runRequests { runKey runConfigYaml tags { key value } }
    } }
    ... on PythonError { message }
} }"""

LAUNCH_RUN = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename
  ... on LaunchRunSuccess { run { runId } }
  ... on RunConfigValidationInvalid { errors { message } }
  ... on PythonError { message }
  ... on InvalidSubsetError { message }
} }"""

RUN_STATUS = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"""

RUN_EVENTS = """query($id: ID!) { logsForRun(runId: $id, limit: 2000) { ... on EventConnection {
  events {
    __typename
    ... on MaterializationEvent { assetKey { path } partition }
    ... on AssetCheckEvaluationEvent { evaluation { checkName success } }
  }
} } }"""


@pytest.mark.timeout(240)
def test_dagster_dev_serves_the_code_location_and_runs_one_host(tmp_path):
    started = time.monotonic()
    home, dagster_home = tmp_path / "home", tmp_path / "dagster_home"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "FRESHNESS_HOME": str(home),
        "FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8",
    }
    env.pop("FRESHNESS_CYCLE_CRON", None)
    world = build_world(5, start=DEFAULT_START, sites=[SiteSpec("honest", "honest", PAGES)])
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        host = web.hosts["honest"]
        # The CLI writes DAGSTER_HOME/dagster.yaml (queued runs, per-host limits) and registers
        # the host partition in that instance, before the server reads either.
        seeds = web.seeds_csv(tmp_path / "seeds.csv", variants=False)
        freshness = executable("freshness")
        command = [freshness] if freshness else [sys.executable, "-m", "freshness_pipeline.app.cli"]
        seeded = subprocess.run(
            [*command, "seed", str(seeds), "--now", DEFAULT_START.isoformat()],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert seeded.returncode == 0, seeded.stderr
        assert "QueuedRunCoordinator" in (dagster_home / "dagster.yaml").read_text()

        seeded_at = time.monotonic()
        dagit = Dagit(free_port(), env, tmp_path)
        before_run: set[int] | None = None
        try:
            repository = dagit.wait_until_loaded(timeout=90)
            served_at = time.monotonic()

            # -- what the UI shows: location, job, schedule, sensor
            assert repository["location"]["name"] == LOCATION
            assert "freshness_cycle" in {j["name"] for j in repository["jobs"]}
            (schedule,) = repository["schedules"]
            assert schedule["name"] == "freshness_cycle_schedule"
            assert schedule["cronSchedule"] == "0 * * * *"
            assert schedule["scheduleState"]["status"] == "STOPPED"  # turned on by the user
            sensors = {s["name"]: s for s in repository["sensors"]}
            assert set(sensors) == {"new_hosts_sensor", "change_notifications_sensor"}
            for sensor in sensors.values():  # both turned on by the user
                assert sensor["sensorState"]["status"] == "STOPPED", sensor["name"]

            # -- the cycle's assets on the `hosts` partitions, with their checks; the seeds an
            # external asset beside them (`freshness seed` writes it)
            nodes = {n["assetKey"]["path"][-1]: n for n in dagit.graphql(ASSET_NODES)["assetNodes"]}
            seeds_node = nodes.pop("seeds")
            assert seeds_node["groupName"] == "freshness_inputs"
            assert set(nodes) == ASSETS
            for name, node in nodes.items():
                (dimension,) = node["partitionDefinition"]["dimensionTypes"]
                assert dimension == {"type": "DYNAMIC", "dynamicPartitionsDefinitionName": "hosts"}
                assert node["partitionKeysByDimension"][0]["partitionKeys"] == [host]
                checks = {c["name"] for c in node["assetChecksOrError"]["checks"]}
                assert checks == CHECKS.get(name, set()), name
            blocking = {
                c["name"]: c["blocking"]
                for n in nodes.values()
                for c in n["assetChecksOrError"]["checks"]
            }
            assert blocking["candidates_have_unique_urls"] and blocking["plan_within_budget"]

            # -- "Test schedule" in the UI: one run over every host, the tick time as now
            selector = {
                "repositoryLocationName": LOCATION,
                "repositoryName": repository["name"],
            }
            tick = dagit.graphql(
                SCHEDULE_DRY_RUN,
                {
                    "selector": {**selector, "scheduleName": "freshness_cycle_schedule"},
                    "timestamp": DEFAULT_START.timestamp(),
                },
            )["scheduleDryRun"]
            assert tick["__typename"] == "DryRunInstigationTick", tick
            (request,) = tick["evaluationResult"]["runRequests"]
            tags = {t["key"]: t["value"] for t in request["tags"]}
            assert tags[RANGE_START_TAG] == tags[RANGE_END_TAG] == host
            assert "2025-01-06T00:00:00+00:00" in request["runConfigYaml"]

            # -- materialize one host from the UI: the job, the partition tag, the cycle's now
            before_run = set(group_members(dagit.pgid))
            launched = dagit.graphql(
                LAUNCH_RUN,
                {
                    "params": {
                        "selector": {**selector, "jobName": "freshness_cycle"},
                        "runConfigData": {
                            "resources": {"cycle": {"config": {"now": DEFAULT_START.isoformat()}}}
                        },
                        "executionMetadata": {
                            "tags": [{"key": "dagster/partition", "value": host}]
                        },
                    }
                },
            )["launchRun"]
            assert launched["__typename"] == "LaunchRunSuccess", launched
            run_id = launched["run"]["runId"]
            status, deadline = "", time.monotonic() + 90
            while time.monotonic() < deadline:
                status = dagit.graphql(RUN_STATUS, {"id": run_id})["runOrError"]["status"]
                if status in {"SUCCESS", "FAILURE", "CANCELED"}:
                    break
                time.sleep(1)
            assert status == "SUCCESS", f"run {run_id} is {status}:\n{dagit.tail()}"
            run_took = time.monotonic() - served_at

            events = dagit.graphql(RUN_EVENTS, {"id": run_id})["logsForRun"]["events"]
            written = {
                (e["assetKey"]["path"][-1], e["partition"])
                for e in events
                if e["__typename"] == "MaterializationEvent"
            }
            assert written == {(name, host) for name in ASSETS}
            evaluations = {
                e["evaluation"]["checkName"]: e["evaluation"]["success"]
                for e in events
                if e["__typename"] == "AssetCheckEvaluationEvent"
            }
            assert evaluations == dict.fromkeys(set().union(*CHECKS.values()), True)
            seeded_urls = len(seeds.read_text().splitlines()) - 1
            assert Warehouse(home).read("url_state", [host]).height == seeded_urls > 0
            assert web.request_log.snapshot(), "the run fetched nothing from the synthetic web"
        finally:
            if before_run is not None:
                wait_for_run_workers(dagit.pgid, before_run)
            stopping = time.monotonic()
            left = dagit.stop()
            stop_took = time.monotonic() - stopping
            lingering = describe(left)
            if left:
                dagit.kill()
        assert not left, f"still running after SIGINT: {lingering}\n{dagit.tail()}"
        assert dagit.proc.returncode is not None
        assert group_members(dagit.pgid) == []
    print(
        f"seeded in {seeded_at - started:.1f}s, served {served_at - seeded_at:.1f}s later, "
        f"run done {run_took:.1f}s later, "
        f"stopped in {stop_took:.1f}s, total {time.monotonic() - started:.1f}s"
    )
