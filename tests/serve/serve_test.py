"""`atoll serve` end to end, driven by Triton's own Python client (tritonclient, gRPC and HTTP).

Starts the server on the simulated device (kernels computed by the CPU backend) on free loopback
ports, then checks health and metadata, inference over gRPC (raw and typed tensors) and HTTP
(binary and JSON tensors) against `atoll run` on the same input (a zoo model, and a model.onnx
with an L2 config when the onnx package is installed), the protocol's error codes,
malformed and oversize requests, a bounded load of mixed RT and BE clients, metrics, repository
load/unload, and that SIGTERM drains accepted requests. Exits 77 (skipped) without tritonclient.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import serve_process

try:
    import numpy as np
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import InferenceServerException
except ImportError as e:
    print(f"SKIP: tritonclient is not installed ({e}); run scripts/serve-venv.sh")
    sys.exit(77)
try:  # the ONNX model checks need it to write a model.onnx; without it they are skipped
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    onnx = None

ATOLL = sys.argv[1]
results = {"passed": 0, "failed": 0}


def check(name, condition, detail=""):
    if condition:
        results["passed"] += 1
        print(f"ok   {name}")
    else:
        results["failed"] += 1
        print(f"FAIL {name} {detail}")


def expect_error(name, call, grpc_status=None, http_status=None, text=""):
    try:
        call()
    except InferenceServerException as e:
        got = e.status()
        wanted = grpc_status if grpc_status is not None else str(http_status)
        check(name, (got == wanted or str(got) == wanted) and text in e.message(), f"{got} {e.message()}")
        return
    check(name, False, "no error")


def write_repository(root):
    models = {
        "cnn": """platform: "atoll_zoo"
