#!/usr/bin/env python3
"""Writes ONNX's own backend test cases for the importer's conformance run.

The onnx wheel defines its node tests in Python (onnx.backend.test.case.node) but ships no files
for them, so this writes each as model.onnx + test_data_set_N/{input,output}_I.pb (+ tolerance.txt,
"rtol atol") under OUT/node/. The model tests the wheel does ship (simple, pytorch-converted,
pytorch-operator) are copied to OUT/<suite>/. Exits 3 when the onnx package is absent.
"""
import os
import shutil
import sys
import warnings


def tensors_only(case):
    import numpy as np

    return all(isinstance(v, np.ndarray) for inputs, outputs in case.data_sets for v in (*inputs, *outputs))


def write_case(case, out_dir):
    from onnx import numpy_helper, save

    case_dir = os.path.join(out_dir, case.name)
    os.makedirs(case_dir, exist_ok=True)
    save(case.model, os.path.join(case_dir, "model.onnx"))
    graph_inputs = [i.name for i in case.model.graph.input]
    graph_outputs = [o.name for o in case.model.graph.output]
    for k, (inputs, outputs) in enumerate(case.data_sets):
        data_dir = os.path.join(case_dir, f"test_data_set_{k}")
        os.makedirs(data_dir, exist_ok=True)
        for kind, names, values in (("input", graph_inputs, inputs), ("output", graph_outputs, outputs)):
            for i, value in enumerate(values):
                tensor = numpy_helper.from_array(value, names[i] if i < len(names) else f"{kind}_{i}")
                with open(os.path.join(data_dir, f"{kind}_{i}.pb"), "wb") as f:
                    f.write(tensor.SerializeToString())
    with open(os.path.join(case_dir, "tolerance.txt"), "w") as f:
        f.write(f"{case.rtol} {case.atol}\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    try:
        import onnx
        from onnx.backend.test.case import node
    except ImportError:
        print("the onnx Python package is not installed (scripts/install-python-deps.sh installs it)")
        sys.exit(3)
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    warnings.simplefilter("ignore")  # the case definitions warn about their own edge values
    written = skipped = 0
    for case in node.collect_testcases(None):
        if case.kind != "node" or not case.data_sets:
            continue
        if not tensors_only(case):  # sequences and optionals: no tensor file holds them
            skipped += 1
            continue
        write_case(case, os.path.join(out, "node"))
        written += 1
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for suite in ("simple", "pytorch-converted", "pytorch-operator"):
        shutil.copytree(os.path.join(data, suite), os.path.join(out, suite))
    print(f"wrote {written} node cases (skipped {skipped} with sequence or optional values) and the wheel's model tests (onnx {onnx.__version__}) to {out}")


if __name__ == "__main__":
    main()
