"""A stand-in for the `vllm` command of the engine image, for running the profiling script:
`serve` answers /health on $PORT (or exits at once with FAKE_VLLM_MODE=crash); `bench serve`
writes the result file vLLM's benchmark would, with FAKE_VLLM_RATE requests/s."""

from __future__ import annotations

import http.server
import json
import os
import sys
from pathlib import Path


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str]) -> int:
    with Path(os.environ["FAKE_VLLM_CALLS"]).open("a") as calls:
        calls.write(json.dumps(argv) + "\n")
    if argv[0] == "serve":
        if os.environ.get("FAKE_VLLM_MODE") == "crash":
            return 1
        http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Health).serve_forever()
    if argv[:2] == ["bench", "serve"]:
        directory = argv[argv.index("--result-dir") + 1]
        name = argv[argv.index("--result-filename") + 1]
        result = {
            "request_throughput": float(os.environ["FAKE_VLLM_RATE"]),
            "median_e2el_ms": 812.5,
        }
        Path(directory, name).write_text(json.dumps(result))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