max_batch_size: 2
input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] } ]
instance_group [ { kind: KIND_GPU count: 1 } ]
parameters { key: "zoo_model" value: { string_value: "tiny_cnn" } }
""",
        "broken": 'platform: "tensorflow_savedmodel"\n',
    }
    for name, text in models.items():
        os.makedirs(os.path.join(root, name, "1"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(root, "cnn_rt", "1"))
    with open(os.path.join(root, "cnn_rt", "config.json"), "w") as f:
        json.dump({"max_batch_size": 1, "parameters": {"zoo_model": {"string_value": "tiny_cnn"},
                                                       "default_class": {"string_value": "rt"}}}, f)


def write_onnx_model(root):
    """An ONNX model with a symbolic batch (Gemm + Relu on [batch, 12]) and an L2 config made for it."""
    rng = np.random.default_rng()
    w = numpy_helper.from_array(rng.uniform(-1, 1, (5, 12)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-1, 1, 5).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1), helper.make_node("Relu", ["y"], ["z"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 5])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    folder = os.path.join(root, "mlp")
    os.makedirs(os.path.join(folder, "1"))
    onnx.save(model, os.path.join(folder, "1", "model.onnx"))
    subprocess.run([ATOLL, "l2", "config", os.path.join(folder, "1", "model.onnx"), "--batch", "4", "--slices", "all",
                    "--out", os.path.join(folder, "l2.json")], check=True, capture_output=True)
    with open(os.path.join(folder, "config.pbtxt"), "w") as f:
        f.write('platform: "onnxruntime_onnx"\nmax_batch_size: 4\n'
                'parameters { key: "l2_config" value: { string_value: "l2.json" } }\n')


def check_onnx(g, h, work):
    if onnx is None:
        print("skip ONNX model checks: the onnx package is not installed (scripts/serve-venv.sh installs it)")
        return
    x = np.random.default_rng().uniform(-1, 1, (3, 12)).astype(np.float32)
    np.save(os.path.join(work, "mlp_x.npy"), x)
    subprocess.run([ATOLL, "run", os.path.join(work, "repo", "mlp", "1", "model.onnx"), "--device", "cpu", "--batch",
                    "3", "--iters", "1", "--warmup", "0", "--input", f"x={work}/mlp_x.npy", "--output",
                    f"{work}/mlp_out"], check=True, capture_output=True)
    expected = np.load(os.path.join(work, "mlp_out", "z.npy"))
    close = lambda a: a is not None and a.shape == expected.shape and np.allclose(a, expected, rtol=1e-5, atol=1e-6)
    check("onnx model over grpc equals atoll run", close(g.infer("mlp", [grpc_input(x, name="x")]).as_numpy("z")))
    hi = httpclient.InferInput("x", list(x.shape), "FP32")
    hi.set_data_from_numpy(x, binary_data=True)
    check("onnx model over http equals atoll run", close(h.infer("mlp", [hi]).as_numpy("z")))
    config = g.get_model_config("mlp", as_json=True)["config"]
    check("onnx model config: platform and L2 status", config["platform"] == "onnxruntime_onnx" and
          "no effect" in config["parameters"]["l2_status"]["string_value"], str(config))


def start_server(repo, extra=()):
    return serve_process.start_server(ATOLL, "--device", "sim", "--model-repository", repo, *extra)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def grpc_input(x, datatype="FP32", name="input"):
    i = grpcclient.InferInput(name, list(x.shape), datatype)
    i.set_data_from_numpy(x)
    return i


def check_shared_memory(g, h, x, close):
    """Triton's system shared-memory extension through tritonclient's own helpers: the input read
    from a registered region, the output written into another, status and unregister, and the
    errors for an unknown region and a tensor past a region's end."""
    try:
        import tritonclient.utils.shared_memory as shm
    except ImportError as e:
        print(f"skip shared-memory checks: {e}")
        return
    out_bytes = 10 * 4
    key_in, key_out = f"/atoll_test_in_{os.getpid()}", f"/atoll_test_out_{os.getpid()}"
    h_in = shm.create_shared_memory_region("in_region", key_in, x.nbytes)
    h_out = shm.create_shared_memory_region("out_region", key_out, out_bytes)
    try:
        shm.set_shared_memory_region(h_in, [x])
        g.register_system_shared_memory("in_region", key_in, x.nbytes)
        g.register_system_shared_memory("out_region", key_out, out_bytes)
        status = g.get_system_shared_memory_status(as_json=True)
        check("shm status lists both regions", sorted(status.get("regions", {})) == ["in_region", "out_region"],
              str(status))
        check("shm is a listed extension", "system_shared_memory" in g.get_server_metadata().extensions)
        i = grpcclient.InferInput("input", list(x.shape), "FP32")
        i.set_shared_memory("in_region", x.nbytes)
        o = grpcclient.InferRequestedOutput("logits")
        o.set_shared_memory("out_region", out_bytes)
        g.infer("cnn", [i], outputs=[o])
        got = shm.get_contents_as_numpy(h_out, np.float32, [1, 10])
        check("shm input and output equal atoll run", close(got))
        i.set_shared_memory("in_region", x.nbytes, offset=4)
        expect_error("shm tensor past the region's end", lambda: g.infer("cnn", [i]), "StatusCode.INVALID_ARGUMENT",
                     text="do not fit")
        i.set_shared_memory("nowhere", x.nbytes)
        expect_error("shm unknown region", lambda: g.infer("cnn", [i]), "StatusCode.NOT_FOUND", text="nowhere")
        expect_error("shm register a missing key", lambda: g.register_system_shared_memory("bad", "/atoll_no_key", 8),
                     "StatusCode.NOT_FOUND", text="cannot open key")
        g.unregister_system_shared_memory()
        check("shm unregister all", not g.get_system_shared_memory_status(as_json=True).get("regions"))

        # The same over HTTP: registration, status, and tensors in and out of the regions.
        shm.set_shared_memory_region(h_out, [np.zeros((1, 10), np.float32)])
        h.register_system_shared_memory("in_region", key_in, x.nbytes)
        h.register_system_shared_memory("out_region", key_out, out_bytes)
        names = sorted(r["name"] for r in h.get_system_shared_memory_status())
        check("http shm status lists both regions", names == ["in_region", "out_region"], str(names))
        hi = httpclient.InferInput("input", list(x.shape), "FP32")
        hi.set_shared_memory("in_region", x.nbytes)
        ho = httpclient.InferRequestedOutput("logits")
        ho.set_shared_memory("out_region", out_bytes)
        h.infer("cnn", [hi], outputs=[ho])
        check("http shm input and output equal atoll run", close(shm.get_contents_as_numpy(h_out, np.float32, [1, 10])))
        h.unregister_system_shared_memory("in_region")
        names = [r["name"] for r in h.get_system_shared_memory_status()]
        check("http shm unregister one", names == ["out_region"], str(names))
        expect_error("http shm unknown region", lambda: h.infer("cnn", [hi]), http_status=404, text="in_region")
        h.unregister_system_shared_memory()
    finally:
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)


