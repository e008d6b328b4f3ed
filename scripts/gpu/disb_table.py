#!/usr/bin/env python3
"""One table over DISB runs: every results.json given (or found under the folders given), one row
per mode, so that variants of one workload (DISB_TAG) read side by side.

    python3 scripts/gpu/disb_table.py OUT_DIR [MORE ...]
"""
import json
import pathlib
import sys


def results_files(args):
    for a in args:
        p = pathlib.Path(a)
        yield from sorted(p.rglob("results.json")) if p.is_dir() else [p]


def row(run, d, m):
    rt = m["rt_latency_ms"]
    change = m.get("rt_p99_vs_rt_only")
    # The interval over the same requests where the run paired them (results.json's `paired`).
    paired = change.get("paired") if change else None
    shown = paired or change
    vs = f"{100 * shown['change']:+.1f}% [{100 * shown['ci'][0]:+.1f}, {100 * shown['ci'][1]:+.1f}]{' p' if paired else ''}" if change else "-"
    pre = m["preemption_latency_us"]
    wait = m.get("rt_wait_us", {})
    run_ms = m.get("rt_run_ms", {})
    reaction = m.get("preemption_reaction_us", {})
    by = m.get("preemption_reaction_by", {})
    split = "/".join(f"{by[w]['p99']:.1f}" if by.get(w, {}).get("count") else "-" for w in ("sentinel", "scheduler"))
    steps = m.get("sentinel_steps_us", {})
    sentinel_steps = "/".join(f"{steps[k]['p99']:.1f}" for k in ("wake", "claim", "open")) if steps.get("wake", {}).get("count") else "-"
    dropped = sum(c["dropped"] for c in m["clients"])
    rt_done = sum(c.get("served", 0) for c in m["clients"] if c.get("priority") == "rt")
    sentinel = m.get("sentinel_rt_tasks", 0)
    share = f"{100 * sentinel / rt_done:.0f}%" if rt_done else "-"
    st = m.get("host_stalls")
    stalls = f"{st['over_threshold']}/{st['longest_us'] / 1e3:.2f}" if st else "-"
    busy = m.get("host_cpu_busy") or {}
    if "steal_max_core" in busy:
        stalls += f" ({100 * busy['steal_max_core']:.1f}%, {busy['involuntary_switches']})"
    return [run, d["workload"]["name"], m["mode"], f"{rt['p50']:.3f}", f"{rt['p99']:.3f}", vs,
            f"{100 * m['rt_deadline_miss_rate']:.2f}", f"{m['throughput_per_s']['be']:.1f}",
            f"{pre['p50']:.1f}/{pre['p99']:.1f}", f"{wait.get('p50', 0):.1f}/{wait.get('p99', 0):.1f}",
            f"{reaction.get('p50', 0):.1f}/{reaction.get('p99', 0):.1f}", split, sentinel_steps, f"{run_ms.get('p99', 0):.3f}", share,
            str(dropped), stalls]


def main(args):
    header = ["run", "WL", "mode", "RT p50 ms", "RT p99 ms", "p99 vs rt-only [95%] (p: paired)", "miss %", "BE/s",
              "preempt p50/p99 us", "wait p50/p99 us", "reaction p50/p99 us", "reaction p99 sentinel/scheduler us",
              "sentinel p99 wake/claim/open us", "on device p99 ms", "sentinel", "dropped",
              "host stalls >500us / longest ms (most stolen core, involuntary switches)"]
    rows = []
    for f in results_files(args):
        d = json.loads(f.read_text())
        for m in d["modes"]:
            rows.append(row(f.parent.name, d, m))
    if not rows:
        print("disb_table: no results.json found", file=sys.stderr)
        return 1
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["."]))
