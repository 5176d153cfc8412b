"""A real Prometheus for the replan tests: vLLM's metrics as its engines would have exported them,
generated here, backfilled with `promtool tsdb create-blocks-from openmetrics` into a fresh
storage folder, and served by `prometheus` on 127.0.0.1 (Debian's package: `.ci/run` installs
it).

Without the two binaries the tests skip, saying so; with `MIG_REQUIRE_PROMETHEUS=1` (set by
`.ci/run`) they fail instead, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

REQUIRE_PROMETHEUS = os.environ.get("MIG_REQUIRE_PROMETHEUS") == "1"
SCRAPE_SECONDS = 15
END = 1_780_000_200
"""The window's end every test pins (a whole minute, 2026-05-28T20:30:00Z)."""
HOUR = 3600
# vLLM's own bucket bounds (vllm/v1/metrics/loggers.py): time to first token, and the request
# latency buckets its queue-time histogram uses.
FIRST_TOKEN_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                       2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
QUEUE_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
BASIC_USER = "replan"
BASIC_PASSWORD = "replan-test-password"
BASIC_HASH = "$2b$04$F1CwK1qT1gOdJNGfQsliUeQ7k46eaVwPecSfgjEEOcgQOUBjQKslu"
"""bcrypt (cost 4) of BASIC_PASSWORD, as Prometheus' web config takes it (made once with Python 3.11's
`crypt.crypt(BASIC_PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))`)."""


def missing(reason: str) -> NoReturn:
    if REQUIRE_PROMETHEUS:
        pytest.fail(f"{reason} (MIG_REQUIRE_PROMETHEUS=1: the Prometheus tests may not skip)")
    pytest.skip(reason)


def binaries() -> tuple[str, str]:
    found = shutil.which("prometheus"), shutil.which("promtool")
    if None in found:
        missing(
            "no prometheus and promtool on PATH: `apt-get install prometheus` (Debian's package "
            "brings both) to run the tests against a real Prometheus"
        )
    return found[0] or "", found[1] or ""


@dataclass(frozen=True)
class Engine:
    """One vLLM engine's series (one pod): `rate` requests/s while it runs, from `start` to
    `stop`, its counters starting again from zero at each time in `restarts` (a restarted
    container keeps its pod name, so the series is the same)."""

    model: str
    namespace: str
    rate: float | Callable[[int], float]
    pod: str = "pod-0"
    start: int = END - 2 * HOUR
    stop: int = END
    restarts: tuple[int, ...] = ()
    prompt_tokens: int = 400
    generation_tokens: int = 100
    queue_seconds: float = 0.0
    first_token_seconds: float = 0.07
    labels: dict[str, str] = field(default_factory=dict)

    def rate_at(self, t: int) -> float:
        return self.rate(t) if callable(self.rate) else self.rate

    def requests(self) -> list[tuple[int, float]]:
        """(scrape time, the counter's value) from `start` to `stop`."""
        points, count = [], 0.0
        for t in range(self.start, self.stop + 1, SCRAPE_SECONDS):
            if t in self.restarts:
                count = 0.0
            if t > self.start:
                count += self.rate_at(t) * SCRAPE_SECONDS
            points.append((t, count))
        return points


def _labels(engine: Engine, **extra: str) -> str:
    labels = {"namespace": engine.namespace, "pod": engine.pod, "model_name": engine.model,
              "engine": "0", **engine.labels, **extra}  # fmt: skip
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def _histogram(
    name: str,
    engines: Sequence[Engine],
    bounds: Sequence[float],
    seconds: Callable[[Engine], float],
) -> list[str]:
    lines = [f"# TYPE {name} histogram"]
    for engine in engines:
        observed = seconds(engine)
        for le in [*(f"{b}" for b in bounds), "+Inf"]:
            inside = le == "+Inf" or observed <= float(le)
            for t, count in engine.requests():
                lines.append(
                    f"{name}_bucket{{{_labels(engine, le=le)}}} {count if inside else 0} {t}"
                )
        for t, count in engine.requests():
            lines.append(f"{name}_sum{{{_labels(engine)}}} {count * observed} {t}")
        for t, count in engine.requests():
            lines.append(f"{name}_count{{{_labels(engine)}}} {count} {t}")
    return lines


def openmetrics(engines: Sequence[Engine]) -> str:
    """The engines' vLLM metrics, every family's samples together and each series in time order
    (what promtool's OpenMetrics reader needs)."""
    lines = []
    for family, per_request in (
        ("vllm:request_success", lambda _: 1),
        ("vllm:prompt_tokens", lambda e: e.prompt_tokens),
        ("vllm:generation_tokens", lambda e: e.generation_tokens),
    ):
        lines.append(f"# TYPE {family} counter")
        for engine in engines:
            extra = {"finished_reason": "stop"} if family == "vllm:request_success" else {}
            for t, count in engine.requests():
                value = count * per_request(engine)
                lines.append(f"{family}_total{{{_labels(engine, **extra)}}} {value} {t}")
    lines += _histogram("vllm:request_queue_time_seconds", engines, QUEUE_BUCKETS,
                        lambda e: e.queue_seconds)  # fmt: skip
    lines += _histogram("vllm:time_to_first_token_seconds", engines, FIRST_TOKEN_BUCKETS,
                        lambda e: e.first_token_seconds)  # fmt: skip
    return "\n".join([*lines, "# EOF", ""])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Tls:
    ca: Path
    cert: Path
    key: Path
    other_ca: Path
    """A certificate authority that did not sign the server's certificate."""