def check_inference(g, h, work, port_grpc):
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    subprocess.run([ATOLL, "run", "tiny_cnn", "--device", "cpu", "--iters", "1", "--warmup", "0", "--input",
                    f"input={work}/x.npy", "--output", f"{work}/out"], check=True, capture_output=True)
    expected = np.load(os.path.join(work, "out", "logits.npy"))
    close = lambda a: a is not None and a.shape == expected.shape and np.allclose(a, expected, rtol=1e-5, atol=1e-6)

    r = g.infer("cnn", [grpc_input(x)])
    check("grpc raw tensors equal atoll run", close(r.as_numpy("logits")))
    check("grpc default class is the model's (be)", r.get_response().parameters["atoll_class"].string_param == "be")
    r = g.infer("cnn", [grpc_input(x)], priority=1)
    check("grpc priority 1 runs RT", r.get_response().parameters["atoll_class"].string_param == "rt")
    check("RT answer equals atoll run", close(r.as_numpy("logits")))

    hi = httpclient.InferInput("input", list(x.shape), "FP32")
    hi.set_data_from_numpy(x, binary_data=True)
    r = h.infer("cnn", [hi], outputs=[httpclient.InferRequestedOutput("logits", binary_data=True)])
    check("http binary tensors equal atoll run", close(r.as_numpy("logits")))
    hi.set_data_from_numpy(x, binary_data=False)
    r = h.infer("cnn", [hi], outputs=[httpclient.InferRequestedOutput("logits", binary_data=False)])
    check("http JSON tensors equal atoll run", close(r.as_numpy("logits")))

    check_shared_memory(g, h, x, close)

    # One request at a time on a kept-alive connection: an HTTP answer must not wait for the
    # client's delayed ACK (Nagle's algorithm on the server's socket held each one ~40 ms on Linux).
    # Each HTTP request is paired with a gRPC one (no such stall: gRPC sets TCP_NODELAY), so load on
    # the machine slows both alike and their difference stays near zero.
    hi.set_data_from_numpy(x, binary_data=True)
    gaps = []
    for _ in range(15):
        start = time.perf_counter()
        h.infer("cnn", [hi])
        middle = time.perf_counter()
        g.infer("cnn", [grpc_input(x)])
        gaps.append((middle - start) - (time.perf_counter() - middle))
    gaps.sort()
    check("http answers one request at a time as fast as grpc (no delayed-ACK stall)", gaps[len(gaps) // 2] < 0.015,
          f"median HTTP - gRPC {gaps[len(gaps) // 2] * 1e3:.1f} ms")

    x2 = np.concatenate([x, x])
    r = g.infer("cnn", [grpc_input(x2)])
    check("batch 2 answers both items", close(r.as_numpy("logits")[1:]) and r.as_numpy("logits").shape[0] == 2)

    # Typed contents: the raw stub, as tritonclient always sends raw bytes.
    stub = g._client_stub
    req = service_pb2.ModelInferRequest(model_name="cnn")
    t = req.inputs.add(name="input", datatype="FP32", shape=[1, 3, 32, 32])
    t.contents.fp32_contents.extend(x.ravel().tolist())
    resp = stub.ModelInfer(req)
    typed = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32).reshape(1, 10)
    check("grpc typed contents equal atoll run", close(typed))


