"""Redis with Sentinel on this machine: a primary, replicas and three sentinels, for the tests of
sessions that survive the loss of Redis's primary (clients/python/tests/test_session_sentinel.py,
test_cluster.py) and `make cluster SENTINEL=1`.

    with SentinelRedis(folder) as redis:            # free ports; or ports=[...] for fixed ones
        canvasd --session-store {redis.url} --session-store-replicas 1 ...
        redis.kill_primary()                         # SIGKILL to whichever is primary now

Each process is a plain `redis-server` (the sentinels in `--sentinel` mode, each with a config
file of its own, which Sentinel rewrites as it learns), bound to loopback, nothing saved to disk.
Sentinel gives up on a primary after `down_after` milliseconds without an answer (2 s here; Redis's
default is 30 s; at 1 s a newly promoted primary busy on a loaded 2-core machine was taken for
down too, and a second failover followed), and the sentinels' quorum is two. A replica is synced
at once (`repl-diskless-sync-delay 0`; Redis's 5 s wait for more replicas would leave a new
primary without a replica to confirm writes for those 5 s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import redis

from cluster import Started, free_port, wait_for_port

MASTER = "canvas"


class SentinelRedis(Started):
    def __init__(self, folder: Path, replicas: int = 2, sentinels: int = 3, ports: Optional[List[int]] = None,
                 down_after: int = 2000) -> None:
        """`ports`: 1 + replicas + sentinels fixed ports (primary, replicas, sentinels); free
        ones otherwise. Nothing starts before `start()` (or `with`)."""
        self.folder = folder
        count = 1 + replicas + sentinels
        chosen = list(ports) if ports is not None else [free_port() for _ in range(count)]
        assert len(chosen) == count, f"{count} ports needed"
        self.primary_port = chosen[0]
        self.replica_ports = chosen[1:1 + replicas]
        self.sentinel_ports = chosen[1 + replicas:]
        self.down_after = down_after
        self.processes: Dict[str, subprocess.Popen] = {}

    def ports(self) -> List[Tuple[str, int]]:
        """Every port this listens on, with what listens there."""
        return ([("Redis primary", self.primary_port)]
                + [(f"Redis replica {i + 1}", p) for i, p in enumerate(self.replica_ports)]
                + [(f"Redis sentinel {i + 1}", p) for i, p in enumerate(self.sentinel_ports)])

    @property
    def url(self) -> str:
        """canvasd's `--session-store` for these sentinels."""
        return "redis-sentinel://" + ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports) + f"/{MASTER}"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._server("primary", self.primary_port, [])
        for index, port in enumerate(self.replica_ports):
            self._server(f"replica{index}", port, ["--replicaof", "127.0.0.1", str(self.primary_port)])
        for index, port in enumerate(self.sentinel_ports):
            config = self.folder / f"sentinel{index}.conf"
            config.write_text(f"port {port}\nbind 127.0.0.1\ndir {self.folder}\n"
                              f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
                              f"sentinel down-after-milliseconds {MASTER} {self.down_after}\n"
                              f"sentinel failover-timeout {MASTER} 2000\n"
                              f"sentinel parallel-syncs {MASTER} 1\n")
            with open(self.folder / f"sentinel{index}.log", "ab") as log:
                self.processes[f"sentinel{index}"] = subprocess.Popen(["redis-server", str(config), "--sentinel"],
                                                                      stdout=log, stderr=subprocess.STDOUT)
            wait_for_port(port, self.processes[f"sentinel{index}"], f"redis-server --sentinel ({index})")
        self.wait(lambda: all(self.link_up(port) for port in self.replica_ports), "the replicas' links to the primary")
        self.wait(lambda: all(len(self.sentinel(i).sentinel_slaves(MASTER)) == len(self.replica_ports)
                              for i in range(len(self.sentinel_ports))), "every sentinel to know every replica")

    def _server(self, name: str, port: int, arguments: List[str]) -> None:
        with open(self.folder / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--repl-diskless-sync-delay", "0", "--dir", str(self.folder), *arguments], stdout=log, stderr=subprocess.STDOUT)
        wait_for_port(port, self.processes[name], f"redis-server ({name})")

    def sentinel(self, index: int) -> redis.Redis:
        return redis.Redis(port=self.sentinel_ports[index], socket_timeout=2)

    @staticmethod
    def link_up(port: int) -> bool:
        """Whether the replica on `port` is linked to its primary and in step."""
        try:
            return redis.Redis(port=port, socket_timeout=1).info("replication").get("master_link_status") == "up"
        except redis.RedisError:
            return False

    def primary_named(self) -> Optional[int]:
        """The primary's port, as the first sentinel names it now."""
        try:
            _, port = self.sentinel(0).sentinel_get_master_addr_by_name(MASTER)
            return int(port)
        except (redis.RedisError, TypeError):
            return None

    def process_on(self, port: int) -> str:
        names = {self.primary_port: "primary", **{p: f"replica{i}" for i, p in enumerate(self.replica_ports)}}
        return names[port]

    def kill_primary(self) -> int:
        """SIGKILL to the node the sentinels name primary now; its port."""
        port = self.primary_named()
        assert port is not None, "no sentinel names a primary"
        self.signal(self.process_on(port), signal.SIGKILL)
        return port

    def signal(self, name: str, number: int) -> None:
        os.kill(self.processes[name].pid, number)

    @staticmethod
    def wait(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout} s for {what}")
            time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    os.kill(process.pid, signal.SIGCONT)   # a paused one dies too
                except ProcessLookupError:
                    pass
                process.kill()
                process.wait(timeout=5)
