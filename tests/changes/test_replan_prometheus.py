"""`replan` against a real Prometheus (tests/replan_prometheus.py): vLLM's counters generated
here, backfilled with promtool and served on 127.0.0.1; the command line run as users run it
(`python -m mig`, and the installed wheel's `mig-inference`), its stdout, stderr and exit code.

The window ends at END in every run (`--end`): no figure depends on the clock.
"""

from __future__ import annotations

import difflib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mig_inference.changes.observed import Query, observed_load
from mig_inference.changes.prometheus import Credentials, Prometheus
from mig_inference.errors import MigError
from tests.project.test_wheel import built_wheel, fresh_venv
from tests.reference import ROOT
from tests.replan_prometheus import (
    BASIC_PASSWORD,
    BASIC_USER,
    END,
    FIRST_TOKEN_BUCKETS,
    HOUR,
    Engine,
    Server,
    Tls,
    make_tls,
    prometheus,
    proxy,
)

__all__ = ["built_wheel", "fresh_venv"]  # the wheel and its virtualenv, as fixtures here

CHAT = "Qwen/Qwen2.5-1.5B-Instruct"
SUMMARIZE = "meta-llama/Llama-3.1-8B-Instruct"
FLEET = {"cluster": "demand-fleet"}
SELECT_FLEET = 'cluster="demand-fleet"'
TOKEN = "s3cret-bearer-token-for-the-test"
DEMAND_STACK = ROOT / "stacks" / "Pulumi.eks-p4de-demand.yaml"


