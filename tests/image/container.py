"""The built image, run as Kubernetes runs it: by runc (containerd's runtime), from the image's own
filesystem and configuration (entrypoint, command, environment, user), with the root filesystem
read-only but for a tmpfs on /tmp (the emptyDir a pod mounts there), no capabilities, and the
entrypoint as PID 1 of its own PID namespace. Only the network is the host's: the tests' Redis
and Slack emulator listen on its loopback.

runc rather than `buildah run`: buildah cannot make the root read-only, and its chroot isolation
gives no PID namespace, so neither PID 1 nor the stop a kubelet sends would be what production has.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
# buildah on the store `make image` builds into.
BUILDAH = str(REPO / "deploy" / "image" / "buildah")
CAPABILITY_SETS = ("bounding", "effective", "inheritable", "permitted", "ambient")


def runc() -> str:
    path = shutil.which("runc")
    if path is None:
        pytest.fail("runc is not installed (make image installs it)")
    return path


def _run(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(command)}: {done.stderr}"
    return done.stdout.strip()


@dataclass(frozen=True)
class Image:
    name: str
    rootfs: Path
    config: dict[str, Any]  # the OCI image configuration: User, Env, Entrypoint, Cmd, …

    @property
    def env(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env", []))

    @property
    def user(self) -> tuple[int, int]:
        """The image's USER as numbers; ValueError if it names a user instead."""
        uid, _, gid = self.config["User"].partition(":")
        return int(uid), int(gid or uid)


@contextmanager
def mounted(name: str) -> Iterator[Image]:
    """The image `name` from buildah's store, its filesystem in a working container (removed
    afterwards)."""
    container = f"queuepilot-image-test-{os.getpid()}"
    _run(BUILDAH, "from", "--pull=never", "--quiet", "--name", container, name)
    try:
        rootfs = Path(_run(BUILDAH, "mount", container))
        config = json.loads(_run(BUILDAH, "inspect", "--type", "image", name))["OCIv1"]["config"]
        yield Image(name, rootfs, config)
    finally:
        _run(BUILDAH, "rm", container)


class Container:
    """One run of the image: `entrypoint` and `command` replace the image's own (a pod's
    `command` and `args`), `env` adds to its environment; the output goes to a file."""

    def __init__(
        self,
        image: Image,
        workdir: Path,
        *,
        entrypoint: Sequence[str] | None = None,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.id = f"queuepilot-{uuid.uuid4().hex[:12]}"
        bundle = workdir / self.id
        bundle.mkdir()
        _run(runc(), "spec", "--bundle", str(bundle))
        spec_file = bundle / "config.json"
        args = [
            *(entrypoint if entrypoint is not None else image.config.get("Entrypoint") or []),
            *(command if command is not None else image.config.get("Cmd") or []),
        ]
        spec = _spec(json.loads(spec_file.read_text()), image, args, {**image.env, **(env or {})})
        spec_file.write_text(json.dumps(spec))
        self.log = bundle / "output.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [runc(), "run", "--bundle", str(bundle), self.id],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        """The exit status, once the process has exited within `timeout` seconds."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s:\n{self.output()}") from None

    def wait_for(self, check: Callable[[], Any], *, what: str, timeout: float = 60.0) -> Any:
        """Poll `check` until it returns something truthy (a refused connection is not yet);
        fail at once, with the output, if the container exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"exited ({self.process.returncode}) before {what}:\n{self.output()}"
                )
            with suppress(httpx.TransportError):
                if result := check():
                    return result
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}:\n{self.output()}")

    def status(self) -> dict[str, str]:
        """/proc/<pid>/status of the container's first process, as the host sees it."""
        pid = json.loads(_run(runc(), "state", self.id))["pid"]
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        return dict(line.split(":\t", 1) for line in lines if ":\t" in line)

    def signal(self, name: str) -> None:
        """What a kubelet's stop does: the runtime signals the container's PID 1."""
        _run(runc(), "kill", self.id, name)

    def remove(self) -> None:
        if self.process.poll() is None:
            subprocess.run([runc(), "kill", self.id, "KILL"], capture_output=True)
            self.process.wait(30)
        subprocess.run([runc(), "delete", "--force", self.id], capture_output=True)

    def __enter__(self) -> Container:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()


def run_once(image: Image, workdir: Path, *, timeout: float = 120.0, **kwargs: Any) -> str:
    """Run the image to its end; its output, asserting it exited 0."""
    with Container(image, workdir, **kwargs) as container:
        status = container.wait(timeout)
        assert status == 0, f"exit status {status}:\n{container.output()}"
        return container.output()


def _spec(
    spec: dict[str, Any], image: Image, args: list[str], env: dict[str, str]
) -> dict[str, Any]:
    """runc's default specification (read-only root, its own PID, mount, IPC and UTS
    namespaces, masked /proc paths), made the image's and a restricted pod's."""
    uid, gid = image.user
    spec["root"] = {"path": str(image.rootfs), "readonly": True}
    spec["process"].update(
        terminal=False,
        args=args,
        env=[f"{name}={value}" for name, value in env.items()],
        cwd=image.config.get("WorkingDir") or "/",
        user={"uid": uid, "gid": gid},
        # A restricted pod drops them all.
        capabilities={kind: [] for kind in CAPABILITY_SETS},
    )
    spec["mounts"].append(
        {
            "destination": "/tmp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777"],
        }
    )
    spec["linux"]["namespaces"] = [
        namespace for namespace in spec["linux"]["namespaces"] if namespace["type"] != "network"
    ]
    return spec
