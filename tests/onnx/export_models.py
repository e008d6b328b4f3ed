#!/usr/bin/env python3
"""Exports small real models with torch.onnx.export (dynamic batch axis) and records onnxruntime's
outputs as the reference, in ONNX's test-case layout (OUT/<case>/model.onnx + test_data_set_0/).

Cases: torchvision mobilenet_v3_small and resnet34 (random weights), a tiny random-config BERT
from transformers with a padded attention mask at opsets 13 (GELU and LayerNorm written out as
primitive ops) and 17, the BERT with fp16 initializers, and mobilenet with its initializers in an
external data file. The data's batch (3) differs from the export's (2), so the batch axis must be
symbolic. Exits 3 when a package is absent. With --graphs DIR it also writes the base cases'
graphs without their weights, which fill_exports.py turns back into cases where torch is absent.
"""
import math
import os
import shutil
import sys
import warnings


def save_case(out, name, model_path_writer, inputs, fp16_check=True):
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    case = os.path.join(out, name)
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    model_path = os.path.join(case, "model.onnx")
    model_path_writer(model_path)
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    feeds = {i.name: inputs[k] for k, i in enumerate(session.get_inputs())}
    outputs = session.run(None, feeds)
    for k, o in enumerate(outputs):  # a reference fp16 cannot hold would fail every fp16 backend
        if not fp16_check or np.asarray(o).dtype.kind != "f":
            continue
        o = np.asarray(o, dtype="float64")
        err = np.linalg.norm(o.astype("float16").astype("float64") - o) / max(np.linalg.norm(o), 1e-300)
        if not err <= 1e-3:
            sys.exit(f"{name}: output {k} is not representable in fp16 (relative L2 {err:.3g} after rounding)")
    for kind, values in (("input", list(feeds.values())), ("output", outputs)):
        for k, v in enumerate(values):
            with open(os.path.join(case, "test_data_set_0", f"{kind}_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(v)).SerializeToString())
    print(f"{name}: opset {onnx.load(model_path, load_external_data=False).opset_import[0].version}, "
          f"outputs {[o.shape for o in outputs]}")


def export(module, args, path, input_names, output_names, opset):
    import torch

    axes = {n: {0: "batch"} for n in input_names + output_names}
    torch.onnx.export(module, args, path, input_names=input_names, output_names=output_names, dynamic_axes=axes,
                      opset_version=opset, dynamo=False)


def padded_mask(batch, seq):
    """An attention mask with padded batch elements (rows 1 and 2 end early)."""
    import numpy as np

    mask = np.ones((batch, seq), dtype="int64")
    mask[1, 11:] = 0
    mask[2, 5:] = 0
    return mask


def save_external(model, path):
    """`model` with every initializer in one file beside it, as large-model exporters write."""
    import onnx

    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0)


def calibrated(model):
    """Batch-norm statistics from one batch of random images. With torchvision's random init and
    identity statistics, MobileNet-v3's activations shrink by about 2/C at every depthwise
    convolution until its logits (RMS ~5e-10) are below fp16's smallest subnormal: on the CUDA
    backend (fp16 storage) they were exactly zero. Calibrated, they stay near unit scale, like a
    trained model's."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average: one batch sets the statistics
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 3, 224, 224))
    return model.eval()


def vision_cases(out, rng):
    import onnx
    import torch
    import torchvision

    image = rng.standard_normal((3, 3, 224, 224)).astype("float32")
    for name in ("mobilenet_v3_small", "resnet34"):
        torch.manual_seed(0)
        model = calibrated(getattr(torchvision.models, name)(weights=None))
        example = torch.randn(2, 3, 224, 224)
        save_case(out, name, lambda p: export(model, (example,), p, ["image"], ["logits"], 17), [image])

    src = os.path.join(out, "mobilenet_v3_small", "model.onnx")
    save_case(out, "mobilenet_v3_small_external_data", lambda p: save_external(onnx.load(src), p), [image])


def to_fp16_initializers(src, path):
    """Stores every float initializer as fp16 behind a Cast to float, as fp16 exporters do."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(src)
    graph = model.graph
    casts = []
    for init in graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype("float16"), init.name + "_fp16")
        init.CopyFrom(half)
        casts.append(helper.make_node("Cast", [init.name], [init.name[: -len("_fp16")]], to=onnx.TensorProto.FLOAT))
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, path)


def bert_cases(out, rng):
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(0)

    class Bert(torch.nn.Module):
        """BertModel with the additive attention mask BERT exports have long carried,
        (1 - mask) * min: transformers 5 builds its mask from boolean index arithmetic, which the
        IR (no boolean tensors) cannot express."""

        def __init__(self):
            super().__init__()
            self.bert = BertModel(config).eval()

        def forward(self, input_ids, attention_mask):
            additive = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
            hidden = self.bert.embeddings(input_ids=input_ids)
            encoded = self.bert.encoder(hidden, attention_mask=additive).last_hidden_state
            return encoded, self.bert.pooler(encoded)

    model = Bert().eval()
    seq = 16
    ids = rng.integers(0, 1000, (3, seq)).astype("int64")
    mask = padded_mask(3, seq)
    example = (torch.tensor(ids[:2]), torch.tensor(mask[:2]))
    names = (["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"])
    for opset in (13, 17):
        save_case(out, f"tiny_bert_opset{opset}", lambda p: export(model, example, p, *names, opset), [ids, mask])
    src = os.path.join(out, "tiny_bert_opset17", "model.onnx")
    save_case(out, "tiny_bert_fp16_initializers", lambda p: to_fp16_initializers(src, p), [ids, mask])


# The cases fill_exports.py rebuilds without torch from their graphs (the others derive from them).
BASE_CASES = ("mobilenet_v3_small", "resnet34", "tiny_bert_opset13", "tiny_bert_opset17")


def write_graphs(out, graphs):
    """Each base case's model with its float initializers of more than 16 elements emptied (dims
    and type kept, marked "emptied"): the exporter's graph in kilobytes, for fill_exports.py."""
    import onnx

    os.makedirs(graphs, exist_ok=True)
    for name in BASE_CASES:
        model = onnx.load(os.path.join(out, name, "model.onnx"))
        float_types = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)
        for init in model.graph.initializer:
            if init.data_type in float_types and math.prod(init.dims) > 16:
                for field in ("raw_data", "float_data", "double_data", "int32_data"):
                    init.ClearField(field)
                init.doc_string = "emptied"
        onnx.save(model, os.path.join(graphs, name + ".onnx"))
        print(f"{name}: graph {os.path.getsize(os.path.join(graphs, name + '.onnx'))} bytes")


def main():
    args = sys.argv[1:]
    graphs = None
    if len(args) == 3 and args[1] == "--graphs":
        graphs = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR [--graphs GRAPHS_DIR]")
    try:
        import numpy as np
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import torch
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"a Python package is missing ({e.name}); scripts/install-python-deps.sh installs them")
        sys.exit(3)
    warnings.simplefilter("ignore")
    torch.set_num_threads(2)
    out = args[0]
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))  # fresh inputs every run
    vision_cases(out, rng)
    bert_cases(out, rng)
    if graphs is not None:
        write_graphs(out, graphs)


if __name__ == "__main__":
    main()
