#!/usr/bin/env python3
"""PyTorch side of the CUDA benchmark: the zoo's architectures in fp16 (CNNs channels_last),
eager and CUDA-graph latency at each batch size, and for the models named in --compile
torch.compile(mode="reduce-overhead") (Inductor fusions plus CUDA graphs, the strongest thing a
PyTorch user picks), and for the models named in --max-autotune torch.compile(mode="max-autotune")
in a child process stopped at --max-autotune-budget-s (its compile takes minutes), median of many
event-timed runs, JSON out.

Models are built from their constructors with random weights (nothing is downloaded); latency
does not depend on the weight values. BERT/DistilBERT come from transformers' configs.
"""
import argparse
import datetime
import json
import multiprocessing
import queue
import statistics
import sys

import torch

CNNS = {
    "resnet18": ("resnet18", 224),
    "resnet50": ("resnet50", 224),
    "resnet152": ("resnet152", 224),
    "vgg19": ("vgg19", 224),
    "densenet201": ("densenet201", 224),
    "inception_v3": ("inception_v3", 299),
    "mobilenet_v2": ("mobilenet_v2", 224),
}
TRANSFORMERS = ("bert_base", "distilbert")


def build(name, batch, seq_len):
    """Returns (module, example inputs) on the GPU in fp16."""
    if name in CNNS:
        import torchvision

        ctor, size = CNNS[name]
        kwargs = {"weights": None}
        if name == "inception_v3":
            kwargs.update(aux_logits=False, init_weights=False)
        model = getattr(torchvision.models, ctor)(**kwargs)
        model = model.cuda().half().eval().to(memory_format=torch.channels_last)
        x = torch.randn(batch, 3, size, size, device="cuda", dtype=torch.half)
        return model, (x.contiguous(memory_format=torch.channels_last),)
    import transformers

    if name == "bert_base":
        model = transformers.BertModel(transformers.BertConfig())
        ids = torch.randint(0, 30522, (batch, seq_len), device="cuda")
        types = torch.zeros_like(ids)
        inputs = (ids, None, types)
    else:
        model = transformers.DistilBertModel(transformers.DistilBertConfig())
        inputs = (torch.randint(0, 30522, (batch, seq_len), device="cuda"),)
    return model.cuda().half().eval(), inputs


def time_fn(fn, iters, warmup):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "mean_ms": statistics.fmean(samples)}


def time_compiled(model, inputs, iters, warmup, mode="reduce-overhead"):
    """torch.compile in `mode`: compiled once (timed), then timed like the graphs."""
    import time

    # Dynamo's cache is keyed by the forward's code, shared by every instance of a model class: a
    # second batch size would recompile with a dynamic batch dimension (slower kernels, and no
    # compile time at a third). Each batch gets its own static compile, as a deployment would.
    torch._dynamo.reset()
    compiled = torch.compile(model, mode=mode, dynamic=False)
    began = time.perf_counter()
    for _ in range(3):  # the first calls compile and record the CUDA graph
        compiled(*inputs)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - began
    r = time_fn(lambda: compiled(*inputs), iters, warmup)
    r["compile_s"] = compile_s
    return r


def _max_autotune_child(name, batch, seq_len, iters, warmup, results):
    try:
        model, inputs = build(name, batch, seq_len)
        with torch.inference_mode():
            results.put(time_compiled(model, inputs, iters, warmup, mode="max-autotune"))
    except Exception as e:  # reported at once, not found out at the budget's end
        results.put({"error": f"{type(e).__name__}: {e}"})


def time_max_autotune(name, batch, seq_len, iters, warmup, budget_s):
    """max-autotune in a child process (spawned: CUDA does not survive a fork), killed when its
    compile and timing outlast budget_s, so one slow autotune cannot eat the run."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=_max_autotune_child, args=(name, batch, seq_len, iters, warmup, results))
    child.start()
    try:
        return results.get(timeout=budget_s)
    except queue.Empty:
        return {"error": f"over the {budget_s:.0f} s budget" if child.is_alive() else f"child exited with {child.exitcode}"}
    finally:
        if child.is_alive():
            child.kill()
        child.join()


def bench(name, batch, seq_len, iters, warmup, compile_too):
    model, inputs = build(name, batch, seq_len)
    with torch.inference_mode():
        eager = time_fn(lambda: model(*inputs), iters, warmup)
        # Capture after warm-up on a side stream, as the CUDA-graph docs prescribe.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(*inputs)
        graphed = time_fn(graph.replay, iters, warmup)
        del graph
        result = {"model": name, "batch": batch, "eager": eager, "graph": graphed}
        if compile_too:
            try:
                result["compile"] = time_compiled(model, inputs, iters, warmup)
            except Exception as e:  # keep eager and graph figures when Inductor fails
                result["compile_error"] = f"{type(e).__name__}: {e}"
    del model
    torch.cuda.empty_cache()
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", nargs="+", default=list(CNNS) + list(TRANSFORMERS))
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--json", default="torch_models.json")
    p.add_argument("--compile", nargs="*", default=[], metavar="MODEL",
                   help='also time torch.compile(mode="reduce-overhead") for these models ("all": every one)')
    p.add_argument("--max-autotune", nargs="*", default=[], metavar="MODEL",
                   help='also time torch.compile(mode="max-autotune") for these models ("all": every one)')
    p.add_argument("--max-autotune-budget-s", type=float, default=300,
                   help="seconds one max-autotune compile and timing may take before it is stopped")
    a = p.parse_args()
    torch.backends.cudnn.benchmark = True
    doc = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "iters": a.iters,
        "results": [],
    }
    for name in a.models:
        for batch in a.batches:
            try:
                compile_too = name in a.compile or "all" in a.compile
                r = bench(name, batch, a.seq_len, a.iters, a.warmup, compile_too)
                if name in a.max_autotune or "all" in a.max_autotune:
                    r["max_autotune"] = time_max_autotune(name, batch, a.seq_len, a.iters, a.warmup,
                                                          a.max_autotune_budget_s)
                line = f"{name:<14} b{batch:<2} eager {r['eager']['median_ms']:8.3f} ms  graph {r['graph']['median_ms']:8.3f} ms"
                if "compile" in r:
                    line += f"  compile {r['compile']['median_ms']:8.3f} ms ({r['compile']['compile_s']:.0f} s to compile)"
                if "median_ms" in r.get("max_autotune", {}):
                    m = r["max_autotune"]
                    line += f"  max-autotune {m['median_ms']:8.3f} ms ({m['compile_s']:.0f} s)"
                elif "max_autotune" in r:
                    line += f"  max-autotune: {r['max_autotune']['error']}"
                print(line, flush=True)
            except Exception as e:  # one model failing must not lose the others' numbers
                r = {"model": name, "batch": batch, "error": f"{type(e).__name__}: {e}"}
                print(f"{name:<14} b{batch:<2} FAILED: {r['error']}", file=sys.stderr, flush=True)
            doc["results"].append(r)
            # Rewritten after every row, so a time limit loses only the row in progress.
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
