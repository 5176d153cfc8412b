"""The serving check a verify Job runs against one inference Service: a real request of the
engine's documented API, a check of the answer's documented shape, and the latency of each.

This file is the whole program the Job's container runs (`python3 -c <this file>`, in the
pinned Python image, `VERIFY_IMAGE`): it uses the standard library only. Its input is the
`MIG_VERIFY_TARGET` JSON (see `mig_inference.verify.targets`) and, for services with an API
key, `MIG_VERIFY_API_KEY` from the service's Secret.

What each engine is asked (the shapes checked are the engines' documented ones):
- vLLM and TGI, OpenAI-compatible: `GET /v1/models` must list the served model
  (`{"object": "list", "data": [{"id": ...}]}`; TGI's OpenAPI document names a single
  `ModelInfo` `{"id": ...}` for the same route, which is taken too), then
  `POST /v1/completions` with a short prompt must return `choices[0].text` (and
  `usage.completion_tokens` at least 1 when `usage` is given).
- Triton (KServe open inference protocol and Triton's model repository extension):
  `GET /v2/health/ready` 200, `POST /v2/repository/index {"ready": true}` must list a model
  with state `READY`, and each such model's `GET /v2/models/<name>/ready` 200 and metadata
  `GET /v2/models/<name>` naming it.
- Custom engines: the request the stack gives (`services[].verify`), its status and text.

Connection errors and 429, 502, 503 and 504 are retried until the target's deadline (the
Service may still route to no ready endpoint); any other wrong answer fails at once. On a
failure the last lines it printed, naming the service, the request it sent and what came
back, are also written to the container's termination message, which Pulumi's Job await
reports as the reason `pulumi up` fails.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

RETRIED_STATUSES = (429, 502, 503, 504)
"""Answers that say "not yet" (overloaded, no ready endpoint behind a proxy)."""
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_LIMIT = 4096
"""Kubernetes keeps at most 4096 bytes of a container's termination message."""
REPORT_KEY = "mig_inference_verify"
"""The key of the JSON line that reports the result (what `ephemeral verify` reads)."""
TRITON_MODELS_CHECKED = 8


@dataclass(frozen=True)
class Target:
    """One Service to check (the Job's `MIG_VERIFY_TARGET`)."""

    service: str
    engine: str
    url: str
    """The Service's in-cluster URL, `http://<service>.<namespace>.svc.cluster.local:<port>`."""
    model: str
    """The model the engine serves under (vLLM: `--served-model-name`, else `--model`)."""
    prompt: str
    max_tokens: int
    timeout_seconds: int
    probe: dict[str, Any] | None = None
    """A custom engine's request: `{path, method, body, status, contains}`."""
    api_key_secret: str | None = None
    """The Secret the API key comes from, named in messages (never the key)."""
    model_header: str | None = None
    """Behind the gateway: the header naming the model on requests without a body."""

    @classmethod
    def from_json(cls, text: str) -> Target:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: str | None = None

    def describe(self, base_url: str) -> str:
        line = f"{self.method} {base_url}{self.path}"
        return f"{line} {self.body}" if self.body is not None else line


@dataclass(frozen=True)
class Answer:
    status: int
    """The HTTP status; 0 when no HTTP answer came (see `error`)."""
    body: str
    ms: float
    error: str | None = None

    def brief(self, limit: int = 600) -> str:
        if self.status == 0:
            return f"no answer: {self.error}"
        body = " ".join(self.body.split())
        body = body if len(body) <= limit else body[:limit] + "..."
        return f"HTTP {self.status}: {body}" if body else f"HTTP {self.status} (empty body)"


@dataclass(frozen=True)
class Exchange:
    request: Request
    answer: Answer


Send = Callable[[Request], Answer]


class CheckFailed(Exception):
    def __init__(self, problem: str, exchange: Exchange) -> None:
        super().__init__(problem)
        self.problem = problem
        self.exchange = exchange


@dataclass
class Result:
    target: Target
    exchanges: list[Exchange] = field(default_factory=list)
    failure: CheckFailed | None = None
    answer_text: str | None = None
    """What the engine generated (vLLM, TGI), for the report."""

    @property
    def ok(self) -> bool:
        return self.failure is None


def _json(answer: Answer) -> Any:
    try:
        return json.loads(answer.body)
    except ValueError:
        return None


def status_problem(answer: Answer, expected: int = 200, api_key_secret: str | None = None) -> str:
    """Why an answer with the wrong status (or none) fails, or "" when the status is right."""
    if answer.status == expected:
        return ""
    if answer.status == 0:
        return f"no answer ({answer.error})"
    if answer.status == 401:
        key = (
            f"the check sent the API key of Secret {api_key_secret}"
            if api_key_secret
            else "the check sent no API key: the engine expects one the stack does not name "
            "(apiKeySecret)"
        )
        return f"answered 401 Unauthorized; {key}"
    return f"answered HTTP {answer.status}, expected {expected}"