def fleet_engines() -> list[Engine]:
    """The shipped demand stack's services as a Prometheus saw them: chat at twice its
    requestsPerSecond (60), its engine restarted twice in the window (the counter starts again
    from zero); summarize at a quarter of its 200, queueing 0.2 s, 0.3 s to first token; the
    same chat model in another namespace, and in another cluster the same Prometheus scrapes."""
    return [
        Engine(CHAT, "inference", 120.0, restarts=(END - 40 * 60, END - 10 * 60), labels=FLEET),
        Engine(SUMMARIZE, "inference", 50.0, queue_seconds=0.2, first_token_seconds=0.3,
               labels=FLEET),
        Engine(CHAT, "inference", 500.0, labels={"cluster": "other-fleet"}),
        Engine(CHAT, "other", 1000.0, labels=FLEET),
        # 10 requests/s but for the window's last 10 minutes at 40: the mean is 15.
        Engine("org/bursty", "inference", lambda t: 40.0 if t > END - 600 else 10.0,
               labels=FLEET),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with prometheus(tmp_path_factory.mktemp("fleet"), fleet_engines()) as server:
        yield server


def mig(*argv: str, env: dict[str, str] | None = None, command: list[str] | None = None,
        cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:  # fmt: skip
    run = subprocess.run(
        [*(command or [sys.executable, "-m", "mig"]), *argv],
        capture_output=True, text=True, cwd=cwd, timeout=600, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert "Traceback" not in run.stderr, run.stderr
    return run


def stack_copy(tmp_path: Path, text: str, name: str = "demand") -> Path:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def histogram_quantile(quantile: float, bounds: tuple[float, ...], observed: float) -> float:
    """Prometheus' histogram_quantile when every request took `observed`: linear within the
    bucket that holds it."""
    upper = next(b for b in bounds if observed <= b)
    lower = max((b for b in bounds if b < upper), default=0.0)
    return lower + (upper - lower) * quantile


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


# What Prometheus computes from the samples -------------------------------------------------------


def test_each_model_s_figures_are_what_its_engines_served(fleet: Server) -> None:
    load = observed_load(Prometheus(fleet.url), Query(HOUR, 0.95, SELECT_FLEET), END)
    chat, summarize = load.models[("inference", CHAT)], load.models[("inference", SUMMARIZE)]
    assert load.end == END
    # Two restarts in the window: increase() and rate() count the requests after each reset.
    assert chat.requests_per_second == pytest.approx(120.0, rel=1e-9)
    assert chat.requests == pytest.approx(120.0 * HOUR, rel=1e-9)
    assert summarize.requests_per_second == pytest.approx(50.0, rel=1e-9)
    assert (chat.prompt_tokens_per_request, chat.generation_tokens_per_request) == (400.0, 100.0)
    assert chat.queue_seconds == 0.0
    assert summarize.queue_seconds == pytest.approx(0.2)
    assert summarize.first_token_seconds == pytest.approx(
        histogram_quantile(0.95, FIRST_TOKEN_BUCKETS, 0.3)
    )
    # A rate sample each minute of the hour (Prometheus 2 counts both ends of a range, 3 one).
    assert chat.samples in (60, 61)


def test_the_statistic_is_a_busy_minute_not_the_mean(fleet: Server) -> None:
    client = Prometheus(fleet.url)
    bursty = observed_load(client, Query(HOUR, 0.95, SELECT_FLEET), END).models
    assert bursty[("inference", "org/bursty")].requests_per_second == pytest.approx(40.0)
    assert bursty[("inference", "org/bursty")].mean_requests_per_second == pytest.approx(15.0)
    median = observed_load(client, Query(HOUR, 0.5, SELECT_FLEET), END).models
    assert median[("inference", "org/bursty")].requests_per_second == pytest.approx(10.0)


def test_namespaces_stay_apart_and_a_selector_keeps_one_cluster(fleet: Server) -> None:
    client = Prometheus(fleet.url)
    one = observed_load(client, Query(HOUR, 0.95, SELECT_FLEET), END).models
    assert one[("inference", CHAT)].requests_per_second == pytest.approx(120.0)
    assert one[("other", CHAT)].requests_per_second == pytest.approx(1000.0)
    every = observed_load(client, Query(HOUR, 0.95), END).models
    # Without the selector the other cluster's engines serving the same model count too.
    assert every[("inference", CHAT)].requests_per_second == pytest.approx(620.0)


def test_the_window_s_end_comes_from_prometheus_when_not_given(fleet: Server) -> None:
    client = Prometheus(fleet.url)
    now = client.now()
    assert now > END  # the backfilled data is in the past: no request in the last hour
    with pytest.raises(MigError, match="has no vllm:request_success_total in the 3,600 s before"):
        observed_load(client, Query(HOUR, 0.95, SELECT_FLEET))


# The shipped demand stack, re-planned -------------------------------------------------------------


def test_the_shipped_demand_stack_is_re_planned_from_what_it_served(
    fleet: Server, tmp_path: Path
) -> None:
    original = DEMAND_STACK.read_text(encoding="utf-8")
    current = stack_copy(tmp_path, original, "eks-p4de-demand")
    written = tmp_path / "replanned.yaml"
    run = mig("replan", "--stack-file", str(current), "--prometheus", fleet.url,
              "--end", str(END), "--selector", SELECT_FLEET, "--write", str(written), "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    services = {s["name"]: s for s in answer["services"]}
    chat, summarize, embedder = services["chat"], services["summarize"], services["embedder"]
    assert (chat["observed_requests_per_second"], chat["before"], chat["after"]) == (120.0, 60, 120)
    assert chat["replicas_after"] > chat["replicas_before"] == 7
    assert (summarize["observed_requests_per_second"], summarize["after"]) == (50.0, 50)
    assert summarize["replicas_after"] < summarize["replicas_before"] == 11
    assert (summarize["queue_seconds"], summarize["prompt_tokens_per_request"]) == (0.2, 400.0)
    assert embedder["key"] is None and embedder["reason"].startswith("kept: engine tgi")
    assert embedder["replicas_before"] == embedder["replicas_after"] == 4
    assert (answer["stack_file"], answer["written"], answer["end"]) == (
        str(current), str(written), END,
    )  # fmt: skip
    assert answer["end_time"] == "2026-05-28T20:30:00Z"
    # The user's file is kept but for the two figures; the original is untouched.
    assert changed_lines(original, written.read_text(encoding="utf-8")) == [
        "-      requestsPerSecond: 60", "+      requestsPerSecond: 120",
        "-      requestsPerSecond: 200", "+      requestsPerSecond: 50",
    ]  # fmt: skip
    assert current.read_text(encoding="utf-8") == original
    assert stat.S_IMODE(written.stat().st_mode) == 0o644  # a new file: not the temporary's 0600
    # `change` is what `diff` says of applying the written stack to the current one.
    diff = mig("diff", "--stack-file", str(written), "--deployed", str(current), "--json")
    assert diff.returncode in (0, 1), diff.stderr
    expected = json.loads(diff.stdout)
    expected.pop("gate_breaches")
    assert answer["change"] == expected
    scaled = {s["name"]: s["change"] for s in answer["change"]["services"]}
    assert scaled["embedder"] == "unaffected"
    # A change the simulated `pulumi up` refuses or fails at is still proposed, with a warning,
    # and the gate (`diff`) is what refuses it.
    problems = [*expected["refusals"], *([expected["failure"]] if expected["failure"] else [])]
    assert diff.returncode == (1 if problems else 0)
    for problem in problems:
        assert f"warning: the re-planned stack's change: {problem}" in run.stderr


# Guard rails, as a person runs it: the installed command, text, behind a bearer-token proxy ------

GUARD_STACK = """\
# A team's stack, with comments the re-planned file must keep.
config:
  mig-inference:cloud: eks
  mig-inference:cluster:
    name: guard
    region: us-east-1
    subnetIds: [subnet-0d1e2f3a4b5c60001]
  mig-inference:pools:
    - name: small       # one node of 56 x 1g.10gb
      gpu: A100-80GB
      machineType: p4de.24xlarge
      nodes: 1
      mig: all-1g.10gb
      maxPods: 110
  mig-inference:services:
    # Sized by demand: replan sets requestsPerSecond.
    - {name: young, model: org/young, memoryGiB: 3, requestsPerSecond: 20, throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]}
    - {name: absent, model: org/absent, memoryGiB: 3, requestsPerSecond: 10, throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]}
    - name: capped
      model: org/capped
      memoryGiB: 3
      requestsPerSecond: 10   # the figure replan changes
      throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]
      replan: {maxRequestsPerSecond: 30}
    - {name: idle, model: org/idle, memoryGiB: 3, requestsPerSecond: 10, throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]}
    - {name: saturated, model: org/saturated, memoryGiB: 3, requestsPerSecond: 60, throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]}
    - {name: replaced, model: org/replaced, memoryGiB: 3, requestsPerSecond: 10, throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]}
    - {name: twin-a, model: org/twin, namespace: team-a, memoryGiB: 3, requestsPerSecond: 10, throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]}
    - {name: twin-b, model: org/twin, namespace: team-b, memoryGiB: 3, requestsPerSecond: 10, throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]}
    # A replica count with what one replica serves: replan sets replicas.
    - name: counted
      model: org/counted
      memoryGiB: 3
      profile: 1g.10gb
      replan:
        throughput: [{profile: 1g.10gb, requestsPerSecond: 20}]
    # The end.
"""


def guard_engines() -> list[Engine]:
    return [
        Engine("org/young", "inference", 50.0, start=END - 6 * 60),  # 6 rate samples
        Engine("org/capped", "inference", 80.0),
        Engine("org/idle", "inference", 0.0),
        Engine("org/saturated", "inference", 20.0, queue_seconds=1.0),
        # Its pod replaced half-way: the old series ends, a new one starts.
        Engine("org/replaced", "inference", 50.0, pod="pod-0", stop=END - 30 * 60),
        Engine("org/replaced", "inference", 50.0, pod="pod-1", start=END - 30 * 60 + 15),
        Engine("org/twin", "team-a", 30.0),
        Engine("org/twin", "team-b", 90.0),
        Engine("org/counted", "inference", 45.0),
    ]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with prometheus(tmp_path_factory.mktemp("guard"), guard_engines()) as server:
        yield server


def test_every_guard_rail_from_the_installed_command(
    guarded: Server, fresh_venv: Path, tmp_path: Path
) -> None:
    current = stack_copy(tmp_path, GUARD_STACK, "guard")
    current.chmod(0o640)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    with proxy(guarded.url, TOKEN) as url:
        run = mig("replan", "--stack-file", str(current), "--prometheus", url,
                  "--end", "2026-05-28T20:30:00Z",
                  "--bearer-token-file", str(token), "--write", str(current),
                  command=[str(fresh_venv / "bin" / "mig-inference")], cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = {line.split()[0]: line for line in run.stdout.splitlines()[4:14] if line.strip()}
    assert set(rows) == {"young", "absent", "capped", "idle", "saturated", "replaced", "twin-a",
                         "twin-b", "counted"}  # fmt: skip
    assert (
        rows["young"].split()[1:3] == ["50", "6"] and "kept: 6 sample(s), too few" in rows["young"]
    )
    assert rows["absent"].split()[1:4] == ["-", "0", "-"] and "kept: no samples" in rows["absent"]
    assert rows["capped"].split()[1:7] == ["80", "61", "requestsPerSecond", "10", "30", "1"]
    assert rows["capped"].endswith("the observed rate, bounded by replan.maxRequestsPerSecond")
    assert rows["idle"].split()[4:8] == ["10", "10", "1", "->"]
    assert "never shrunk to zero" in rows["idle"]
    assert rows["saturated"].split()[4:6] == ["60", "60"] and "saturated" in rows["saturated"]
    assert rows["replaced"].split()[1] == "50" and rows["replaced"].split()[5] == "50"
    assert rows["twin-a"].split()[5] == "30" and rows["twin-b"].split()[5] == "90"
    assert rows["counted"].split()[3:8] == ["replicas", "1", "3", "1", "->"]
    assert "warning: service young: kept: 6 one-minute rate sample(s)" in run.stderr
    assert "warning: service absent: kept: no org/absent requests" in run.stderr
    assert "change (the re-planned stack applied to the current one):" in run.stdout
    assert f"wrote {current}" in run.stdout
    # Written over the stack file itself: only the changed figures' lines differ, comments kept.
    after = current.read_text(encoding="utf-8")
    lines = changed_lines(GUARD_STACK, after)
    removed = [line[1:] for line in lines if line.startswith("-")]
    added = [line[1:] for line in lines if line.startswith("+")]
    assert [line.split("name: ")[1].split(",")[0] for line in removed[1:]] == [
        "replaced", "twin-a", "twin-b",
    ]  # fmt: skip
    assert removed[0] == "      requestsPerSecond: 10   # the figure replan changes"
    assert added == [
        *(line.replace("requestsPerSecond: 10", f"requestsPerSecond: {rate}", 1)
          for line, rate in zip(removed, (30, 50, 30, 90), strict=True)),
        "      replicas: 3",
    ]  # fmt: skip
    assert after.endswith("requestsPerSecond: 20}]\n      replicas: 3\n    # The end.\n")
    # The token reached the proxy (the run worked) and nowhere else.
    assert TOKEN not in run.stdout + run.stderr + after
    assert stat.S_IMODE(current.stat().st_mode) == 0o640  # replaced whole, its mode kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.guard.yaml", "token"]


def test_a_re_planned_stack_that_no_longer_fits_is_an_error_and_not_written(
    guarded: Server, tmp_path: Path
) -> None:
    """org/twin in team-b served 90 requests/s; at 1 per replica that is 90 of the pool's 56."""
    current = stack_copy(tmp_path, GUARD_STACK.split("  mig-inference:services:")[0] + (
        "  mig-inference:services:\n"
        "    - {name: twin-b, model: org/twin, namespace: team-b, memoryGiB: 3, requestsPerSecond: 10,\n"
        "       throughput: [{profile: 1g.10gb, requestsPerSecond: 1}]}\n"
    ), "full")  # fmt: skip
    target = tmp_path / "replanned.yaml"
    run = mig("replan", "--stack-file", str(current), "--prometheus", guarded.url,
              "--end", str(END), "--write", str(target))  # fmt: skip
    failed(run, f"error: {current}: the re-planned stack does not plan: mig-inference:services[0]"
           ".requestsPerSecond: needs 90 requests/s; what pool small has left serves at most 56",
           "raise the pool's nodes, or bound the service")  # fmt: skip
    assert not target.exists()


# Failures: one clear line, exit 1, nothing written -----------------------------------------------


def failed(run: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert run.returncode == 1, (run.stdout, run.stderr)
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, run.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def replan(url: str, *extra: str, stack: str = "eks-p4de-demand") -> list[str]:
    return ["replan", "--stack", stack, "--prometheus", url, "--end", str(END), *extra]


def test_a_prometheus_that_is_down_is_one_error_and_nothing_is_written(tmp_path: Path) -> None:
    with proxy() as url:
        dead = url  # the proxy's port, closed once it stops
    target = tmp_path / "out.yaml"
    error = failed(mig(*replan(dead, "--write", str(target))), dead, "cannot be reached")
    assert "Connection refused" in error
    assert list(tmp_path.iterdir()) == []


def test_a_bearer_token_refused_or_missing(guarded: Server, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    with proxy(guarded.url, TOKEN) as url:
        failed(mig(*replan(url)), "HTTP 401 (unauthorized): no credentials were given")
        # The proxy echoes the header it refused: the message must not.
        error = failed(mig(*replan(url, "--bearer-token-file", str(wrong))),
                       "HTTP 403 (forbidden): the credentials given were refused")  # fmt: skip
        assert "not-the-token" not in error
        env = {"PROM_TOKEN": TOKEN}
        client = Prometheus(url, Credentials(bearer_token=TOKEN))
        assert client.query("vector(1)", END)[0].value == 1.0
        run = mig(*replan(url, "--bearer-token-env", "UNSET_VARIABLE"), env=env)
        failed(run, "--bearer-token-env: names an environment variable that is unset or empty")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("tls"))


def test_basic_auth_and_tls_against_prometheus_s_own_web_config(tls: Tls, tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text(BASIC_PASSWORD)
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong")
    engines = [Engine(CHAT, "inference", 120.0)]
    with prometheus(tmp_path / "p", engines, basic_auth=True, tls=tls) as server:
        client = Prometheus(server.url, Credentials(user=BASIC_USER, password=BASIC_PASSWORD),
                            ca_file=str(tls.ca))  # fmt: skip
        assert client.query("vector(1)", END)[0].value == 1.0
        ca = ("--ca-file", str(tls.ca))
        failed(mig(*replan(server.url, *ca)), "HTTP 401 (unauthorized): no credentials")
        user = ("--basic-auth-user", BASIC_USER)
        failed(mig(*replan(server.url, *ca, *user, "--basic-auth-password-file", str(wrong))),
               "HTTP 401 (unauthorized): the credentials given were refused")  # fmt: skip
        mismatch = (
            "--ca-file",
            str(tls.other_ca),
            *user,
            "--basic-auth-password-file",
            str(password),
        )
        failed(mig(*replan(server.url, *mismatch)), "its TLS certificate is not trusted",
               "give the certificate authority that signed it with --ca-file")  # fmt: skip
        failed(mig(*replan(server.url, *user, "--basic-auth-password-file", str(password))),
               "its TLS certificate is not trusted")  # fmt: skip
    failed(mig(*replan("http://127.0.0.1:9", "--ca-file", str(tls.ca))),
           "--ca-file: applies to an https:// Prometheus only")  # fmt: skip


def test_a_query_prometheus_refuses_is_its_own_error(tmp_path: Path) -> None:
    engines = [Engine(CHAT, "inference", 120.0)]
    with prometheus(tmp_path / "p", engines, flags=["--query.max-samples=10"]) as server:
        failed(mig(*replan(server.url)), server.url, "answered HTTP 422, execution:",
               "too many samples")  # fmt: skip


def test_what_is_not_a_prometheus_answer(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    with proxy(html=True) as url:
        # A sign-in page that shows the header it got: the token is cut out of the message.
        error = failed(mig(*replan(url, "--bearer-token-file", str(token))),
                       "answered HTTP 200 with something other than Prometheus' JSON",
                       "Sign in (as Bearer <redacted>)")  # fmt: skip
        assert TOKEN not in error
    with proxy(redirect_to="http://127.0.0.1:9/elsewhere") as url:
        failed(mig(*replan(url)), "answered HTTP 302, a redirect, which is not followed")
    with proxy(delay=3.0) as url:
        failed(mig(*replan(url, "--timeout", "1")), "did not answer within 1 s (--timeout)")


def test_no_vllm_series_at_all_is_one_error(fleet: Server) -> None:
    failed(mig(*replan(fleet.url, "--selector", 'cluster="nowhere"')),
           "has no vllm:request_success_total in the 3,600 s before 1780000200",
           "does --selector match them?")  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [(["--window", "5m"], ["--window: is 300 s; a window of at least 10 minutes"]),
     (["--window", "an hour"], ["--window: must be a Prometheus duration"]),
     (["--quantile", "0"], ["--quantile: must be in (0, 1]"]),
     (["--min-samples", "0"], ["--min-samples: must be at least 1"]),
     (["--tolerance", "100"], ["--tolerance: must be a percentage in [0, 100)"]),
     (["--end", "yesterday"], ["--end: must be unix seconds or an RFC 3339 time"]),
     (["--end", "2026-05-28T20:30:00"], ["--end: must be unix seconds or an RFC 3339 time with its zone"]),
     (["--selector", 'cluster="a"} or vector(1'], ["--selector: must be PromQL label matchers"]),
     (["--basic-auth-password-env", "HOME"], ["--basic-auth-password: needs --basic-auth-user"]),
     (["--basic-auth-user", "u"], ["--basic-auth-user: needs its password",
                                   "--basic-auth-password-file or --basic-auth-password-env"]),
     (["--window", "100y"], ["--window: is 3,153,600,000 s", "at most 90 days",
                             "Prometheus keeps 15 days by default"]),
     (["--window", "91d"], ["--window: is 7,862,400 s", "at most 90 days"]),
     (["--bearer-token-file", "/nonexistent/token"], ["--bearer-token-file: cannot read: No such file"])],
)  # fmt: skip
def test_bad_options_are_one_error_naming_the_option(argv: list[str], fragments: list[str]) -> None:
    failed(mig(*replan("http://127.0.0.1:9", *argv)), *fragments)


def test_credentials_in_the_url_are_refused_without_echoing_them() -> None:
    error = failed(
        mig(*replan("http://admin:hunter2@127.0.0.1:9")), "--prometheus: must not carry credentials"
    )
    assert "hunter2" not in error


def test_json_failures_are_the_cli_s_error_document() -> None:
    run = mig(*replan("ftp://127.0.0.1", "--json"))
    assert run.returncode == 1
    [error] = json.loads(run.stdout)["errors"]
    assert (error["key"], error["value"]) == ("--prometheus", "ftp://127.0.0.1")


def test_write_refuses_a_read_only_file_or_a_folder_that_takes_none(tmp_path: Path) -> None:
    locked = tmp_path / "locked.yaml"
    locked.write_text("as it was\n")
    locked.chmod(0o444)
    failed(mig(*replan("http://127.0.0.1:9", "--write", str(locked))), "--write: is read-only")
    assert locked.read_text() == "as it was\n"
    failed(mig(*replan("http://127.0.0.1:9", "--write", str(locked / "x.yaml"))),
           "is not a directory")  # fmt: skip
    failed(mig(*replan("http://127.0.0.1:9", "--write", "/proc/replanned.yaml")),
           "--write: cannot write:")  # fmt: skip
    failed(mig(*replan("http://127.0.0.1:9", "--write", str(tmp_path))), "--write: is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked.yaml"]


def test_without_prometheus_a_clone_skips_and_ci_fails(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "from tests.replan_prometheus import binaries\n\n\ndef test_probe():\n    binaries()\n"
    )
    argv = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-rs",
            str(probe)]  # fmt: skip
    bare = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT)}
    clone = subprocess.run(argv, cwd=ROOT, env={**os.environ, **bare, "MIG_REQUIRE_PROMETHEUS": ""},
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert clone.returncode == 0 and "1 skipped" in clone.stdout, clone.stdout
    assert "apt-get install prometheus" in clone.stdout
    ci = subprocess.run(argv, cwd=ROOT, env={**os.environ, **bare, "MIG_REQUIRE_PROMETHEUS": "1"},
                        capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert ci.returncode == 1 and "may not skip" in ci.stdout, ci.stdout


def test_write_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    from mig_inference.cli.replan import _target, _write_atomically

    real = tmp_path / "real" / "Pulumi.x.yaml"
    real.parent.mkdir()
    real.write_text("as it was\n")
    link = tmp_path / "Pulumi.x.yaml"
    link.symlink_to(real)
    target = _target(str(link))
    _write_atomically(target, "replanned\n")
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text() == "replanned\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["Pulumi.x.yaml"]


def test_a_long_window_warns_of_prometheus_default_retention() -> None:
    from mig_inference.cli.replan import _window_warnings

    assert _window_warnings(15 * 86400) == []
    [warning] = _window_warnings(30 * 86400)
    assert "--window is 30 days" in warning and "15 days" in warning
