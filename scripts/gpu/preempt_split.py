#!/usr/bin/env python3
"""Where a preemption's time goes, from a DISB run's trace.json (the traced mode, reset when it
ran) and results.json: for each preemption in the trace window, measured from the scheduler's
preempt event (the RT task's entry), when the BE kernels running at that instant ended, how many
BE kernels started after it (grids already queued on the device, exiting at entry) and how long
they lasted against the same kernel run whole, when the last
BE kernel ended and when the first RT kernel started. Percentiles over the events, in us.

    python3 scripts/gpu/preempt_split.py DISB_OUT_DIR [MORE ...]
"""
import json
import pathlib
import sys


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def summary(name, xs):
    return f"  {name:<44} n={len(xs):<5} p50 {pct(xs, 0.5):7.1f}  p90 {pct(xs, 0.9):7.1f}  max {pct(xs, 1.0):7.1f}"


def split(trace):
    kernels = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    be = sorted((k for k in kernels if k.get("cat") == "be"), key=lambda k: k["ts"])
    rt = sorted((k for k in kernels if k.get("cat") == "rt"), key=lambda k: k["ts"])
    preempts = sorted(e["ts"] for e in trace["traceEvents"] if e.get("ph") == "i" and e["name"].startswith("preempt"))
    out = {k: [] for k in ("running_end", "queued_count", "queued_dur", "queued_share", "last_be_end", "rt_start",
                           "rt_after_be")}
    # A queued kernel's time against the same kernel run whole: near 0 means it left at entry,
    # near 1 that it ran to its end.
    whole = {}
    for k in be:
        if not k.get("args", {}).get("preempted"):
            whole.setdefault(k["name"], []).append(k["dur"])
    whole = {name: pct(durs, 0.5) for name, durs in whole.items()}
    for n, t in enumerate(preempts):
        # The preemption's own RT task starts before the next one begins; an RT task launched
        # outside the trace window would otherwise pair this event with a later task.
        until = preempts[n + 1] if n + 1 < len(preempts) else float("inf")
        first_rt = next((k["ts"] for k in rt if k["ts"] >= t), None)
        if first_rt is None or first_rt >= until:
            continue
        running = [k for k in be if k["ts"] <= t < k["ts"] + k["dur"]]
        queued = [k for k in be if t < k["ts"] < first_rt]
        ends = [k["ts"] + k["dur"] for k in running + queued]
        out["rt_start"].append(first_rt - t)
        out["queued_count"].append(len(queued))
        out["queued_dur"].extend(k["dur"] for k in queued)
        out["queued_share"].extend(k["dur"] / whole[k["name"]] for k in queued if whole.get(k["name"]))
        if running:
            out["running_end"].append(max(k["ts"] + k["dur"] for k in running) - t)
        if ends:
            out["last_be_end"].append(max(ends) - t)
            out["rt_after_be"].append(first_rt - max(ends))
    return out


def main(args):
    for a in args:
        p = pathlib.Path(a)
        for trace_file in sorted(p.rglob("trace.json")) if p.is_dir() else [p]:
            print(f"{trace_file.parent.name}:")
            results = trace_file.parent / "results.json"
            if results.exists():
                for m in json.loads(results.read_text())["modes"]:
                    parts = [(k, m.get(k)) for k in ("preemption_latency_us", "preemption_staging_us",
                                                      "preemption_reaction_us", "preemption_entry_us",
                                                      "preemption_release_us")]
                    if m.get("preemption_latency_us", {}).get("p99"):
                        print(f"  {m['mode']}: " + ", ".join(f"{k.replace('preemption_', '')} {d.get('p50', 0):.1f}/{d.get('p99', 0):.1f}"
                                                       for k, d in parts if d))
            s = split(json.loads(trace_file.read_text()))
            print(summary("running BE kernels end (after preempt)", s["running_end"]))
            print(summary("BE kernels started after preempt (count)", s["queued_count"]))
            print(summary("  their durations", s["queued_dur"]))
            print(summary("  their share of the kernel run whole", s["queued_share"]))
            print(summary("last BE kernel end (after preempt)", s["last_be_end"]))
            print(summary("first RT kernel start (after preempt)", s["rt_start"]))
            print(summary("first RT kernel start - last BE end", s["rt_after_be"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
