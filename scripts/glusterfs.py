"""A replicated GlusterFS volume on this machine, mounted several times through FUSE as several
machines would mount it: for the tests of documents on a network file system
(clients/python/tests/test_glusterfs.py), `make bench-glusterfs` and `make cluster GLUSTERFS=1`.

    with Volume.create(folder) as volume:        # bricks under folder/bricks, replica 3
        a = volume.mount(folder / "a")           # the options docs/operations.md gives
        b = volume.mount(folder / "b")
        ...

glusterd is started when it is not running (it stays running afterwards, as a system daemon
would). Mounting and glusterd need root: this runs the commands through `sudo -n` when it is
not root. `python3 scripts/glusterfs.py check` says whether this machine can do all this.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import List, Optional

# The mount options and volume options under which several canvasd may share a folder: nothing
# the client caches outlives the request that read it (docs/operations.md, "Documents on a
# network file system"; canvasd refuses a GlusterFS mount without them).
SAFE_MOUNT_OPTIONS = "attribute-timeout=0,entry-timeout=0,negative-timeout=0"
CACHING_OPTIONS = ["stat-prefetch", "quick-read", "open-behind", "io-cache", "read-ahead", "readdir-ahead", "nl-cache"]
PREFIX = "cbtest-"


class GlusterError(RuntimeError):
    pass


def _privileged(command: List[str]) -> List[str]:
    return command if os.geteuid() == 0 else ["sudo", "-n", *command]


def _run(command: List[str], what: str, timeout: float = 120) -> str:
    result = subprocess.run(_privileged(command), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise GlusterError(f"{what}: `{' '.join(command)}` exited {result.returncode}: "
                           f"{(result.stderr or result.stdout).strip()}")
    return result.stdout


def _gluster(*arguments: str, what: str) -> str:
    """A `gluster` command, without its questions (`--mode=script`); its output."""
    return _run(["gluster", "--mode=script", *arguments], what)


def _try_gluster(*arguments: str) -> subprocess.CompletedProcess:
    """A `gluster` command whose failure the caller looks at, or may ignore."""
    return subprocess.run(_privileged(["gluster", "--mode=script", *arguments]), capture_output=True, text=True, timeout=120)


def _delete(name: str) -> None:
    """Stops and deletes volume `name`, whatever state it is in; failures are ignored (it may
    be stopped or gone already)."""
    _try_gluster("volume", "stop", name, "force")
    _try_gluster("volume", "delete", name)


def missing() -> Optional[str]:
    """Why this machine cannot run a local volume, or None when it can."""
    for program, package in [("glusterd", "glusterfs-server"), ("gluster", "glusterfs-server"),
                             ("mount.glusterfs", "glusterfs-client")]:
        if not shutil.which(program) and not Path("/usr/sbin", program).exists() and not Path("/sbin", program).exists():
            return f"{program} is not installed (Debian's {package}; make system-deps installs it)"
    if not Path("/dev/fuse").exists():
        return "/dev/fuse is missing: FUSE is not available on this machine, so GlusterFS cannot be mounted"
    if os.geteuid() != 0 and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0:
        return "glusterd and mount need root, and `sudo -n` is refused"
    try:
        socket.gethostbyname(host())
    except OSError as error:
        return f"this machine's name {host()!r} does not resolve ({error}); GlusterFS names bricks by host"
    return None


def host() -> str:
    """The name the bricks are given: GlusterFS refuses `localhost` and loopback addresses
    as a brick's host, but takes the machine's own name."""
    return socket.gethostname()


def ensure_glusterd(log: Path = Path("/tmp/canvasbridge-glusterd.log")) -> None:
    """Starts glusterd unless it answers already, and waits until it does."""
    def answers() -> bool:
        return _try_gluster("pool", "list").returncode == 0

    if answers():
        return
    # glusterd forks into the background itself once it is listening.
    _run(["glusterd", f"--log-file={log}"], "start glusterd")
    deadline = time.monotonic() + 30
    while not answers():
        if time.monotonic() > deadline:
            raise GlusterError(f"glusterd did not answer within 30 s (its log: {log})")
        time.sleep(0.2)


class Volume:
    """One volume whose bricks are folders on this machine, and the mounts made of it."""

    def __init__(self, name: str, bricks: List[Path]):
        self.name = name
        self.bricks = bricks
        self.mounts: List[Path] = []

    @classmethod
    def create(cls, folder: Path, replica: int = 3, caching: bool = False, name: Optional[str] = None) -> "Volume":
        """A started volume of `replica` bricks under `folder/bricks`; with `caching`, the
        client-side caches are left as GlusterFS sets them (the unsafe default)."""
        reason = missing()
        if reason:
            raise GlusterError(reason)
        ensure_glusterd()
        forget_leftovers()
        volume = cls(name or PREFIX + uuid.uuid4().hex[:10], [folder / "bricks" / f"b{i}" for i in range(replica)])
        for brick in volume.bricks:
            brick.mkdir(parents=True, exist_ok=True)
        # `force`: bricks on the root file system (GlusterFS advises a partition of their own).
        layout = ["replica", str(replica)] if replica > 1 else []
        _gluster("volume", "create", volume.name, *layout, *[f"{host()}:{brick}" for brick in volume.bricks], "force",
                 what=f"create volume {volume.name}")
        try:
            if not caching:
                for option in CACHING_OPTIONS:
                    _gluster("volume", "set", volume.name, f"performance.{option}", "off", what=f"turn {option} off on {volume.name}")
            _gluster("volume", "start", volume.name, what=f"start volume {volume.name}")
            volume.wait_for_bricks()
        except BaseException:
            volume.destroy()
            raise
        return volume

    def __enter__(self) -> "Volume":
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def mount(self, path: Path, options: Optional[str] = SAFE_MOUNT_OPTIONS) -> Path:
        """Mounts the volume at `path` (made if missing), as another machine would: its own
        glusterfs client process. `options=None`: GlusterFS's defaults."""
        path.mkdir(parents=True, exist_ok=True)
        command = ["mount", "-t", "glusterfs", *(["-o", options] if options else []), f"{host()}:/{self.name}", str(path)]
        _run(command, f"mount {self.name} at {path}")
        self.mounts.append(path)
        return path

    def unmount(self, path: Path) -> None:
        subprocess.run(_privileged(["umount", "-l", str(path)]), capture_output=True)
        if path in self.mounts:
            self.mounts.remove(path)

    def status(self) -> List[dict]:
        """Each brick's path, whether it is online and its process id."""
        out = _gluster("volume", "status", self.name, "--xml", what=f"status of {self.name}")
        bricks = []
        for node in ElementTree.fromstring(out).iter("node"):
            path = node.findtext("path") or ""
            if not path.startswith("/"):
                continue   # the self-heal daemon's row
            bricks.append({"path": path, "online": node.findtext("status") == "1",
                           "pid": int(node.findtext("pid") or "0")})
        return bricks

    def wait_for_bricks(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            bricks = self.status()
            if len(bricks) == len(self.bricks) and all(brick["online"] for brick in bricks):
                return
            if time.monotonic() > deadline:
                raise GlusterError(f"bricks of {self.name} not online after {timeout} s: {bricks}")
            time.sleep(0.3)

    def kill_brick(self, index: int) -> int:
        """SIGKILL to brick `index`'s process, as a server that fails; its pid."""
        path = str(self.bricks[index])
        pid = next(brick["pid"] for brick in self.status() if brick["path"] == path)
        _run(["kill", "-KILL", str(pid)], f"kill brick {path}")
        # Until the process is gone and glusterd has seen it go, `volume start force` takes the
        # brick for running and leaves it down (seen: a start 0.3 s after the kill).
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() or any(brick["online"] for brick in self.status() if brick["path"] == path):
            if time.monotonic() > deadline:
                raise GlusterError(f"brick {path} (pid {pid}) still up 30 s after SIGKILL")
            time.sleep(0.1)
        return pid

    def restart_bricks(self) -> None:
        """Starts the bricks that are down (`volume start … force`) and waits until they are up."""
        _gluster("volume", "start", self.name, "force", what=f"restart bricks of {self.name}")
        self.wait_for_bricks()

    def unhealed(self) -> int:
        """How many entries the replicas still have to copy to each other."""
        out = _gluster("volume", "heal", self.name, "info", what=f"heal info of {self.name}")
        return sum(int(count) for count in re.findall(r"Number of entries:\s*(\d+)", out))

    def heal(self, timeout: float = 120) -> None:
        """Asks for a heal and waits until nothing is left to heal."""
        _try_gluster("volume", "heal", self.name)   # refused while a heal runs already: waited for below
        deadline = time.monotonic() + timeout
        while self.unhealed():
            if time.monotonic() > deadline:
                raise GlusterError(f"{self.name} still has {self.unhealed()} entries to heal after {timeout} s")
            time.sleep(0.5)

    def destroy(self) -> None:
        """Unmounts every mount, stops and deletes the volume, and removes its bricks."""
        for path in list(self.mounts):
            self.unmount(path)
        _delete(self.name)
        for brick in self.bricks:
            subprocess.run(_privileged(["rm", "-rf", str(brick)]), capture_output=True)


def forget_leftovers() -> None:
    """Stops and deletes this script's volumes whose bricks are gone (a run killed before its
    clean-up, its temporary folder since removed), so that they do not pile up in glusterd."""
    out = _try_gluster("volume", "info", "--xml").stdout
    try:
        root = ElementTree.fromstring(out)
    except ElementTree.ParseError:
        return
    for volume in root.iter("volume"):
        name = volume.findtext("name") or ""
        bricks = [brick.text.split(":", 1)[1] for brick in volume.iter("brick") if brick.text and ":" in brick.text]
        if name.startswith(PREFIX) and bricks and not any(Path(path).exists() for path in bricks):
            _delete(name)


def main() -> int:
    if sys.argv[1:] == ["check"]:
        reason = missing()
        print(reason or "GlusterFS can run here")
        return 1 if reason else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
