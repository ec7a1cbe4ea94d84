#!/usr/bin/env python3
"""Redis, several canvasd instances and HAProxy on loopback: `make cluster`, and the cluster
tests and benchmark, which import `Cluster` from here.

    scripts/cluster.py [--instances 3] [--documents documents] [--canvasd .build/debug/canvasd]
                       [--ports 6500] [--demo-port 8590] [--glusterfs] [--sentinel]

checks every port it needs before it starts anything (every port in use is named at once, with
the make variable that moves it), prints the addresses (with --demo-port also serving the demo page,
which reaches the instances through HAProxy's ws:// frontend), and stops everything on Ctrl-C
(SIGINT) or SIGTERM. Its logs are in a temporary folder that is removed when it stops, unless
something failed: then the folder stays, and the last lines say where.

With --glusterfs the instances share no local folder: a GlusterFS volume is made on this machine
(scripts/glusterfs.py, its bricks in the temporary folder) and each instance serves its own
mount of it, as instances on separate machines would; the volume starts with the sample
notes.pdf and is deleted, with what was saved in it, when everything stops.

With --sentinel the session store is a Redis primary, two replicas and three sentinels
(scripts/redis_sentinel.py), the instances find the primary through the sentinels and count a
change once a replica has it (`--session-store-replicas 1`): kill the primary (its pid is
printed) and Sentinel promotes a replica, which the instances follow.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
HAPROXY_CONFIG = ROOT / "deploy" / "haproxy.cfg"
# The ws:// frontend for browsers, loaded beside haproxy.cfg (its health checks are tracked).
HAPROXY_WS_CONFIG = ROOT / "deploy" / "haproxy-ws.cfg"
# haproxy.cfg names three instances; fewer are run by giving the rest a port nobody serves,
# which its health check then keeps out.
CONFIG_INSTANCES = 3
# With --ports BASE: HAProxy's requests, events and ws:// ports and Redis's are BASE to BASE+3
# (with --sentinel, Redis's primary, replicas and sentinels are BASE+3 to BASE+8), and instance
# N's five ports start at BASE + 10 N; the block is PORT_BLOCK ports long.
PORT_BLOCK = 10 * (CONFIG_INSTANCES + 1)


# Every port free_port has handed out in this process. The kernel gives a port just probed
# and closed to the next probe as readily as any other (here about one cluster's worth of
# picks in 270 had a duplicate), and two servers given one port make the second fail to bind
# while a check that only connects finds the first one listening there.
_HANDED_OUT: set = set()


def free_port() -> int:
    """A loopback port nothing listens on now, and never one this process handed out before."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def _listening_inodes(port: int) -> set:
    """The socket inodes listening on `port` (TCP, IPv4 or IPv6), from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is ADDRESS:PORT in hex; state 0A is LISTEN.
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _family(pid: int) -> List[int]:
    """The process and its descendants (HAProxy's listeners may be a worker's)."""
    children: Dict[int, List[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    family, index = [pid], 0
    while index < len(family):
        family.extend(children.get(family[index], []))
        index += 1
    return family


def listens(process: subprocess.Popen, port: int) -> bool:
    """Whether `process` (or a child of it) is the one listening on `port`, not merely someone."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in _family(process.pid):
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"/proc/{pid}/fd/{descriptor}") in wanted:
                    return True
            except OSError:
                continue
    return False


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 10.0) -> None:
    """Waits until `process` itself listens on `port`."""
    wait_for_ports([port], process, what, timeout)