def models_problem(answer: Answer, model: str) -> str | None:
    """`GET /v1/models`: the OpenAI model list (`data[].id`) names the served model."""
    body = _json(answer)
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        ids = [m.get("id") for m in body["data"] if isinstance(m, dict)]
    elif isinstance(body, dict) and isinstance(body.get("id"), str):
        ids = [body["id"]]
    else:
        return '/v1/models did not answer an OpenAI model list ({"data": [{"id": ...}]})'
    if model not in ids:
        return f"/v1/models lists {ids}, not the model {model!r}"
    return None


def completion_body(target: Target) -> str:
    return json.dumps(
        {
            "model": target.model,
            "prompt": target.prompt,
            "max_tokens": target.max_tokens,
            "temperature": 0,
        }
    )


def completion_text(answer: Answer) -> tuple[str | None, str | None]:
    """`POST /v1/completions`: (the generated text, None) or (None, why the answer is wrong)."""
    body = _json(answer)
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, '/v1/completions did not answer a completion ({"choices": [{"text"}]})'
    text = choices[0].get("text")
    if not isinstance(text, str):
        return None, "/v1/completions answered a choice without text"
    usage = body.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        if usage["completion_tokens"] < 1:
            return None, "/v1/completions generated no token (usage.completion_tokens 0)"
    elif not text:
        return None, "/v1/completions generated no text"
    return text, None


def triton_ready_models(answer: Answer) -> tuple[list[str], str | None]:
    """`POST /v2/repository/index`: the names of the models in state READY."""
    body = _json(answer)
    if not isinstance(body, list):
        return [], "/v2/repository/index did not answer a list of models"
    ready = [
        m["name"]
        for m in body
        if isinstance(m, dict) and isinstance(m.get("name"), str) and m.get("state") == "READY"
    ]
    if not ready:
        states = [
            (m.get("name"), m.get("state"), m.get("reason")) for m in body if isinstance(m, dict)
        ]
        return [], f"no model of the repository is READY: {states or 'the repository is empty'}"
    return sorted(set(ready)), None


def triton_metadata_problem(answer: Answer, name: str) -> str | None:
    """`GET /v2/models/<name>`: model metadata naming the model, with its inputs and outputs."""
    body = _json(answer)
    if not isinstance(body, dict) or body.get("name") != name:
        return f'/v2/models/{name} did not answer the model\'s metadata ({{"name": {name!r}}})'
    if not isinstance(body.get("inputs"), list) or not isinstance(body.get("outputs"), list):
        return f"/v2/models/{name} metadata has no inputs and outputs lists"
    return None


def probe_problem(answer: Answer, probe: dict[str, Any]) -> str | None:
    contains = probe.get("contains")
    if contains and contains not in answer.body:
        return f"the answer does not contain {contains!r}"
    return None


def run_checks(target: Target, send: Send) -> Result:
    """Ask the engine what its API documents and judge each answer; `send` does the HTTP."""
    result = Result(target)

    def ask(request: Request, status: int = 200) -> Exchange:
        exchange = Exchange(request, send(request))
        result.exchanges.append(exchange)
        problem = status_problem(exchange.answer, status, target.api_key_secret)
        if problem:
            raise CheckFailed(problem, exchange)
        return exchange

    def judge(exchange: Exchange, problem: str | None) -> None:
        if problem:
            raise CheckFailed(problem, exchange)

    try:
        if target.engine in ("vllm", "tgi"):
            models = ask(Request("GET", "/v1/models"))
            judge(models, models_problem(models.answer, target.model))
            completion = ask(Request("POST", "/v1/completions", completion_body(target)))
            text, problem = completion_text(completion.answer)
            judge(completion, problem)
            result.answer_text = text
        elif target.engine == "triton":
            ask(Request("GET", "/v2/health/ready"))
            index = ask(Request("POST", "/v2/repository/index", json.dumps({"ready": True})))
            names, problem = triton_ready_models(index.answer)
            judge(index, problem)
            for name in names[:TRITON_MODELS_CHECKED]:
                ask(Request("GET", f"/v2/models/{name}/ready"))
                metadata = ask(Request("GET", f"/v2/models/{name}"))
                judge(metadata, triton_metadata_problem(metadata.answer, name))
        else:
            probe = target.probe or {}
            exchange = ask(
                Request(probe.get("method", "GET"), probe["path"], probe.get("body")),
                int(probe.get("status", 200)),
            )
            judge(exchange, probe_problem(exchange.answer, probe))
    except CheckFailed as failed:
        result.failure = failed
    return result


