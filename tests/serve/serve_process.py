"""Starting `atoll serve` on free loopback ports, for the tests that drive it with Triton's clients."""
import re
import subprocess


def start_server(atoll, *args):
    """`atoll serve ARGS` with every port chosen by the system: (process, [gRPC, HTTP, metrics])."""
    proc = subprocess.Popen([atoll, "serve", *args, "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    ports = re.search(r"gRPC [\d.]+:(\d+), HTTP [\d.]+:(\d+), metrics [\d.]+:(\d+)", line)
    if not ports:
        proc.kill()
        raise SystemExit(f"server did not start: {line} {proc.stderr.read()}")
    return proc, [int(p) for p in ports.groups()]
