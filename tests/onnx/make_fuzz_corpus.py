#!/usr/bin/env python3
"""Writes fuzz_onnx's seed corpus (fuzz/corpus/onnx/): tiny models that reach the importer's main
paths (folding, conv/pool/gemm, attention ops, the GELU pattern, fp16 and raw initializers)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def model(name, nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    cnn = model("cnn", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "g", "beta", "m", "v"], ["bn"]),
        helper.make_node("HardSwish", ["bn"], ["h"]),
        helper.make_node("MaxPool", ["h"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["fl"]),
        helper.make_node("Gemm", ["fl", "fw", "fb"], ["y"], transB=1),
    ], [tensor("x", ["batch", 3, 8, 8])], [tensor("y", ["batch", 4])],
        {"w": f(6, 3, 3, 3), "b": f(6), "g": f(6), "beta": f(6), "m": f(6), "v": np.abs(f(6)) + 1,
         "fw": f(4, 6), "fb": f(4)})
    shapes = model("shapes", [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Slice", ["t", "starts", "ends", "axes2"], ["sl"]),
        helper.make_node("ReduceMean", ["sl"], ["y"], axes=[2], keepdims=1),
    ], [tensor("x", ["batch", 4, 6])], [tensor("y", ["batch", 6, 1])],
        {"zero": np.array(0, dtype="int64"), "axes": np.array([0], dtype="int64"),
         "rest": np.array([4, 6], dtype="int64"), "starts": np.array([1], dtype="int64"),
         "ends": np.array([3], dtype="int64"), "axes2": np.array([2], dtype="int64")})
    attention = model("attention", [
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("LayerNormalization", ["e", "ln_g", "ln_b"], ["n"]),
        helper.make_node("MatMul", ["n", "wq"], ["q"]),
        helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "qt"], ["scores"]),
        helper.make_node("Div", ["scores", "scale"], ["ss"]),
        helper.make_node("Softmax", ["ss"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "q"], ["ctx"]),
        helper.make_node("Div", ["ctx", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["er"]),
        helper.make_node("Add", ["er", "one"], ["er1"]),
        helper.make_node("Mul", ["ctx", "er1"], ["g1"]),
        helper.make_node("Mul", ["g1", "half"], ["y"]),
    ], [tensor("ids", ["batch", 5], TensorProto.INT64)], [tensor("y", ["batch", 5, 8])],
        {"table": f(20, 8), "ln_g": f(8), "ln_b": f(8), "wq": f(8, 8), "scale": np.array(2.0, dtype="float32"),
         "sqrt2": np.array(1.4142135, dtype="float32"), "one": np.array(1.0, dtype="float32"),
         "half": np.array(0.5, dtype="float32")})
    fp16 = model("fp16", [
        helper.make_node("Cast", ["w16"], ["w"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "w"], ["m"]),
        helper.make_node("Clip", ["m", "lo", "hi"], ["y"]),
    ], [tensor("x", ["batch", 4])], [tensor("y", ["batch", 4])],
        {"w16": f(4).astype("float16"), "lo": np.array(0, dtype="float32"), "hi": np.array(6, dtype="float32")})
    for m in (cnn, shapes, attention, fp16):
        save(m, os.path.join(out, m.graph.name + ".onnx"))


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "fuzz", "corpus", "onnx"))
