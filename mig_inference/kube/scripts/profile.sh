#!/bin/sh
# One profiling run: start the engine on this pod's slice with the service's own arguments
# ("$@"), wait until it answers, drive it with vLLM's benchmark, and print one result line that
# `mig-inference throughput` turns into a throughput table.
set -eu
RESULT_DIR=${RESULT_DIR:-/tmp}
export RESULT_DIR

vllm serve "$@" &
engine=$!
deadline=$(( $(date +%s) + STARTUP_SECONDS ))
until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=5)" 2>/dev/null; do
  if ! kill -0 "$engine" 2>/dev/null; then
    echo "the engine exited before it answered" >&2
    exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "the engine did not answer within $STARTUP_SECONDS s" >&2
    kill "$engine"
    exit 1
  fi
  sleep 5
done

vllm bench serve --backend vllm --base-url "http://127.0.0.1:$PORT" --model "$MODEL" \
  --dataset-name random --random-input-len "$INPUT_TOKENS" --random-output-len "$OUTPUT_TOKENS" \
  --num-prompts "$NUM_PROMPTS" --max-concurrency "$MAX_CONCURRENCY" \
  --percentile-metrics e2el --metric-percentiles 50,99 \
  --save-result --result-dir "$RESULT_DIR" --result-filename bench.json

python3 - <<'PY'
import json
import os

result = json.load(open(os.path.join(os.environ["RESULT_DIR"], "bench.json")))
line = {
    "profile": os.environ["PROFILE"],
    "requestsPerSecond": round(result["request_throughput"], 3),
    "latencyMs": result.get("median_e2el_ms"),
    "batch": int(os.environ["MAX_CONCURRENCY"]),
    "measured": True,
}
print("RESULT_MARKER " + json.dumps(line))
PY
kill "$engine"
