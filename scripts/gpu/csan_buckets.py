#!/usr/bin/env python3
"""Splits a gtest binary's tests into N buckets of about equal compute-sanitizer time, one
--gtest_filter per output line, for the csan step's side-by-side runs. gtest's own sharding
deals tests out by index, so one shard got both of the slowest model tests (session 10:
inception_v3's stop test alone took 355 s under memcheck, vgg19's 168 s). Here each test gets a
weight (its model's size times what the test does with it) and the heaviest go first, each to
the lightest bucket (longest processing time first).

    test_gpu --gtest_list_tests --gtest_filter=F | csan_buckets.py N
    test_gpu_sched --gtest_list_tests | csan_buckets.py --list    (one full test name a line)
"""
import re
import sys

# Relative memcheck cost of one pass over each zoo model's kernels, from the session 10 times
# (inception_v3 355 s, vgg19 168 s) and the models' kernel counts; other tests weigh 1.
MODEL_WEIGHT = {
    "tiny_cnn": 1, "tiny_vgg": 1, "tiny_bert": 1, "resnet18": 4, "mobilenet_v2": 6, "distilbert": 6,
    "resnet50": 8, "bert_base": 10, "vgg19": 12, "resnet152": 16, "inception_v3": 20, "densenet201": 25,
}
# Passes over the model's kernels per test: the stop tests run each kernel stopped, then again.
SUITE_PASSES = {"GpuKernelTest": 3, "GpuKernelExitTest": 3, "GpuModelTest": 1}


def parse(listing):
    """Full test names from --gtest_list_tests output."""
    tests, suite = [], None
    for line in listing.splitlines():
        if not line.strip() or line.startswith("Running main()"):
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            tests.append(suite + line.split("#")[0].strip())
    return tests


def weight(test):
    suite = test.split(".")[0].split("/")[-1]
    param = test.rsplit("/", 1)[-1] if "/" in test.split(".", 1)[-1] else ""
    model = re.sub(r"_b\d+$", "", param)
    if model not in MODEL_WEIGHT:
        return 1.0
    batch = re.search(r"_b(\d+)$", param)
    passes = SUITE_PASSES.get(suite, 1) * (2 if batch and int(batch.group(1)) > 1 else 1)
    return float(MODEL_WEIGHT[model] * passes)


def buckets(tests, n):
    loads = [[0.0, []] for _ in range(n)]
    for t in sorted(tests, key=lambda t: (-weight(t), t)):
        lightest = min(loads, key=lambda b: b[0])
        lightest[0] += weight(t)
        lightest[1].append(t)
    return [b[1] for b in loads if b[1]]


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        for test in parse(sys.stdin.read()):
            print(test)
        return 0
    if len(argv) != 2 or not argv[1].isdigit() or int(argv[1]) < 1:
        print("usage: csan_buckets.py N|--list  (a gtest --gtest_list_tests listing on stdin)", file=sys.stderr)
        return 2
    for bucket in buckets(parse(sys.stdin.read()), int(argv[1])):
        print(":".join(bucket))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
