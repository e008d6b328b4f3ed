#!/usr/bin/env python3
"""Rank correlation between simulated DRAM traffic and measured GPU time of residency configs.

Inputs: the sim.json of scripts/l2/make_configs.py and the JSON of `atoll l2 measure --json`
(one file per model, one measurement per config). Prints one table per model and Spearman's rho
of (simulated DRAM bytes, GPU time ratio config/none); writes the joined rows with --json.
"""
import argparse
import json
import os


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("sim")
    ap.add_argument("measured", nargs="+")
    ap.add_argument("--json")
    args = ap.parse_args()
    sim = {(r["model"], os.path.basename(r.get("file", ""))): r for r in json.load(open(args.sim))}
    joined, summary = [], {}
    for path in args.measured:
        try:
            ms = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"{path}: unreadable ({e})")
            continue
        ms = ms if isinstance(ms, list) else [ms]
        rows = []
        for m in ms:
            s = sim.get((m["model"], os.path.basename(m["config"])))
            if s is None:
                continue
            rows.append({**s, "baseline_ms": m["baseline_ms"], "config_ms": m["config_ms"],
                         "ratio": m["config_ms"] / m["baseline_ms"], "ci_ms": m["diff_ci_ms"], "pairs": m["pairs"]})
        if len(rows) < 3:
            continue
        model = rows[0]["model"]
        print(f"{model} b8: config    slices  hit  sim_DRAM_MiB  none_ms  config_ms  ratio  +-CI")
        for r in rows:
            print(f"  {r['config']:8} {len(r['slices'].split(',')):6} {r['hit_ratio']:4} {r['dram_bytes'] / 2**20:12.1f} "
                  f"{r['baseline_ms']:8.4f} {r['config_ms']:9.4f} {r['ratio']:6.3f} {r['ci_ms'] / r['baseline_ms']:5.3f}")
        rho = spearman([r["dram_bytes"] for r in rows], [r["ratio"] for r in rows])
        summary[model] = rho
        print(f"  Spearman(simulated DRAM bytes, GPU time ratio) = {rho:.3f} over {len(rows)} configs")
        joined += rows
    if args.json:
        json.dump({"spearman": summary, "rows": joined}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