def check_errors(g, h, port_http):
    x = np.zeros((1, 3, 32, 32), np.float32)
    expect_error("unknown model: NOT_FOUND", lambda: g.infer("nope", [grpc_input(x)]), "StatusCode.NOT_FOUND",
                 text="unknown model 'nope'")
    expect_error("unknown model over http: 404", lambda: h.infer("nope", [httpclient.InferInput("input", [1], "FP32")
                                                                        .set_data_from_numpy(np.zeros(1, np.float32))]),
                 http_status=404)
    expect_error("wrong datatype", lambda: g.infer("cnn", [grpc_input(x.astype(np.float64), "FP64")]),
                 "StatusCode.INVALID_ARGUMENT", text="datatype FP64, expected FP32")
    expect_error("wrong shape", lambda: g.infer("cnn", [grpc_input(np.zeros((1, 3, 16, 16), np.float32))]),
                 "StatusCode.INVALID_ARGUMENT", text="expected [-1,3,32,32]")
    expect_error("batch over max_batch_size", lambda: g.infer("cnn", [grpc_input(np.zeros((3, 3, 32, 32), np.float32))]),
                 "StatusCode.INVALID_ARGUMENT", text="batch of 1..2")
    req = service_pb2.ModelInferRequest(model_name="cnn")
    req.inputs.add(name="input", datatype="FP32", shape=[1, 3, 32, 32])
    req.raw_input_contents.append(b"\0" * 100)
    try:
        g._client_stub.ModelInfer(req)
        check("wrong byte count", False, "no error")
    except Exception as e:  # grpc.RpcError
        check("wrong byte count", "carries 100 bytes" in e.details() and e.code().name == "INVALID_ARGUMENT", str(e))
    req.inputs[0].shape[:] = [1 << 40, 1 << 40, 3, 3]
    try:
        g._client_stub.ModelInfer(req)
        check("huge declared shape", False, "no error")
    except Exception as e:
        check("huge declared shape", e.code().name == "INVALID_ARGUMENT", str(e))
    big = np.zeros((2, 3, 32, 32), np.float32)
    req = service_pb2.ModelInferRequest(model_name="cnn")
    req.inputs.add(name="input", datatype="FP32", shape=[2, 3, 32, 32])
    req.raw_input_contents.append(b"\0" * (2 << 20))
    try:
        g._client_stub.ModelInfer(req)
        check("oversize gRPC request", False, "no error")
    except Exception as e:
        check("oversize gRPC request: RESOURCE_EXHAUSTED", e.code().name == "RESOURCE_EXHAUSTED", str(e))
    status, _ = raw_http(port_http, "POST", "/v2/models/cnn/infer", b"\0" * (2 << 20))
    check("oversize HTTP request: 413", status == 413, str(status))
    del big


def raw_http(port, method, path, body, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def check_malformed(g, port_grpc, port_http):
    status, body = raw_http(port_http, "POST", "/v2/models/cnn/infer", b"\x00\xffgarbage{")
    check("garbage HTTP body: 400 with a message", status == 400 and b"error" in body, f"{status} {body[:80]}")
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 32, 32],
                                     "parameters": {"binary_data_size": 12288}}]}).encode()
    status, body = raw_http(port_http, "POST", "/v2/models/cnn/infer", header + b"\0" * 100,
                            {"Inference-Header-Content-Length": str(len(header))})
    check("truncated binary payload: 400", status == 400 and b"only 100 remain" in body, f"{status} {body[:120]}")
    status, _ = raw_http(port_http, "POST", "/v2/models/cnn/infer", header,
                         {"Inference-Header-Content-Length": "99999999"})
    check("header length past the body: 400", status == 400, str(status))
    for port in (port_grpc, port_http):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(os.urandom(4096))
            s.settimeout(2)
            try:
                s.recv(100)
            except (socket.timeout, ConnectionResetError):
                pass
    check("server still live after garbage bytes", g.is_server_live() and g.is_model_ready("cnn"))