def make_tls(folder: Path) -> Tls:
    """A certificate authority and a server certificate for 127.0.0.1, made with openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        missing("no openssl on PATH: the TLS test makes its certificates with it")
    folder.mkdir(parents=True, exist_ok=True)

    def run(*argv: str) -> None:
        subprocess.run([openssl, *argv], cwd=folder, check=True, capture_output=True, timeout=60)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for name in ("ca", "other-ca"):
        run("req", "-x509", *ec, "-days", "2", "-subj", f"/CN=replan test {name}",
            "-keyout", f"{name}.key", "-out", f"{name}.crt",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    run("req", *ec, "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr")
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\n"
    )
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.crt")  # fmt: skip
    return Tls(folder / "ca.crt", folder / "server.crt", folder / "server.key",
               folder / "other-ca.crt")  # fmt: skip


@dataclass(frozen=True)
class Server:
    url: str
    log: Path


@contextmanager
def prometheus(
    folder: Path,
    engines: Sequence[Engine],
    *,
    basic_auth: bool = False,
    tls: Tls | None = None,
    flags: Sequence[str] = (),
) -> Iterator[Server]:
    """A Prometheus on 127.0.0.1 serving the engines' backfilled metrics."""
    server, promtool = binaries()
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data"
    (folder / "vllm.om").write_text(openmetrics(engines), encoding="utf-8")
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(folder / "vllm.om"), str(data)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (folder / "prometheus.yml").write_text("global: {}\n")
    web = []
    if basic_auth or tls:
        config = ""
        if basic_auth:
            config += f"basic_auth_users:\n  {BASIC_USER}: '{BASIC_HASH}'\n"
        if tls:
            config += f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        (folder / "web.yml").write_text(config)
        web = [f"--web.config.file={folder / 'web.yml'}"]
    log = folder / "prometheus.log"
    for _ in range(3):  # a free port may be taken by another test before Prometheus binds it
        port = _free_port()
        with log.open("w") as out:
            process = subprocess.Popen(
                [server, f"--config.file={folder / 'prometheus.yml'}",
                 f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=100y",
                 f"--web.listen-address=127.0.0.1:{port}", *web, *flags],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        try:
            if _wait_ready(url, process, log, tls, basic_auth):
                yield Server(url, log)
                return
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    pytest.fail(f"prometheus could not listen: {log.read_text()[-2000:]}")


def _wait_ready(
    url: str, process: subprocess.Popen[bytes], log: Path, tls: Tls | None, basic_auth: bool
) -> bool:
    """Whether Prometheus came up (False: its port was taken; any other failure fails)."""
    import base64
    import ssl

    context = ssl.create_default_context(cafile=str(tls.ca)) if tls else None
    request = urllib.request.Request(f"{url}/-/ready")
    if basic_auth:
        pair = base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {pair}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if "address already in use" in log.read_text():
                return False
            pytest.fail(f"prometheus exited ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as answer:
                if answer.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    pytest.fail(f"prometheus not ready within 60 s: {log.read_text()[-2000:]}")


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A team's auth proxy in front of Prometheus: a bearer token, or else 401 (none) and 403 (a
    wrong one, with the header echoed back, as a careless proxy might)."""

    upstream = ""
    token = ""
    delay = 0.0
    redirect_to = ""
    html = False

    def do_GET(self) -> None:
        time.sleep(self.delay)
        if self.redirect_to:
            self._send(302, b"", {"Location": self.redirect_to + self.path})
            return
        if self.html:
            shown = f"<html><body>Sign in (as {self.headers.get('Authorization')})</body></html>"
            self._send(200, shown.encode(), {"Content-Type": "text/html"})
            return
        given = self.headers.get("Authorization")
        if given is None:
            self._send(401, b"Unauthorized\n")
            return
        if given != f"Bearer {self.token}":
            self._send(403, f"forbidden: {given}\n".encode())
            return
        try:
            with urllib.request.urlopen(self.upstream + self.path, timeout=30) as answer:
                self._send(answer.status, answer.read(), {"Content-Type": "application/json"})
        except urllib.error.HTTPError as error:
            self._send(error.code, error.read(), {"Content-Type": "application/json"})

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def proxy(upstream: str = "", token: str = "", **behaviour: object) -> Iterator[str]:
    """An HTTP proxy on 127.0.0.1 in front of `upstream`; its URL."""
    handler = type("Proxy", (_Proxy,), {"upstream": upstream, "token": token, **behaviour})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
