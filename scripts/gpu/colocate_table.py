#!/usr/bin/env python3
"""One line per `atoll colocate --json` file: RT latency, BE throughput, preemptions, and where
an RT request's time goes before its first kernel (p50s)."""
import json
import os
import sys


def main(paths):
    print(f"{'run':22} {'RT p50':>8} {'RT p99':>8} {'max':>8} {'BE/s':>7} {'preempt':>7} "
          f"{'arr->1st p50':>12} {'p99':>7} {'staging':>8} {'queue':>7}")
    for path in sorted(paths):
        try:
            d = json.load(open(path))
        except (OSError, ValueError) as e:
            print(path, "unreadable:", e)
            continue
        rt = [c for c in d["clients"] if c["class"] == "rt"][0]["latency_ms"]
        pre = d.get("preemptions", {})
        lat = pre.get("latency_us", {})
        b = d["rt_breakdown"]
        name = os.path.basename(path).removeprefix("colocate_").removesuffix(".json")
        print(f"{name:22} {rt['p50']:8.3f} {rt['p99']:8.3f} {rt['max']:8.3f} {d['be_throughput_per_s']:7.1f} "
              f"{pre.get('count', 0):7d} {lat.get('p50', 0):12.1f} {lat.get('p99', 0):7.1f} "
              f"{b['staging_us']['p50']:8.1f} {b['queueing_us']['p50']:7.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