def wait_for_ports(ports: List[int], process: subprocess.Popen, what: str, timeout: float = 10.0) -> None:
    """Waits until `process` itself listens on every one of `ports`. A connection alone is not
    enough: with a port taken by another server, it succeeds while `process` dies of "Address
    already in use", and whoever uses the port then talks to the wrong server (to a ZeroMQ
    request, no reply at all). Every port, since a server that binds several dies at the first
    one taken, after listening on the ones before it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}")
        if all(listens(process, port) for port in ports):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on ports {ports} within {timeout}s")


class Instance:
    def __init__(self, number: int, requests: int, events: int, ws_requests: int, ws_events: int, health: int):
        self.number = number
        # Its --health-endpoint port: /livez, /readyz (HAProxy's check) and /metrics.
        self.health = health
        self.name = f"canvasd{number}"
        self.requests = requests
        self.events = events
        # Its --web-endpoint and --web-events ports, which HAProxy's ws:// frontend reaches.
        self.ws_requests = ws_requests
        self.ws_events = ws_events
        self.process: Optional[subprocess.Popen] = None
        # Its own document folder (its mount of a shared volume), instead of the cluster's.
        self.documents: Optional[Path] = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Started:
    """Started on `with` and stopped on leaving it; a start that fails stops what it started."""

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Cluster(Started):
    """Starts everything in `start()`; `stop()` ends every process it started, whatever state
    they are in. Used as a context manager by the tests, so a failing test leaves none behind."""

    def __init__(self, canvasd: Path, documents: Path, folder: Path, instances: int = 3,
                 session_store: bool = True, idle_timeout: int = 600, log_level: str = "notice", extra: List[str] = (),
                 base_port: Optional[int] = None, sentinel: bool = False):
        """``base_port``: fixed ports from there on (see PORT_BLOCK), as `make cluster` gives
        them so that its addresses stay the same from run to run; free ports otherwise.
        ``sentinel``: the session store is a primary, two replicas and three sentinels."""
        assert 1 <= instances <= CONFIG_INSTANCES
        self.canvasd = canvasd
        self.documents = documents
        self.folder = folder
        self.session_store = session_store
        self.idle_timeout = idle_timeout
        self.log_level = log_level
        self.extra = list(extra)
        self.fixed_ports = base_port is not None
        if base_port is None:
            self.redis_port = free_port()
            self.requests_port = free_port()
            self.events_port = free_port()
            self.ws_port = free_port()
            self.instances = [Instance(n, free_port(), free_port(), free_port(), free_port(), free_port())
                              for n in range(1, instances + 1)]
        else:
            self.requests_port, self.events_port, self.ws_port, self.redis_port = range(base_port, base_port + 4)
            self.instances = [Instance(n, *range(base_port + 10 * n, base_port + 10 * n + 5)) for n in range(1, instances + 1)]
        self.redis: Optional[subprocess.Popen] = None
        self.haproxy: Optional[subprocess.Popen] = None
        self.sentinel = None
        if sentinel and session_store:
            sys.path.insert(0, str(Path(__file__).parent))
            from redis_sentinel import SentinelRedis
            fixed = list(range(base_port + 3, base_port + 9)) if base_port is not None else None
            self.sentinel = SentinelRedis(folder / "redis", ports=fixed)

    def ports(self) -> List[Tuple[str, int]]:
        """Every port this cluster listens on, with what listens there."""
        named = [("HAProxy requests", self.requests_port), ("HAProxy events", self.events_port),
                 ("HAProxy ws://", self.ws_port)]
        if self.sentinel is not None:
            named += self.sentinel.ports()
        elif self.session_store:
            named.append(("Redis", self.redis_port))
        for instance in self.instances:
            named += [(f"{instance.name} requests", instance.requests), (f"{instance.name} events", instance.events),
                      (f"{instance.name} ws:// requests", instance.ws_requests),
                      (f"{instance.name} ws:// events", instance.ws_events),
                      (f"{instance.name} health", instance.health)]
        return named

    # Addresses a client uses.
    @property
    def endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.requests_port}"

    @property
    def events(self) -> str:
        return f"tcp://127.0.0.1:{self.events_port}"

    # Addresses a web page uses: one HAProxy port, the path choosing requests or events.
    @property
    def web_endpoint(self) -> str:
        return f"ws://127.0.0.1:{self.ws_port}/requests"

    @property
    def web_events(self) -> str:
        return f"ws://127.0.0.1:{self.ws_port}/events"

    @property
    def stats_socket(self) -> Path:
        """HAProxy's statistics socket (`show stat` answers CSV)."""
        return self.folder / "haproxy-stats.sock"

    @property
    def redis_url(self) -> str:
        if self.sentinel is not None:
            return self.sentinel.url
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @staticmethod
    def from_source(endpoint: str, source: str) -> str:
        """The endpoint as reached from a given loopback source address (127.0.0.N): on one
        machine every client is 127.0.0.1, so HAProxy's source hash would put them all on one
        instance; a source address of its own gives each test client its own place on the ring."""
        return f"tcp://{source}:0;{endpoint[len('tcp://'):]}"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.documents.mkdir(parents=True, exist_ok=True)
        if self.sentinel is not None:
            self.sentinel.folder = self.folder / "redis"
            self.sentinel.start()
        elif self.session_store:
            self.start_redis()
        for instance in self.instances:
            self.start_instance(instance)
        environment = dict(os.environ, CANVAS_BIND="127.0.0.1", CANVAS_REQUESTS_PORT=str(self.requests_port),
                           CANVAS_EVENTS_PORT=str(self.events_port), CANVAS_WS_PORT=str(self.ws_port),
                           CANVAS_STATS_SOCKET=str(self.stats_socket))
        for number in range(1, CONFIG_INSTANCES + 1):
            instance = self.instances[number - 1] if number <= len(self.instances) else None
            environment[f"CANVAS{number}_HOST"] = "127.0.0.1"
            environment[f"CANVAS{number}_REQUESTS"] = str(instance.requests if instance else free_port())
            environment[f"CANVAS{number}_EVENTS"] = str(instance.events if instance else free_port())
            environment[f"CANVAS{number}_WS_REQUESTS"] = str(instance.ws_requests if instance else free_port())
            environment[f"CANVAS{number}_WS_EVENTS"] = str(instance.ws_events if instance else free_port())
            environment[f"CANVAS{number}_HEALTH"] = str(instance.health if instance else free_port())
        self.haproxy_environment = environment
        self.start_haproxy()

    def start_haproxy(self) -> None:
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        with open(self.folder / "haproxy.log", "ab") as log:
            self.haproxy = subprocess.Popen([haproxy, "-db", "-f", str(HAPROXY_CONFIG), "-f", str(HAPROXY_WS_CONFIG)],
                                            env=self.haproxy_environment, stdout=log, stderr=subprocess.STDOUT)
        wait_for_port(self.requests_port, self.haproxy, "haproxy")
        wait_for_port(self.events_port, self.haproxy, "haproxy")
        wait_for_port(self.ws_port, self.haproxy, "haproxy")
        # The first health checks pass before anyone is sent to an instance.
        time.sleep(0.8)

    def start_redis(self) -> None:
        """Redis as a store, not a cache: every write appended to its log (AOF) and the log
        flushed to disk once a second (`appendfsync everysec`), so a restart of Redis keeps every
        session, and a crash of the machine loses at most the last second of session changes
        (their documents are on disk anyway). `always` would flush on every write and cost a
        disk flush per acknowledged change; `no` leaves it to the kernel (up to 30 s). The
        compare-and-set of the session store needs one primary: never point instances at
        replicas, or at two primaries."""
        redis = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.redis = subprocess.Popen(
            [redis, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
             "--appendfsync", "everysec", "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.redis_port, self.redis, "redis-server")

    def restart_redis(self, kill: bool = False) -> None:
        """SIGTERM (or, with `kill`, SIGKILL: a crash of Redis, not of the machine) and start
        again on the same port and folder: it reads its append-only log back. Killed, it loses
        nothing acknowledged either: Redis writes its log before it sends the replies of the
        commands in it, and the file outlives the process."""
        if self.redis is not None and self.redis.poll() is None:
            self.redis.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.redis.wait(timeout=10)
        self.start_redis()

    def restart_haproxy(self, kill: bool = True) -> None:
        """SIGKILL (a crash; or SIGTERM) and start again on the same ports: every client's
        connection is cut, and libzmq in the client connects again."""
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.haproxy.wait(timeout=10)
        self.start_haproxy()

    def start_instance(self, instance: Instance) -> None:
        """Starts the instance. Its ports were picked free in advance, and something else on
        the machine may take one before canvasd binds it: before HAProxy knows the ports, the
        instance gets new ones and is started again; after, it is tried again on the same."""
        for attempt in range(5):
            try:
                self._launch(instance)
                return
            except RuntimeError:
                log = (self.folder / f"{instance.name}.log").read_text(errors="replace")
                if attempt == 4 or "Address already in use" not in (log.splitlines() or [""])[-1]:
                    raise
                if self.haproxy is None and not self.fixed_ports:
                    instance.requests, instance.events = free_port(), free_port()
                    instance.ws_requests, instance.ws_events, instance.health = free_port(), free_port(), free_port()
                time.sleep(0.5)

    def _launch(self, instance: Instance) -> None:
        arguments = [str(self.canvasd), "--endpoint", f"tcp://127.0.0.1:{instance.requests}",
                     "--events", f"tcp://127.0.0.1:{instance.events}", "--documents", str(instance.documents or self.documents),
                     "--web-endpoint", f"ws://127.0.0.1:{instance.ws_requests}",
                     "--web-events", f"ws://127.0.0.1:{instance.ws_events}",
                     "--health-endpoint", f"127.0.0.1:{instance.health}",
                     # Every page comes through HAProxy, whose PROXY v2 header names the page's
                     # own address (deploy/haproxy-ws.cfg): the per-address cap counts pages.
                     "--web-proxy", "127.0.0.1",
                     "--idle-timeout", str(self.idle_timeout), "--log-level", self.log_level, *self.extra]
        if self.session_store:
            arguments += ["--session-store", self.redis_url, "--instance", instance.name]
        if self.sentinel is not None:
            arguments += ["--session-store-replicas", "1"]
        with open(self.folder / f"{instance.name}.log", "ab") as log:
            instance.process = subprocess.Popen(arguments, stdout=log, stderr=subprocess.STDOUT)
        # Its health port opens once it holds its name: started again under the name of one
        # killed a moment ago, it first waits out that one's lease (10 s).
        wait_for_ports([instance.requests, instance.events, instance.ws_requests, instance.ws_events, instance.health],
                       instance.process, instance.name, timeout=25.0)

    def instance(self, name: str) -> Instance:
        return next(i for i in self.instances if i.name == name)

    def kill(self, instance: Instance) -> None:
        """SIGKILL: no goodbye, as a crash or an OOM kill would do it."""
        if instance.alive:
            instance.process.kill()
            instance.process.wait()

    def stop(self) -> None:
        processes = [self.haproxy, *(i.process for i in self.instances), self.redis]
        for process in processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            if process is None:
                continue
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.sentinel is not None:
            self.sentinel.stop()

    def describe(self) -> str:
        lines = [f"requests  {self.endpoint}   (HAProxy, ZMTP)", f"events    {self.events}   (HAProxy, ZMTP)",
                 f"web       {self.web_endpoint} and {self.web_events}   (HAProxy, ws:// for browsers)"]
        if self.sentinel is not None:
            lines.append(f"redis     {self.redis_url} (primary pid {self.sentinel.processes['primary'].pid} on port "
                         f"{self.sentinel.primary_port}, replicas on {self.sentinel.replica_ports}; each change on one replica)")
        elif self.session_store:
            lines.append(f"redis     {self.redis_url}")
        for instance in self.instances:
            lines.append(f"{instance.name:9} tcp://127.0.0.1:{instance.requests} (requests), "
                         f"tcp://127.0.0.1:{instance.events} (events), ws://127.0.0.1:{instance.ws_requests} "
                         f"and ws://127.0.0.1:{instance.ws_events} (web), http://127.0.0.1:{instance.health}/metrics "
                         f"(/livez, /readyz), pid {instance.process.pid}"
                         + (f", documents {instance.documents}" if instance.documents else ""))
        lines.append(f"haproxy   {self.stats_socket} (statistics: echo 'show stat' | socat stdio UNIX-CONNECT:PATH)")
        if not any(instance.documents for instance in self.instances):
            lines.append(f"documents {self.documents}")
        lines.append(f"logs      {self.folder}")
        return "\n".join(lines)


def in_use(port: int) -> Optional[str]:
    """Why `port` cannot be bound on loopback now (bound as the servers bind it, with
    SO_REUSEADDR, then let go), or None when it can."""
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("127.0.0.1", port))
    except OSError as error:
        return f"{error.strerror}, errno {error.errno}"
    finally:
        probe.close()
    return None


def every_clash(ports: List[Tuple[str, int, str, str]]) -> Optional[str]:
    """Every one of `ports` ((what, port, make variable, its value moved)) in use, in one
    message naming the variables that move them, or None."""
    clashes = [(what, port, variable, moved, cause) for what, port, variable, moved in ports
               for cause in [in_use(port)] if cause]
    if not clashes:
        return None
    if len(clashes) == 1:
        what, port, variable, moved, cause = clashes[0]
        return (f"{what}: port {port} is in use ({cause}). Stop what holds it (`ss -ltnp 'sport = :{port}'` shows it), "
                f"or move it: make cluster {variable}={moved}")
    lines = [f"{len(clashes)} ports are in use; nothing was started:"]
    lines += [f"  {what}: port {port} is in use ({cause})" for what, port, _, _, cause in clashes]
    holders = " or ".join(f"sport = :{port}" for _, port, _, _, _ in clashes)
    moves = " ".join(dict.fromkeys(f"{variable}={moved}" for _, _, variable, moved, _ in clashes))
    lines.append(f"Stop what holds them (`ss -ltnp '{holders}'` shows it), or move them: make cluster {moves}")
    return "\n".join(lines)


def shared_volume(cluster: Cluster):
    """A GlusterFS volume for the run, mounted once per instance (`--glusterfs`), with the
    sample notes.pdf in its `documents` folder; each instance's documents are that folder
    through its own mount."""
    sys.path.insert(0, str(Path(__file__).parent))
    import glusterfs

    volume = glusterfs.Volume.create(cluster.folder / "glusterfs")
    try:
        for instance in cluster.instances:
            instance.documents = volume.mount(cluster.folder / "mounts" / instance.name) / "documents"
        cluster.instances[0].documents.mkdir(exist_ok=True)
        shutil.copy(ROOT / "samples" / "notes.pdf", cluster.instances[0].documents / "notes.pdf")
    except BaseException:
        volume.destroy()
        raise
    print(f"documents on GlusterFS volume {volume.name} (replica {len(volume.bricks)}, bricks in "
          f"{cluster.folder / 'glusterfs'}), one mount per instance; deleted when this stops", flush=True)
    return volume


def main() -> int:
    parser = argparse.ArgumentParser(description="Redis, canvasd instances and HAProxy on loopback.")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--documents", default="documents")
    parser.add_argument("--canvasd", default=str(ROOT / ".build" / "debug" / "canvasd"))
    parser.add_argument("--no-session-store", action="store_true", help="instances keep sessions to themselves")
    parser.add_argument("--ports", type=int, default=None,
                        help=f"the first of {PORT_BLOCK} loopback ports to listen on (make cluster's CLUSTER_PORTS); "
                             "free ones otherwise")
    parser.add_argument("--demo-port", type=int, default=None,
                        help="serve the demo page on this loopback port (make cluster's CLUSTER_DEMO_PORT)")
    parser.add_argument("--glusterfs", action="store_true",
                        help="each instance on its own mount of a GlusterFS volume made for the run (make cluster GLUSTERFS=1)")
    parser.add_argument("--sentinel", action="store_true",
                        help="Redis with a primary, two replicas and three sentinels (make cluster SENTINEL=1)")
    options = parser.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    # Made below, once every port is known to be free: a clash leaves nothing behind.
    cluster = Cluster(Path(options.canvasd), Path(options.documents).resolve(), Path("/nonexistent"), options.instances,
                      session_store=not options.no_session_store, base_port=options.ports, sentinel=options.sentinel)
    wanted = [(what, port, "CLUSTER_PORTS", str(options.ports + 100)) for what, port in cluster.ports()] \
        if options.ports is not None else []
    if options.demo_port is not None:
        wanted.append(("the demo page", options.demo_port, "CLUSTER_DEMO_PORT", str(options.demo_port + 100)))
    clash = every_clash(wanted)
    if clash:
        print(clash, file=sys.stderr, flush=True)
        return 2
    cluster.folder = Path(tempfile.mkdtemp(prefix="canvas-cluster-"))
    failed: Optional[str] = None
    demo = None
    volume = None
    try:
        if options.glusterfs:
            volume = shared_volume(cluster)
        with cluster:
            if options.demo_port is not None:
                demo = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "web-server.py"), "--port", str(options.demo_port),
                                         "--web-endpoint", cluster.web_endpoint, "--web-events", cluster.web_events,
                                         "--moved-by", "make cluster CLUSTER_DEMO_PORT"])
                try:
                    wait_for_port(options.demo_port, demo, "the demo page's server")
                except RuntimeError as error:
                    # Taken since the check: its server said which port; nothing runs without it.
                    failed = str(error)
                    return 2
            print(cluster.describe(), flush=True)
            print("Ctrl-C stops them all, and removes the logs' folder (kept if something failed).", flush=True)
            try:
                while not stop:
                    for instance in cluster.instances:
                        if instance.process is not None and instance.process.poll() is not None:
                            print(f"{instance.name} exited with status {instance.process.returncode}; "
                                  f"HAProxy sends its clients elsewhere", flush=True)
                            failed = failed or f"{instance.name} exited with status {instance.process.returncode}"
                            instance.process = None
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            # A second Ctrl-C must not cut the stopping short and leave processes behind.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            print("stopping", flush=True)
    except KeyboardInterrupt:
        # Ctrl-C while starting: what had started is stopped (Cluster.__enter__).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except Exception as error:
        failed = str(error)
        print(f"could not start: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        if demo is not None and demo.poll() is None:
            demo.terminate()
            demo.wait(timeout=5)
        if volume is not None:
            volume.destroy()
        if failed:
            print(f"logs kept in {cluster.folder} ({failed}); remove it when done", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(cluster.folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
