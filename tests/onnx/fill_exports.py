#!/usr/bin/env python3
"""The real-export cases without torch: the graphs torch.onnx.export wrote (tests/onnx/graphs,
made by `export_models.py --graphs`) with their large float initializers emptied, filled here
with seeded random weights, then recorded against onnxruntime in the layout export_models.py
writes. CI has onnx and onnxruntime but not torch (PyPI's torch pulls ~3.5 GB of CUDA packages),
and what these cases test is the exporters' graphs: their ops, attributes, shape computations and
symbolic batch, which the emptied files keep whole (small and integer initializers included).

usage: fill_exports.py OUT_DIR. Exits 3 when a package is absent.
"""
import os
import shutil
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPHS = os.path.join(HERE, "graphs")


def consumers(graph):
    """initializer name -> [(op_type, input index, node)]"""
    uses = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            uses.setdefault(name, []).append((node.op_type, k, node))
    return uses


def fan_in_scale(op, k, node, dims):
    """A He-style scale for a weight, so activations neither vanish nor blow up in fp32."""
    import math

    if op == "Conv" and k == 1:
        return math.sqrt(2.0 / max(1, math.prod(dims[1:])))
    if op == "Gemm" and k == 1:
        trans_b = any(a.name == "transB" and a.i == 1 for a in node.attribute)
        return math.sqrt(1.0 / max(1, dims[1] if trans_b else dims[0]))
    if op == "MatMul" and k == 1 and len(dims) >= 2:
        return math.sqrt(1.0 / max(1, dims[-2]))
    return None


def fill_values(rng, uses, dims):
    shape = tuple(dims)
    for op, k, node in uses:
        if op == "BatchNormalization":
            if k == 4:
                return rng.uniform(0.5, 1.5, shape)
            return (1.0 if k == 1 else 0.0) + 0.1 * rng.standard_normal(shape)
        if op == "LayerNormalization":
            return (1.0 if k == 1 else 0.0) + 0.1 * rng.standard_normal(shape)
        scale = fan_in_scale(op, k, node, dims)
        if scale is not None:
            return scale * rng.standard_normal(shape)
        if op == "Gather" and k == 0:
            return 0.5 * rng.standard_normal(shape)
    return 0.05 * rng.standard_normal(shape)


def filled(name):
    """The graph `name` with every emptied initializer filled, seeded by the name."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(os.path.join(GRAPHS, name + ".onnx"))
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    uses = consumers(model.graph)
    for init in model.graph.initializer:
        if init.doc_string != "emptied":
            continue
        values = fill_values(rng, uses.get(init.name, []), list(init.dims))
        dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
        init.CopyFrom(numpy_helper.from_array(np.asarray(values, dtype=dtype), init.name))
    return model


def inputs_for(model, rng):
    """Requests at batch 3 (the exports' batch is 2, so the batch axis must be symbolic)."""
    from export_models import padded_mask

    feeds = []
    for i in model.graph.input:
        dims = [d.dim_value if d.dim_value > 0 else 3 for d in i.type.tensor_type.shape.dim]
        if i.name == "input_ids":
            feeds.append(rng.integers(0, 1000, dims).astype("int64"))
        elif i.name == "attention_mask":
            feeds.append(padded_mask(*dims))
        else:
            feeds.append(rng.standard_normal(dims).astype("float32"))
    return feeds


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    try:
        import numpy as np
        import onnx
        import onnxruntime  # noqa: F401
    except ImportError as e:
        print(f"a Python package is missing ({e.name}); scripts/install-python-deps.sh installs them")
        sys.exit(3)
    sys.path.insert(0, HERE)
    from export_models import BASE_CASES, save_case, save_external, to_fp16_initializers

    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))  # fresh inputs every run
    for name in BASE_CASES:
        model = filled(name)
        feeds = inputs_for(model, rng)
        save_case(out, name, lambda p, m=model: onnx.save(m, p), feeds, fp16_check=False)
        if name == "mobilenet_v3_small":
            save_case(out, name + "_external_data", lambda p, m=model: save_external(m, p), feeds,
                      fp16_check=False)
        if name == "tiny_bert_opset17":
            src = os.path.join(out, name, "model.onnx")
            save_case(out, "tiny_bert_fp16_initializers", lambda p: to_fp16_initializers(src, p), feeds,
                      fp16_check=False)


if __name__ == "__main__":
    main()
