#!/usr/bin/env python3
"""`make bench-cluster`: what sharing sessions through Redis costs, and what more instances bring.

1. Round trip of one client with one request in flight, against one canvasd started by the
   bench, without and with --session-store (every change written to Redis before its reply).
2. `canvasbench load` through HAProxy (deploy/haproxy.cfg) in front of 1 instance without a
   session store, then 1 and 3 instances sharing sessions in Redis and one document folder,
   clients spread over source addresses.

    scripts/bench-cluster.py [--build .build/release] [--clients 16] [--requests 1000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster import Cluster, free_port, wait_for_port  # noqa: E402


def bench(binary: Path, arguments: list) -> None:
    print("$ canvasbench " + " ".join(arguments), flush=True)
    run = subprocess.run([str(binary), *arguments])
    if run.returncode != 0:
        raise SystemExit(f"canvasbench failed with status {run.returncode}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(Path(__file__).resolve().parents[1] / ".build" / "release"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rtt-requests", type=int, default=3000)
    options = parser.parse_args()
    build = Path(options.build)
    canvasbench, canvasd = build / "canvasbench", build / "canvasd"
    folder = Path(tempfile.mkdtemp(prefix="canvas-bench-cluster-"))

    print("== round trip, 1 client, 1 request in flight, no flattens, one canvasd", flush=True)
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, redis, "redis-server")
        single = ["load", "--clients", "1", "--window", "1", "--requests", str(options.rtt_requests), "--flatten-every", "1000000000"]
        bench(canvasbench, single)
        bench(canvasbench, single + ["--session-store", f"redis://127.0.0.1:{port}/0"])
    finally:
        redis.terminate()
        redis.wait()

    for instances, shared in ((1, False), (1, True), (3, True)):
        print(f"== through HAProxy, {instances} instance{'s' if instances > 1 else ''}, "
              + ("sessions in Redis" if shared else "no session store") + ", one document folder", flush=True)
        documents = folder / f"documents-{instances}-{shared}"
        with Cluster(canvasd, documents, folder / f"cluster-{instances}-{shared}", instances=instances, session_store=shared,
                     log_level="error", extra=["--max-sessions", "5000"]) as cluster:
            bench(canvasbench, ["load", "--clients", str(options.clients), "--requests", str(options.requests),
                                "--connect", cluster.endpoint, "--connect-events", cluster.events,
                                "--documents", str(documents), "--sources", str(options.clients)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