def load_test(g_port, pid):
    """Mixed RT and BE clients past what the server can serve: bounded, no lost or duplicated answer."""
    x = np.random.default_rng(2).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    answers, lock, latencies = {}, threading.Lock(), {"rt": [], "be": []}
    refused = {"rt": 0, "be": 0}
    other_errors = []

    def client(cls, n, outstanding):
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{g_port}")
        done = threading.Semaphore(0)
        sent = []

        def on_done(rid, t0, result, error):
            with lock:
                answers[rid] = answers.get(rid, 0) + 1
                if error is None:
                    latencies[cls].append(time.monotonic() - t0)
                    if result.get_response().id != rid:
                        other_errors.append(f"answer for {result.get_response().id} came to {rid}")
                elif error.status() == "StatusCode.RESOURCE_EXHAUSTED":
                    refused[cls] += 1
                else:
                    other_errors.append(str(error))
            done.release()

        window = threading.Semaphore(outstanding)
        for k in range(n):
            window.acquire()
            rid = f"{cls}-{threading.get_ident()}-{k}"
            sent.append(rid)
            t0 = time.monotonic()
            c.async_infer("cnn", [grpc_input(x)], request_id=rid, priority=1 if cls == "rt" else 0,
                          callback=lambda result, error, rid=rid, t0=t0: (on_done(rid, t0, result, error),
                                                                          window.release()))
            if cls == "rt":
                time.sleep(0.01)
        for _ in sent:
            done.acquire(timeout=60)
        c.close()
        return sent

    rss_before = rss_kib(pid)
    sent = []
    threads = [threading.Thread(target=lambda: sent.extend(client("be", 150, 16))) for _ in range(4)]
    threads += [threading.Thread(target=lambda: sent.extend(client("rt", 40, 1))) for _ in range(2)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    elapsed = time.monotonic() - t0
    rss_after = rss_kib(pid)
    check("load: every request answered exactly once", len(sent) == 680 and
          all(answers.get(r) == 1 for r in sent), f"{len(sent)} sent, {len(answers)} answered")
    check("load: no error other than queue full", not other_errors, str(other_errors[:3]))
    check("load: BE overload was refused (queue bounded)", refused["be"] > 0, str(refused))
    check("load: every RT request served", refused["rt"] == 0 and len(latencies["rt"]) == 80, str(refused))
    rt_p50, be_p50 = np.median(latencies["rt"]), np.median(latencies["be"])
    check("load: RT served first (RT p50 below BE p50)", rt_p50 < be_p50, f"RT {rt_p50 * 1e3:.2f} ms, BE {be_p50 * 1e3:.2f} ms")
    check("load: memory bounded (RSS grew < 64 MiB)", rss_after - rss_before < 65536, f"{rss_before} -> {rss_after} KiB")
    print(f"     load: {len(sent)} requests in {elapsed:.1f} s, RT p50 {rt_p50 * 1e3:.2f} ms, BE p50 "
          f"{be_p50 * 1e3:.2f} ms, refused {refused}")


def check_observability(g, h, port_metrics):
    stats = g.get_inference_statistics("cnn", as_json=True)["model_stats"][0]
    check("statistics count successes", int(stats["inference_stats"]["success"]["count"]) > 0)
    text = raw_http(port_metrics, "GET", "/metrics", None)[1].decode()
    success = re.search(r'nv_inference_request_success\{model="cnn",version="1"\} (\d+)', text)
    check("metrics: nv_inference_request_success", success and int(success.group(1)) > 0)
    check("metrics: nv_inference_queue_duration_us", 'nv_inference_queue_duration_us{model="cnn"' in text)
    rejected = re.search(r'atoll_requests_rejected_total\{class="be"\} (\d+)', text)
    check("metrics: atoll BE rejections counted", rejected and int(rejected.group(1)) > 0)
    check("metrics: atoll preemptions per class", 'atoll_preemptions_total{class="be"}' in text)
    index = {m["name"]: m for m in g.get_model_repository_index(as_json=True)["models"]}
    check("repository index lists the broken model UNAVAILABLE", index["broken"]["state"] == "UNAVAILABLE" and
          "not served by atoll" in index["broken"]["reason"], str(index.get("broken")))
    g.unload_model("cnn_rt")
    check("unload: model not ready", not g.is_model_ready("cnn_rt"))
    expect_error("unloaded model: UNAVAILABLE", lambda: g.infer("cnn_rt", [grpc_input(np.zeros((1, 3, 32, 32), np.float32))]),
                 "StatusCode.UNAVAILABLE")
    # A config override is not applied, so it must not load as if it were.
    override = json.dumps({"max_batch_size": 1})
    expect_error("load with a config override over grpc: refused", lambda: g.load_model("cnn_rt", config=override),
                 "StatusCode.UNIMPLEMENTED", text="load parameters are not supported (got 'config')")
    expect_error("load with a config override over http: refused", lambda: h.load_model("cnn_rt", config=override),
                 http_status=501, text="load parameters are not supported (got 'config')")
    check("a refused load leaves the model unloaded", not g.is_model_ready("cnn_rt"))
    h.load_model("cnn_rt")
    r = g.infer("cnn_rt", [grpc_input(np.zeros((1, 3, 32, 32), np.float32))])
    check("reload over HTTP: RT default class served", r.get_response().parameters["atoll_class"].string_param == "rt")
    meta = h.get_model_metadata("cnn")
    check("http metadata", meta["inputs"][0]["shape"] == [-1, 3, 32, 32] and meta["outputs"][0]["name"] == "logits")
    config = g.get_model_config("cnn", as_json=True)["config"]
    check("grpc model config", int(config["max_batch_size"]) == 2 and config["input"][0]["data_type"] == "TYPE_FP32")
    check("server metadata", g.get_server_metadata().name == "atoll")
    # Endpoints atoll does not serve answer with the protocol's error body, not an empty one.
    expect_error("http trace settings: 404 naming what is served", lambda: h.get_trace_settings(), http_status=404,
                 text="atoll serves the KServe v2 protocol with the model_repository")
    expect_error("grpc trace settings: UNIMPLEMENTED saying so", lambda: g.get_trace_settings(),
                 "StatusCode.UNIMPLEMENTED", text="does not serve the trace extension")
    expect_error("grpc log settings: UNIMPLEMENTED saying so", lambda: g.get_log_settings(),
                 "StatusCode.UNIMPLEMENTED", text="does not serve the logging extension")
    expect_error("grpc CUDA shared memory: UNIMPLEMENTED, pointing at system shared memory",
                 lambda: g.get_cuda_shared_memory_status(), "StatusCode.UNIMPLEMENTED",
                 text="register system shared memory instead")


def check_sigterm_drains(proc, g_port):
    x = np.zeros((1, 3, 32, 32), np.float32)
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{g_port}")
    outcomes, lock = [], threading.Lock()
    done = threading.Semaphore(0)

    def on_done(result, error):
        with lock:
            outcomes.append("ok" if error is None else error.status())
        done.release()

    for _ in range(8):
        c.async_infer("cnn", [grpc_input(x)], callback=on_done)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    for _ in range(8):
        done.acquire(timeout=30)
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "hung"
    check("SIGTERM: server exits 0", code == 0, f"{code} {proc.stderr.read()[-500:]}")
    check("SIGTERM: accepted requests answered", len(outcomes) == 8 and
          all(o in ("ok", "StatusCode.UNAVAILABLE") for o in outcomes) and "ok" in outcomes, str(outcomes))


def main():
    with tempfile.TemporaryDirectory() as work:
        repo = os.path.join(work, "repo")
        write_repository(repo)
        if onnx is not None:
            write_onnx_model(repo)
        proc, (port_grpc, port_http, port_metrics) = start_server(
            repo, ["--max-queue-rt", "8", "--max-queue-be", "16", "--max-request-bytes", "1048576"])
        try:
            g = grpcclient.InferenceServerClient(f"127.0.0.1:{port_grpc}")
            h = httpclient.InferenceServerClient(f"127.0.0.1:{port_http}")
            check("grpc live and ready", g.is_server_live() and g.is_server_ready() and g.is_model_ready("cnn"))
            check("http live and ready", h.is_server_live() and h.is_server_ready() and h.is_model_ready("cnn"))
            check("broken model not ready", not g.is_model_ready("broken"))
            check_inference(g, h, work, port_grpc)
            check_onnx(g, h, work)
            check_errors(g, h, port_http)
            check_malformed(g, port_grpc, port_http)
            load_test(port_grpc, proc.pid)
            check_observability(g, h, port_metrics)
            check_sigterm_drains(proc, port_grpc)
        finally:
            if proc.poll() is None:
                proc.kill()
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
