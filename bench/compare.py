#!/usr/bin/env python3
"""Joins atoll_bench_cuda and torch_models.py JSON: ratio atoll / PyTorch CUDA graph per model
and batch (same device, same run). Prints a Markdown table; --json writes the joined rows."""
import argparse
import json


def index(doc):
    return {(r["model"], r["batch"]): r for r in doc["results"]}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("atoll")
    p.add_argument("torch")
    p.add_argument("--json")
    a = p.parse_args()
    atoll = json.load(open(a.atoll))
    torch = json.load(open(a.torch))
    t = index(torch)
    rows = []
    for (model, batch), r in index(atoll).items():
        ref = t.get((model, batch), {})
        row = {"model": model, "batch": batch}
        if "error" in r or "graph" not in ref:
            row["error"] = r.get("error") or ref.get("error") or "no PyTorch figure"
            rows.append(row)
            continue
        row["atoll_ms"] = r["graph"]["median_ms"]
        row["torch_graph_ms"] = ref["graph"]["median_ms"]
        row["torch_eager_ms"] = ref["eager"]["median_ms"]
        row["ratio"] = row["atoll_ms"] / row["torch_graph_ms"]
        if "compile" in ref:
            row["torch_compile_ms"] = ref["compile"]["median_ms"]
            row["compile_ratio"] = row["atoll_ms"] / row["torch_compile_ms"]
        if "median_ms" in ref.get("max_autotune", {}):
            row["torch_max_autotune_ms"] = ref["max_autotune"]["median_ms"]
            row["max_autotune_compile_s"] = ref["max_autotune"]["compile_s"]
            row["max_autotune_ratio"] = row["atoll_ms"] / row["torch_max_autotune_ms"]
        row["flag_overhead_pct"] = 100 * r["flag_overhead"]
        row["atoll_planner_ms"] = r["planner"]["median_ms"]
        row["planner_ratio"] = row["atoll_planner_ms"] / row["torch_graph_ms"]
        rows.append(row)
    print(f"atoll vs PyTorch {torch.get('torch', '?')} CUDA graphs on {atoll['device']} ({atoll['date']})")
    print("| model | batch | atoll ms | torch.compile ms | / compile | max-autotune ms | / max-autotune | torch graph ms "
          "| / graph | cost-model ms | flag cost |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['batch']} | error: {r['error'][:60]} |||||||||")
            continue
        compiled = (f"{r['torch_compile_ms']:.3f} | {r['compile_ratio']:.2f}" if "torch_compile_ms" in r else "- | -")
        autotuned = (f"{r['torch_max_autotune_ms']:.3f} | {r['max_autotune_ratio']:.2f}"
                     if "torch_max_autotune_ms" in r else "- | -")
        print(f"| {r['model']} | {r['batch']} | {r['atoll_ms']:.3f} | {compiled} | {autotuned} | {r['torch_graph_ms']:.3f} | "
              f"{r['ratio']:.2f} | {r['atoll_planner_ms']:.3f} | {r['flag_overhead_pct']:+.2f}% |")
    if a.json:
        json.dump({"device": atoll["device"], "date": atoll["date"], "rows": rows}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
