"""The serving check's request/answer logic against recorded answers of each engine (written
from their documented shapes: tests/verify_answers/SOURCES.md), and the programs themselves
run as the cluster runs them (`python3 -c <source>`) against a local HTTP server and a fake
nvidia-smi."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mig_inference.plan.model import WHOLE_GPU
from mig_inference.verify import probe, slice_check
from mig_inference.verify.probe import Answer, Request, Target, run_checks
from mig_inference.verify.targets import program_source

ANSWERS = Path(__file__).parent.parent / "verify_answers"


def recorded(name: str, status: int = 200) -> Answer:
    return Answer(status, (ANSWERS / name).read_text(), 12.5)


def target(engine: str, model: str = "Qwen/Qwen2.5-0.5B-Instruct", **extra: object) -> Target:
    return Target(
        service="chat",
        engine=engine,
        url="http://chat.inference.svc.cluster.local:8000",
        model=model,
        prompt="The capital of France is",
        max_tokens=8,
        timeout_seconds=60,
        **extra,  # type: ignore[arg-type]
    )


class Replay:
    """A `send` that answers each (method, path) from recorded answers, and records what was
    sent."""

    def __init__(self, answers: dict[tuple[str, str], Answer]) -> None:
        self.answers = answers
        self.sent: list[Request] = []

    def __call__(self, request: Request) -> Answer:
        self.sent.append(request)
        return self.answers[(request.method, request.path)]


def test_vllm_lists_the_model_then_completes() -> None:
    send = Replay(
        {
            ("GET", "/v1/models"): recorded("vllm_models.json"),
            ("POST", "/v1/completions"): recorded("vllm_completion.json"),
        }
    )
    result = run_checks(target("vllm"), send)
    assert result.ok and result.answer_text == " Paris. It is known for"
    assert [(r.method, r.path) for r in send.sent] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/completions"),
    ]
    body = json.loads(send.sent[1].body or "")
    assert body == {
        "model": "Qwen/Qwen2.5-0.5B-Instruct",
        "prompt": "The capital of France is",
        "max_tokens": 8,
        "temperature": 0,
    }
    report = probe.report(result)[probe.REPORT_KEY]
    assert [r["ms"] for r in report["requests"]] == [12.5, 12.5] and report["ok"]


def test_tgi_answers_in_its_own_documented_shapes() -> None:
    model = "mistralai/Mistral-7B-Instruct-v0.3"
    send = Replay(
        {
            ("GET", "/v1/models"): recorded("tgi_models.json"),
            ("POST", "/v1/completions"): recorded("tgi_completion.json"),
        }
    )
    assert run_checks(target("tgi", model), send).ok
    # TGI's OpenAPI document names one ModelInfo for /v1/models: taken too.
    single = Answer(200, json.dumps({"id": model, "object": "model"}), 1)
    assert probe.models_problem(single, model) is None


@pytest.mark.parametrize(
    ("answers", "problem"),
    [
        (
            {("GET", "/v1/models"): recorded("vllm_models.json")},
            "lists ['Qwen/Qwen2.5-0.5B-Instruct'], not the model 'other/model'",
        ),
        (
            {("GET", "/v1/models"): recorded("vllm_unauthorized.json", 401)},
            "answered 401 Unauthorized; the check sent no API key",
        ),
        (
            {("GET", "/v1/models"): recorded("vllm_error.json", 404)},
            "answered HTTP 404, expected 200",
        ),
        (
            {("GET", "/v1/models"): Answer(200, "<html>nginx</html>", 1)},
            "did not answer an OpenAI model list",
        ),
    ],
)
def test_vllm_wrong_answers_name_what_is_wrong(
    answers: dict[tuple[str, str], Answer], problem: str
) -> None:
    result = run_checks(target("vllm", "other/model"), Replay(answers))
    assert result.failure is not None and problem in result.failure.problem


def test_a_completion_without_text_or_tokens_fails() -> None:
    models = {("GET", "/v1/models"): recorded("vllm_models.json")}
    empty = json.loads(recorded("vllm_completion.json").body)
    empty["choices"][0]["text"] = ""
    empty["usage"]["completion_tokens"] = 0
    for answer, problem in [
        (Answer(200, json.dumps(empty), 1), "generated no token"),
        (Answer(200, json.dumps({"choices": []}), 1), "did not answer a completion"),
        (recorded("vllm_error_older.json", 404), "answered HTTP 404"),
    ]:
        result = run_checks(target("vllm"), Replay({**models, ("POST", "/v1/completions"): answer}))
        assert result.failure is not None and problem in result.failure.problem


def test_a_keyed_service_names_the_secret_its_key_came_from() -> None:
    send = Replay({("GET", "/v1/models"): recorded("vllm_unauthorized.json", 401)})
    result = run_checks(target("vllm", api_key_secret="chat-credentials"), send)
    assert result.failure is not None
    assert "the API key of Secret chat-credentials" in result.failure.problem


def test_triton_ready_index_and_each_ready_models_endpoints() -> None:
    send = Replay(
        {
            ("GET", "/v2/health/ready"): Answer(200, "", 1),
            ("POST", "/v2/repository/index"): recorded("triton_index.json"),
            ("GET", "/v2/models/densenet_onnx/ready"): Answer(200, "", 1),
            ("GET", "/v2/models/densenet_onnx"): recorded("triton_metadata.json"),
        }
    )
    assert run_checks(target("triton", "/models"), send).ok
    assert json.loads(send.sent[1].body or "") == {"ready": True}
    # The UNAVAILABLE model is not asked for.
    assert ("GET", "/v2/models/simple/ready") not in [(r.method, r.path) for r in send.sent]


def test_triton_without_a_ready_model_or_with_wrong_metadata_fails() -> None:
    unavailable = Answer(200, json.dumps([{"name": "simple", "state": "UNAVAILABLE"}]), 1)
    result = run_checks(
        target("triton", "/models"),
        Replay({("GET", "/v2/health/ready"): Answer(200, "", 1),
                ("POST", "/v2/repository/index"): unavailable}),
    )  # fmt: skip
    assert (
        result.failure is not None
        and "no model of the repository is READY" in result.failure.problem
    )
    wrong = Answer(200, json.dumps({"name": "other", "inputs": [], "outputs": []}), 1)
    assert "did not answer the model's metadata" in (
        probe.triton_metadata_problem(wrong, "densenet_onnx") or ""
    )


def test_a_custom_engine_gets_the_stacks_probe() -> None:
    custom = {"path": "/generate", "method": "POST", "body": '{"inputs": "hi"}', "status": 201,
              "contains": "generated_text"}  # fmt: skip
    ok = Replay({("POST", "/generate"): Answer(201, '{"generated_text": "hello"}', 3)})
    assert run_checks(target("custom", probe=custom), ok).ok
    assert ok.sent[0].body == '{"inputs": "hi"}'
    for answer, problem in [
        (Answer(200, '{"generated_text": "x"}', 1), "answered HTTP 200, expected 201"),
        (Answer(201, "{}", 1), "does not contain 'generated_text'"),
    ]:
        result = run_checks(target("custom", probe=custom), Replay({("POST", "/generate"): answer}))
        assert result.failure is not None and problem in result.failure.problem


def test_the_failure_message_names_service_request_answer_and_fits_a_termination_message() -> None:
    result = run_checks(
        target("vllm"),
        Replay({("GET", "/v1/models"): recorded("vllm_models.json"),
                ("POST", "/v1/completions"): recorded("vllm_error.json", 500)}),
    )  # fmt: skip
    message = probe.failure_message(result, [f"log line {i} " + "x" * 200 for i in range(40)])
    lines = message.splitlines()
    assert lines[0] == "verify failed: service chat (vllm): answered HTTP 500, expected 200"
    assert lines[1].startswith(
        "request: POST http://chat.inference.svc.cluster.local:8000/v1/completions {"
    )
    assert lines[2].startswith('answer: HTTP 500: {"error"')
    assert lines[3] == "last log lines:" and lines[-1].startswith("log line 39 ")
    assert len(message.encode()) <= probe.TERMINATION_LIMIT


class Scripted(probe.HttpClient):
    """The real retry loop over scripted answers, on a fake clock."""

    def __init__(self, answers: list[Answer], timeout: float, now: list[float]) -> None:
        super().__init__("http://x", None, timeout, print, clock=lambda: now[0],
                         sleep=lambda s: now.__setitem__(0, now[0] + s))  # fmt: skip
        self.answers = answers
        self.sent: list[Request] = []

    def once(self, request: Request) -> Answer:
        self.sent.append(request)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_transient_answers_are_retried_until_the_deadline_others_are_not() -> None:
    now = [0.0]
    answers = [Answer(0, "", 1, error="Connection refused"), recorded("tgi_overloaded.json", 429),
               recorded("tgi_models.json")]  # fmt: skip
    assert Scripted(answers, 60, now)(Request("GET", "/v1/models")).status == 200
    assert now[0] == 6.0  # waited 2 s, then 4 s
    failing = Scripted([Answer(500, "boom", 1)], 60, now)
    assert failing(Request("GET", "/")).status == 500
    assert now[0] == 6.0 and len(failing.sent) == 1  # not retried
    assert Scripted([Answer(503, "", 1)], 20, now)(Request("GET", "/")).status == 503
    assert 6.0 + 14 <= now[0] <= 6.0 + 20  # retried until the deadline, never past it


# The programs as the cluster runs them.


class Engine(http.server.BaseHTTPRequestHandler):
    """A local stand-in for vLLM: recorded answers, an API key, and a broken completion."""

    api_key = "k-123"
    broken = False

    def _answer(self, status: int, name: str) -> None:
        body = (ANSWERS / name).read_bytes()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {self.api_key}":
            return True
        self._answer(401, "vllm_unauthorized.json")
        return False

    def do_GET(self) -> None:
        if self._authorized():
            self._answer(200, "vllm_models.json")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if self._authorized():
            self._answer(500 if self.broken else 200,
                         "vllm_error.json" if self.broken else "vllm_completion.json")  # fmt: skip

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[tuple[str, type[Engine]]]:
    handler = type("Handler", (Engine,), {"broken": False})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def run_program(
    module: str, env: dict[str, str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    termination = tmp_path / "termination-log"
    return subprocess.run(
        [sys.executable, "-c", program_source(module)],
        env={"PATH": os.environ["PATH"], "MIG_VERIFY_TERMINATION_LOG": str(termination), **env},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_probe_program_passes_a_serving_engine_and_reports_latency(
    engine: tuple[str, type[Engine]], tmp_path: Path
) -> None:
    url, _handler = engine
    spec = {**target("vllm").__dict__, "url": url, "api_key_secret": "chat-credentials"}
    run = run_program("probe", {"MIG_VERIFY_TARGET": json.dumps(spec),
                                "MIG_VERIFY_API_KEY": "k-123"}, tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    last = json.loads(run.stdout.splitlines()[-1])[probe.REPORT_KEY]
    assert last["ok"] and [r["request"] for r in last["requests"]] == [
        "GET /v1/models",
        "POST /v1/completions",
    ]
    assert all(r["ms"] >= 0 for r in last["requests"]) and "k-123" not in run.stdout
    assert not (tmp_path / "termination-log").exists()


def test_the_probe_program_fails_naming_the_service_and_writes_its_termination_message(
    engine: tuple[str, type[Engine]], tmp_path: Path
) -> None:
    url, handler = engine
    handler.broken = True
    spec = {**target("vllm").__dict__, "url": url, "api_key_secret": "chat-credentials"}
    run = run_program("probe", {"MIG_VERIFY_TARGET": json.dumps(spec),
                                "MIG_VERIFY_API_KEY": "k-123"}, tmp_path)  # fmt: skip
    assert run.returncode == 1
    message = (tmp_path / "termination-log").read_text()
    assert message.startswith("verify failed: service chat (vllm): answered HTTP 500")
    assert f"request: POST {url}/v1/completions" in message and "k-123" not in message
    # The same three lines end the log, where a crash would leave FallbackToLogsOnError's.
    assert run.stdout.splitlines()[-3] == message.splitlines()[0]
    # A wrong key: 401, and the message names the Secret it came from, not the key.
    handler.broken = False
    run = run_program("probe", {"MIG_VERIFY_TARGET": json.dumps(spec),
                                "MIG_VERIFY_API_KEY": "wrong"}, tmp_path)  # fmt: skip
    assert run.returncode == 1
    assert (
        "401 Unauthorized; the check sent the API key of Secret chat-credentials"
        in (tmp_path / "termination-log").read_text()
    )


def test_the_probe_program_gives_up_on_a_service_that_never_answers(tmp_path: Path) -> None:
    spec = {**target("vllm").__dict__, "url": "http://127.0.0.1:9", "timeout_seconds": 1}
    run = run_program("probe", {"MIG_VERIFY_TARGET": json.dumps(spec)}, tmp_path)
    assert run.returncode == 1
    assert (
        "verify failed: service chat (vllm): no answer"
        in (tmp_path / "termination-log").read_text()
    )


# The slice check.


@pytest.mark.parametrize(
    ("output", "profile", "problem"),
    [
        ("nvidia-smi-mig.txt", "1g.5gb", None),
        ("nvidia-smi-mig-old-driver.txt", "3g.20gb", None),
        ("nvidia-smi-whole.txt", WHOLE_GPU, None),
        ("nvidia-smi-mig.txt", "2g.10gb", "expected a MIG device 2g.10gb, sees a 1g.5gb"),
        ("nvidia-smi-whole.txt", "1g.5gb", "expected one MIG device 1g.5gb, sees no MIG device"),
        ("nvidia-smi-mig.txt", WHOLE_GPU, "expected one whole GPU, sees MIG devices ['1g.5gb']"),
    ],
)
def test_the_slice_check_reads_nvidia_smi(output: str, profile: str, problem: str | None) -> None:
    found = slice_check.slice_problem((ANSWERS / output).read_text(), profile)
    assert found == problem or (
        problem is not None and found is not None and found.startswith(problem)
    )


def test_two_devices_or_none_fail_the_slice_check() -> None:
    two = (ANSWERS / "nvidia-smi-mig.txt").read_text() + (
        "  MIG 1g.5gb      Device  1: (UUID: MIG-a686709d-6dc2-542a-8851-0d2508448c10)\n"
    )
    assert "sees ['1g.5gb', '1g.5gb']" in (slice_check.slice_problem(two, "1g.5gb") or "")
    assert slice_check.slice_problem("No devices were found\n", "1g.5gb") == (
        "nvidia-smi lists no GPU: No devices were found"
    )
    assert slice_check.WHOLE_GPU == WHOLE_GPU


@pytest.mark.parametrize(("profile", "code"), [("1g.5gb", 0), ("3g.20gb", 1)])
def test_the_slice_check_program_with_a_fake_nvidia_smi(
    tmp_path: Path, profile: str, code: int
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && cat '{ANSWERS / 'nvidia-smi-mig.txt'}'\n")
    fake.chmod(0o755)
    run = run_program(
        "slice_check",
        {"MIG_EXPECT_PROFILE": profile, "MIG_SERVICE": "chat",
         "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        tmp_path,
    )  # fmt: skip
    assert run.returncode == code, run.stdout + run.stderr
    if code:
        assert (tmp_path / "termination-log").read_text() == (
            "slice check failed: service chat, planned 3g.20gb: expected a MIG device 3g.20gb, "
            "sees a 1g.5gb"
        )
    else:
        assert "service chat sees one 1g.5gb device" in run.stdout


def test_the_slice_check_program_without_nvidia_smi(tmp_path: Path) -> None:
    run = run_program("slice_check", {"MIG_EXPECT_PROFILE": "1g.5gb", "PATH": "/nonexistent"},
                      tmp_path)  # fmt: skip
    assert run.returncode == 1
    assert "nvidia-smi is not in this container" in (tmp_path / "termination-log").read_text()
