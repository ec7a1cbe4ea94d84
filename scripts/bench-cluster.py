#!/usr/bin/env python3
"""`make bench-cluster`: what sharing sessions through Redis costs, and what more instances bring.

1. Round trip of one client with one request in flight, against one canvasd started by the
   bench, without and with --session-store (every change written to Redis before its reply),
   and the store's floor, measured in the same run: the round trip without the store plus a
   bare client's round trip of the store's own write script (`canvasbench store-floor`); the
   ratio of the round trip with the store to that floor is printed; then the same with a replica
   confirming each change (--session-store-replicas 1), whose floor includes the bare client's
   WAIT.
2. `canvasbench load` through HAProxy (deploy/haproxy.cfg) in front of 1 instance without a
   session store, then 1 and 3 instances sharing sessions in Redis and one document folder,
   clients spread over source addresses.

    scripts/bench-cluster.py [--build .build/release] [--clients 16] [--requests 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster import Cluster, free_port, wait_for_port  # noqa: E402


def bench(binary: Path, arguments: list) -> str:
    """Runs canvasbench, printing what it prints, and returns that."""
    print("$ canvasbench " + " ".join(arguments), flush=True)
    run = subprocess.run([str(binary), *arguments], stdout=subprocess.PIPE, text=True)
    print(run.stdout, end="", flush=True)
    if run.returncode != 0:
        raise SystemExit(f"canvasbench failed with status {run.returncode}")
    return run.stdout


def p50(output: str, row: str) -> float:
    """The p50 column of a latency row (`all`, `script`) in canvasbench's output."""
    for line in output.splitlines():
        fields = line.split()
        if fields and fields[0] == row and len(fields) == 5:
            return float(fields[1])
    raise SystemExit(f"no latency row {row!r} in canvasbench's output")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(Path(__file__).resolve().parents[1] / ".build" / "release"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rtt-requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each round trip measure, their p50s' median taken")
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
        store = f"redis://127.0.0.1:{port}/0"
        # Each figure is the median of the p50s of `--rounds` runs, the three kinds of run taken
        # in turn: one run's p50 without the store moved by half from run to run on the 2-core
        # machine (80-126 µs), and the ratio with it.
        withouts, shareds, scripts = [], [], []
        for _ in range(options.rounds):
            withouts.append(p50(bench(canvasbench, single), "all"))
            shareds.append(p50(bench(canvasbench, single + ["--session-store", store]), "all"))
            scripts.append(p50(bench(canvasbench, ["store-floor", "--session-store", store, "--requests", str(options.rtt_requests)]), "script"))
        without, shared, script = statistics.median(withouts), statistics.median(shareds), statistics.median(scripts)
        floor = without + script
        print(f"store's floor: {without:.0f} µs without the store + {script:.0f} µs of its script = {floor:.0f} µs p50; "
              f"with the store {shared:.0f} µs: {shared / floor:.2f}x the floor ({shared / without:.2f}x without the store; "
              f"medians of {options.rounds} runs each)", flush=True)
        # The same with a replica that must confirm each change (--session-store-replicas 1:
        # Redis's WAIT after each write); the floor then includes the bare client's WAIT.
        # A folder of its own: the replica's sync file must not meet the primary's.
        replica_port = free_port()
        (folder / "replica").mkdir(exist_ok=True)
        replica = subprocess.Popen(["redis-server", "--port", str(replica_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                    "--dir", str(folder / "replica"), "--replicaof", "127.0.0.1", str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(replica_port, replica, "redis-server (replica)")
            for _ in range(100):
                info = subprocess.run(["redis-cli", "-p", str(replica_port), "INFO", "replication"], capture_output=True, text=True).stdout
                if "master_link_status:up" in info:
                    break
                time.sleep(0.1)
            else:
                raise SystemExit("the replica did not link to the primary in 10 s")
            replicateds, scripts = [], []
            for _ in range(options.rounds):
                replicateds.append(p50(bench(canvasbench, single + ["--session-store", store, "--session-store-replicas", "1"]), "all"))
                scripts.append(p50(bench(canvasbench, ["store-floor", "--session-store", store, "--requests", str(options.rtt_requests),
                                                       "--replicas", "1"]), "script"))
            replicated, script = statistics.median(replicateds), statistics.median(scripts)
            floor = without + script
            print(f"with one replica confirming each change: floor {without:.0f} µs + {script:.0f} µs of its script and WAIT = "
                  f"{floor:.0f} µs p50; with the store {replicated:.0f} µs: {replicated / floor:.2f}x the floor "
                  f"({replicated / shared:.2f}x the store without a replica; medians of {options.rounds} runs each)", flush=True)
        finally:
            replica.terminate()
            replica.wait()
    finally:
        redis.terminate()
        redis.wait()

    throughput = {}
    for instances, shared in ((1, False), (1, True), (3, True)):
        print(f"== through HAProxy, {instances} instance{'s' if instances > 1 else ''}, "
              + ("sessions in Redis" if shared else "no session store") + ", one document folder", flush=True)
        documents = folder / f"documents-{instances}-{shared}"
        with Cluster(canvasd, documents, folder / f"cluster-{instances}-{shared}", instances=instances, session_store=shared,
                     log_level="error", extra=["--max-sessions", "5000"]) as cluster:
            output = bench(canvasbench, ["load", "--clients", str(options.clients), "--requests", str(options.requests),
                                         "--connect", cluster.endpoint, "--connect-events", cluster.events,
                                         "--documents", str(documents), "--sources", str(options.clients)])
            throughput[(instances, shared)] = replies_per_second(output)
    alone = throughput[(1, False)]
    print(f"{options.clients} clients through HAProxy, throughput with the store against 1 instance without it: "
          f"1 instance {throughput[(1, True)] / alone:.2f}x, 3 instances {throughput[(3, True)] / alone:.2f}x (target at least 0.7x)",
          flush=True)
    return 0


def replies_per_second(output: str) -> float:
    """The throughput canvasbench load printed (`throughput N replies/s`)."""
    for line in output.splitlines():
        fields = line.split()
        if "throughput" in fields and fields.index("throughput") + 1 < len(fields):
            return float(fields[fields.index("throughput") + 1])
    raise SystemExit("no throughput in canvasbench's output")


if __name__ == "__main__":
    sys.exit(main())
