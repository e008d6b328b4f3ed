#!/usr/bin/env python3
"""One line per kernel from `ncu --page raw --csv` files: time, throughput shares, the tensor
pipe's share, and the warp stall reasons that cost most per issued instruction.

The CSV shares stdout with the profiled program, so its header is found by its first column."""
import csv
import io
import re
import sys

STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")


def rows_of(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    table = [line for line in lines[start:] if line.startswith('"')]
    reader = csv.DictReader(io.StringIO("\n".join(table)))
    return [row for row in reader if row.get("ID", "").isdigit()]


def number(row, key):
    try:
        return float(row.get(key, "").replace(",", ""))
    except ValueError:
        return float("nan")


def first_matching(row, pattern):
    for key in row:
        if re.search(pattern, key):
            return number(row, key)
    return float("nan")


def short_name(name):
    return re.sub(r"\(.*", "", name).replace("atl::cuda::", "")[:60]


def describe(row):
    stalls = sorted(((number(row, k), m.group(1)) for k in row if (m := STALL.fullmatch(k))), reverse=True)
    top = ", ".join(f"{name} {value:.1f}" for value, name in stalls[:4] if value == value)
    return (
        f"{short_name(row.get('Kernel Name', '?')):60s} {number(row, 'gpu__time_duration.sum') / 1000:8.1f} us"
        f"  SM {number(row, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}%"
        f"  L2 {first_matching(row, r'^lts__throughput.*pct'):5.1f}%"
        f"  DRAM {first_matching(row, r'^(gpu__)?dram__throughput.*pct'):5.1f}%"
        f"  tensor {number(row, 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active'):5.1f}%"
        f" gmma-inst {number(row, 'sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active'):5.1f}%"
        f"  grid {row.get('Grid Size', '?')}  stalls/issue: {top}"
    )


def main(paths):
    for path in paths:
        rows = rows_of(path)
        print(f"{path}: {len(rows)} kernels")
        for row in rows:
            print("  " + describe(row))


if __name__ == "__main__":
    main(sys.argv[1:])
