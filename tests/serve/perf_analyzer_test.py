"""`atoll serve` driven by Triton's perf_analyzer (scripts/serve-venv.sh installs it), as a Triton
user would measure it: gRPC and HTTP, tensors in the message and in system shared memory,
server-side statistics and Prometheus metrics collected. Each run must finish without a client
error, report a throughput, and the server's own statistics must count every request it sent.
Exits 77 (skipped) where perf_analyzer is not installed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

from serve_process import start_server

ATOLL = sys.argv[1]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PA_DIR = os.path.join(ROOT, ".venv-serve", "perf_analyzer")
PERF_ANALYZER = os.path.join(PA_DIR, "bin", "perf_analyzer")
failures = []


def check(name, condition, detail=""):
    print(f"{'ok  ' if condition else 'FAIL'} {name}" + ("" if condition else f" {detail}"))
    if not condition:
        failures.append(name)


def served_requests(port_http):
    with urllib.request.urlopen(f"http://127.0.0.1:{port_http}/v2/models/cnn/stats", timeout=10) as r:
        stats = json.load(r)
    return stats["model_stats"][0]["inference_stats"]["success"]["count"]


def run_perf_analyzer(name, args, work, env):
    csv = os.path.join(work, f"{name}.csv")
    # Stability is not what this checks (a loaded 2-core machine never settles): a few fixed
    # windows of 20 requests at concurrency 2.
    cmd = [PERF_ANALYZER, "-m", "cnn", *args, "--concurrency-range", "2", "--measurement-mode", "count_windows",
           "--measurement-request-count", "20", "--stability-percentage", "1000", "--max-trials", "3", "-f", csv]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    text = out.stdout + out.stderr
    check(f"{name}: exit status 0", out.returncode == 0, text[-2000:])
    bad = [l for l in text.splitlines() if re.search(r"error|fail", l, re.I)]
    check(f"{name}: no client error", not bad, "\n".join(bad[:5]))
    rows = open(csv).read().splitlines() if os.path.exists(csv) else []
    header, values = (rows[0].split(","), rows[1].split(",")) if len(rows) >= 2 else ([], [])
    row = dict(zip(header, values))
    check(f"{name}: throughput reported", float(row.get("Inferences/Second") or 0) > 0, str(rows))
    check(f"{name}: server-side statistics", row.get("Server Compute Infer", "") not in ("", "0"), str(row))
    sent = sum(int(n) for n in re.findall(r"Request count: (\d+)", text))
    return sent, text


def main():
    if not os.access(PERF_ANALYZER, os.X_OK):
        print(f"SKIP: {PERF_ANALYZER} is not installed; run scripts/serve-venv.sh")
        return 77
    env = dict(os.environ)
    cudart = os.path.join(PA_DIR, "nvidia", "cuda_runtime", "lib")
    env["LD_LIBRARY_PATH"] = cudart + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    proc, (port_grpc, port_http, port_metrics) = start_server(ATOLL, "--device", "sim", "--model", "cnn=tiny_cnn")
    try:
        with tempfile.TemporaryDirectory() as work:
            before = served_requests(port_http)
            sent = 0
            runs = {
                "grpc": ["-i", "grpc", "-u", f"127.0.0.1:{port_grpc}", "--collect-metrics", "--metrics-url",
                         f"http://127.0.0.1:{port_metrics}/metrics", "--metrics-interval", "200"],
                "http": ["-i", "http", "-u", f"127.0.0.1:{port_http}"],
                "grpc_shm": ["-i", "grpc", "-u", f"127.0.0.1:{port_grpc}", "--shared-memory", "system"],
                "http_shm": ["-i", "http", "-u", f"127.0.0.1:{port_http}", "--shared-memory", "system"],
            }
            for name, args in runs.items():
                n, text = run_perf_analyzer(name, args, work, env)
                sent += n
                if name == "grpc":
                    check("grpc: metrics scraped", "Server Prometheus Metrics" in text, text[-1500:])
            served = served_requests(port_http) - before
            check("the server counted every measured request", sent > 0 and served >= sent, f"sent {sent}, served {served}")
    finally:
        proc.kill()
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