def report(result: Result) -> dict[str, Any]:
    """The JSON the Job prints last: per request its status and latency."""
    return {
        REPORT_KEY: {
            "service": result.target.service,
            "engine": result.target.engine,
            "url": result.target.url,
            "ok": result.ok,
            "requests": [
                {
                    "request": f"{e.request.method} {e.request.path}",
                    "status": e.answer.status,
                    "ms": round(e.answer.ms, 1),
                }
                for e in result.exchanges
            ],
            "answer": None if result.answer_text is None else result.answer_text[:200],
            "problem": None if result.failure is None else result.failure.problem,
        }
    }


def failure_message(result: Result, log_tail: list[str]) -> str:
    """What the termination message says: the service, why, the request sent, what came back,
    and the Job's last log lines; at most TERMINATION_LIMIT bytes, the first lines kept."""
    assert result.failure is not None
    target, failure = result.target, result.failure
    head = [
        f"verify failed: service {target.service} ({target.engine}): {failure.problem}",
        f"request: {failure.exchange.request.describe(target.url)}",
        f"answer: {failure.exchange.answer.brief()}",
        "last log lines:",
    ]
    text = "\n".join(head)
    tail: list[str] = []
    for line in reversed(log_tail):
        candidate = "\n".join([text, line, *tail])
        if len(candidate.encode()) > TERMINATION_LIMIT:
            break
        tail.insert(0, line)
    message = "\n".join([text, *tail])
    return message.encode()[:TERMINATION_LIMIT].decode(errors="ignore")


class Log:
    """Prints each line at once and keeps the last ones for the termination message."""

    def __init__(self, keep: int = 40) -> None:
        self.lines: list[str] = []
        self.keep = keep

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self.lines = [*self.lines, line][-self.keep :]


class HttpClient:
    """Sends requests to the Service, retrying what may be transient until the deadline."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_seconds: float,
        log: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        model_header: tuple[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model_header = model_header
        self.deadline = clock() + timeout_seconds
        self.log = log
        self.clock = clock
        self.sleep = sleep

    def once(self, request: Request) -> Answer:
        headers = {"Accept": "application/json"}
        data = None
        if request.body is not None:
            data = request.body.encode()
            try:
                json.loads(request.body)
                headers["Content-Type"] = "application/json"
            except ValueError:
                headers["Content-Type"] = "text/plain"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if self.model_header is not None and data is None:
            # Through the gateway, a request without a body names its model in the header the
            # routes match (the body-based router sets it from the others' `model`).
            headers[self.model_header[0]] = self.model_header[1]
        http = urllib.request.Request(
            self.base_url + request.path, data=data, headers=headers, method=request.method
        )
        timeout = max(1.0, min(120.0, self.deadline - self.clock()))
        start = self.clock()
        try:
            with urllib.request.urlopen(http, timeout=timeout) as response:
                body = response.read().decode(errors="replace")
                return Answer(response.status, body, (self.clock() - start) * 1000)
        except urllib.error.HTTPError as error:
            body = error.read().decode(errors="replace")
            return Answer(error.code, body, (self.clock() - start) * 1000)
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            return Answer(0, "", (self.clock() - start) * 1000, error=str(reason))

    def __call__(self, request: Request) -> Answer:
        wait = 2.0
        while True:
            answer = self.once(request)
            self.log(
                f"{request.method} {request.path} -> "
                f"{answer.status or answer.error} in {answer.ms:.0f} ms"
            )
            transient = answer.status == 0 or answer.status in RETRIED_STATUSES
            if not transient or self.clock() + wait > self.deadline:
                return answer
            self.sleep(wait)
            wait = min(wait * 2, 15.0)


def _terminate(message: str) -> None:
    path = os.environ.get("MIG_VERIFY_TERMINATION_LOG", TERMINATION_LOG)
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(message)
    except OSError:
        pass  # not in a pod: the log lines above say it all


def main() -> int:
    target = Target.from_json(os.environ["MIG_VERIFY_TARGET"])
    # The gateway's address when only the cluster knows it (GKE's load balancer).
    url = os.environ.get("MIG_VERIFY_URL") or target.url
    target = replace(target, url=url)
    log = Log()
    log(f"verify: service {target.service} ({target.engine}) at {target.url}")
    header = (target.model_header, target.model) if target.model_header else None
    client = HttpClient(
        target.url, os.environ.get("MIG_VERIFY_API_KEY") or None, target.timeout_seconds, log,
        model_header=header,
    )  # fmt: skip
    result = run_checks(target, client)
    if result.failure is None:
        for exchange in result.exchanges:
            request, ms = exchange.request, exchange.answer.ms
            log(f"ok: {request.method} {request.path} in {ms:.0f} ms")
        log(json.dumps(report(result), sort_keys=True))
        return 0
    message = failure_message(result, log.lines)
    log(json.dumps(report(result), sort_keys=True))
    for line in message.splitlines()[:3]:
        log(line)
    _terminate(message)
    return 1


if __name__ == "__main__":
    sys.exit(main())
