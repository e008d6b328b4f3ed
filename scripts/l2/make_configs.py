#!/usr/bin/env python3
"""Residency configs for the L2 rank-correlation experiment, with their simulated DRAM traffic.

For each model (batch 8, H200 preset) writes DIR/<model>_<name>.json configs spanning the arena
(quarters, the largest set-aside, everything, strided sets, two hit ratios) and DIR/sim.json with
what `atoll l2 simulate --policy lru` predicts for each. scripts/gpu/run-on-device.sh measures
them on the GPU; scripts/l2/rank.py correlates the two.
"""
import argparse
import json
import os
import subprocess


def atoll(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def slice_list(indices):
    return ",".join(str(i) for i in sorted(indices))


def configs_for(n, setaside_slices):
    q = max(n // 4, 1)
    fit = min(setaside_slices, n)
    return [
        ("q1", range(0, q), 0.9),
        ("q2", range(q, 2 * q), 0.9),
        ("q3", range(2 * q, 3 * q), 0.9),
        ("q4", range(3 * q, n), 0.9),
        ("fit", range(0, fit), 0.9),
        ("fit_h05", range(0, fit), 0.5),
        ("all", range(0, n), 0.9),
        ("every3", range(0, n, 3), 0.9),
        ("every2", range(0, n, 2), 0.9),
        ("q1_h10", range(0, q), 1.0),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--atoll", required=True, help="atoll binary")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2", "resnet18"])
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for model in args.models:
        common = [model, "--batch", str(args.batch), "--l2-device", "h200"]
        info = atoll(args.atoll, "l2", "info", *common, "--json")
        base = atoll(args.atoll, "l2", "simulate", *common, "--policy", "lru", "--json")
        rows.append({"model": model, "config": "none", "slices": "", "hit_ratio": 0.0,
                     "dram_bytes": base["dram_read_bytes"] + base["dram_write_bytes"], "persisting_accesses": 0})
        for name, indices, hit in configs_for(info["slices"], info["setaside_max_slices"]):
            path = os.path.join(args.out, f"{model}_{name}.json")
            subprocess.run([args.atoll, "l2", "config", *common, "--slices", slice_list(indices),
                            "--hit-ratio", str(hit), "--out", path], check=True, capture_output=True)
            sim = atoll(args.atoll, "l2", "simulate", *common, "--policy", "lru", "--config", path, "--json")
            rows.append({"model": model, "config": name, "file": path, "slices": slice_list(indices),
                         "hit_ratio": hit, "dram_bytes": sim["dram_read_bytes"] + sim["dram_write_bytes"],
                         "persisting_accesses": sim["persisting_accesses"]})
            print(f"{model:13} {name:8} {len(list(indices)):3} slices  hit {hit}  "
                  f"simulated DRAM {rows[-1]['dram_bytes'] / 2**20:8.1f} MiB")
    with open(os.path.join(args.out, "sim.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
