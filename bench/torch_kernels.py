#!/usr/bin/env python3
"""Where PyTorch's time goes, kernel by kernel: the zoo's architectures as bench/torch_models.py
builds them, run by torch.compile (Inductor; the kernels reduce-overhead replays, without the CUDA
graph so the profiler sees each launch), profiled over --iters calls. Prints each model's kernels
by total device time per call (name, launches per call, us per call, share) and writes them as
JSON, for reading beside `atoll profile` (which kernel of ours holds a row back).
"""
import argparse
import collections
import json

import torch
from torch.profiler import ProfilerActivity, profile

import torch_models


def kernel_times(fn, iters):
    """{kernel name: (launches, total us)} over `iters` calls of fn, CUDA kernels only."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    totals = collections.defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals[event.name]
            entry[0] += 1
            entry[1] += event.device_time
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["vgg19", "resnet50", "bert_base"])
    parser.add_argument("--batches", nargs="+", type=int, default=[32])
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    results = []
    with torch.inference_mode():
        for name in args.models:
            for batch in args.batches:
                model, inputs = torch_models.build(name, batch, args.seq_len)
                compiled = torch.compile(model)
                for _ in range(5):
                    compiled(*inputs)
                torch.cuda.synchronize()
                totals = kernel_times(lambda: compiled(*inputs), args.iters)
                rows = sorted(
                    ({"kernel": k, "launches": n / args.iters, "us": t / args.iters} for k, (n, t) in totals.items()),
                    key=lambda r: -r["us"],
                )
                total = sum(r["us"] for r in rows)
                results.append({"model": name, "batch": batch, "total_us": total, "kernels": rows})
                print(f"{name} b{batch}: {total:.1f} us of kernels per call")
                for r in rows[: args.top]:
                    print(f"  {r['us']:8.1f} us {100 * r['us'] / total:5.1f}% x{r['launches']:.0f}  {r['kernel'][:110]}")
                del model, compiled
                torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
