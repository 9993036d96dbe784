"""A private systemd for end-to-end tests, on a machine whose PID 1 is not systemd.

systemd runs as PID 1 of new pid, mount, uts and cgroup namespaces, limited to stub targets and
journald (see SYSTEMD-TESTING.md in the shared notes). Inside it the host's files are visible, except:
/run, /tmp, /var/tmp and /etc/systemd/system are private tmpfs, /etc is an overlay whose changes
land in the harness's directory, and /run/log (the journal) is a directory of the harness's.
With ``traversable_root``, /root is an overlay with mode 0711, so that other users can reach a
Python installed under /root (as this kind of machine's pyenv is) like one in /usr or /opt. So
``systemctl``, ``journalctl`` and installers run through :meth:`PrivateSystemd.run` exactly as on a
real host, while the host's own /etc, /run and /tmp stay untouched. The network is shared.

Teardown SIGKILLs the namespace's init (every process of the namespace dies with it), waits for
its cgroups to empty, removes them, and :meth:`PrivateSystemd.leftovers` names anything left.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from mysqlq_harness.lifecycle import StartStop, unshare_init
from mysqlq_harness.waiting import wait_for

SYSTEMD = Path("/lib/systemd/systemd")
SYSTEM_UNITS = Path("/lib/systemd/system")
CGROUP_V2 = Path("/sys/fs/cgroup/unified")
CGROUP_V1 = Path("/sys/fs/cgroup/systemd")
PREFIX = "mysqlq-systemd-"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STUB_TARGETS = ("sysinit", "basic", "sockets", "timers", "paths", "slices", "local-fs", "network",
                "network-online", "multi-user", "shutdown")
JOURNALD_UNITS = ("systemd-journald.service", "systemd-journald.socket", "systemd-journald-dev-log.socket")
UNITS = "/run/private-systemd/units"

# Runs as PID 1 of the new namespaces, then becomes systemd. $1 is the harness directory.
STAGE2 = f"""\
set -eu
base=$1
mount -t tmpfs tmpfs /run
# Shared, as systemd makes every mount on a host it boots (not in a container, which this looks
# like): a unit's credentials are mounted in a namespace of their own, then moved into /run.
mount --make-shared /run
mkdir -p /run/log /run/systemd/system {UNITS}
mount --bind "$base/log" /run/log
mount --bind "$base/units" {UNITS}
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$base/etc/upper,workdir=$base/etc/work" /etc
if [ -d "$base/root/upper" ]; then
  mount -t overlay overlay -o "lowerdir=/root,upperdir=$base/root/upper,workdir=$base/root/work" /root
fi
mount -t tmpfs tmpfs /etc/systemd/system
mount --bind "$base/console" /dev/console
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# Paths under /tmp or /var/tmp that must stay visible (the checkout and its venv, when the
# repository itself lives in /tmp, as a CI clone may): held aside, then bound back in place.
shift
n=0
for keep in "$@"; do
  n=$((n + 1)); mkdir -p "/run/keep/$n"; mount --bind "$keep" "/run/keep/$n"
done
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/tmp
n=0
for keep in "$@"; do
  n=$((n + 1)); mkdir -p "$keep"; mount --bind "/run/keep/$n" "$keep"
done
exec env -i PATH={PATH} container=mysqlq-test \\
  SYSTEMD_UNIT_PATH=/etc/systemd/system:/run/systemd/system:{UNITS} \\
  SYSTEMD_GENERATOR_PATH={UNITS}/empty SYSTEMD_ENVIRONMENT_GENERATOR_PATH={UNITS}/empty \\
  SYSTEMD_PROC_CMDLINE=systemd.unit=T.target \\
  {SYSTEMD} --system --unit=T.target --log-target=journal --show-status=no
"""


class SystemdError(RuntimeError):
    """The private systemd could not be started or did not do what was asked."""


def missing_prerequisites() -> str | None:
    """Why a private systemd cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root (namespaces, cgroups, mounts)"
    for tool in ("unshare", "nsenter", "setpriv", "systemctl", "journalctl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not SYSTEMD.exists() or not (SYSTEM_UNITS / JOURNALD_UNITS[0]).exists():
        return f"{SYSTEMD} or its journald units are missing"
    for hierarchy in (CGROUP_V2, CGROUP_V1):
        if not os.access(hierarchy, os.W_OK):
            return f"{hierarchy} is not a writable cgroup hierarchy"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


class PrivateSystemd(StartStop):
    """systemd as PID 1 of private namespaces, driven with ``systemctl`` through ``nsenter``."""

    def __init__(self, base: Path, *, traversable_root: bool = False) -> None:
        self.base = base.resolve()
        self.traversable_root = traversable_root
        self.name = f"{PREFIX}{os.getpid()}-{self.base.name}"
        self.cgroups = (CGROUP_V2 / self.name, CGROUP_V1 / self.name)
        self.journal_dir = self.base / "log" / "journal"
        self.init_pid = 0
        self.pid_namespace: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 30) -> None:
        _remove_stale_cgroups()
        self._prepare()
        for cgroup in self.cgroups:
            cgroup.mkdir()
        enter = 'echo $$ > "$1/cgroup.procs" && echo $$ > "$2/cgroup.procs" && shift 2 && exec "$@"'
        unshare = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--cgroup",
                   "--propagation", "private", "--mount-proc", "sh", "-c", STAGE2, "stage2", str(self.base),
                   *self._kept_paths()]
        with (self.base / "namespace.log").open("wb") as log:
            self._proc = subprocess.Popen(
                ["setpriv", "--pdeathsig", "KILL", "--", "sh", "-c", enter, "enter", *map(str, self.cgroups),
                 *unshare],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        self.init_pid = wait_for(self._child_of_unshare, "the namespace's init process", timeout)
        self.pid_namespace = _pid_ns(self.init_pid)
        wait_for(self._running, "systemctl is-system-running to say running", timeout, interval=0.1)

    def _prepare(self) -> None:
        units = self.base / "units"
        for folder in (units / "empty", self.base / "log", self.base / "etc" / "upper", self.base / "etc" / "work"):
            folder.mkdir(parents=True, exist_ok=True)
        (self.base / "console").touch()
        if self.traversable_root:
            (self.base / "root" / "work").mkdir(parents=True, exist_ok=True)
            (self.base / "root" / "upper").mkdir(mode=0o711, exist_ok=True)
            os.chmod(self.base / "root" / "upper", 0o711)
        stub = "[Unit]\nDescription=stub {}\nDefaultDependencies=no\n"
        for target in STUB_TARGETS:
            (units / f"{target}.target").write_text(stub.format(target))
        (units / "T.target").write_text(
            stub.format("T") + "Wants=" + " ".join(JOURNALD_UNITS) + "\nAfter=" + " ".join(JOURNALD_UNITS) + "\n"
        )
        for unit in JOURNALD_UNITS:
            text = (SYSTEM_UNITS / unit).read_text()
            (units / unit).write_text(text.replace(" systemd-journald-audit.socket", ""))

    @staticmethod
    def _kept_paths() -> list[str]:
        """The checkout and the running venv, when they live where the namespace mounts a tmpfs."""
        # Where mysqlq's code is (a checkout, for an editable install), found without importing it.
        spec = importlib.util.find_spec("mysqlq")
        code = Path(spec.origin).resolve().parent if spec and spec.origin else Path(__file__).resolve()
        checkout = code.parent
        kept: list[str] = []
        for path in (checkout, Path(sys.prefix).resolve()):
            inside = any(path.is_relative_to(tmp) for tmp in (Path("/tmp"), Path("/var/tmp")))
            if inside and not any(path.is_relative_to(k) for k in kept):
                kept.append(str(path))
        return kept

    def _child_of_unshare(self) -> int:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise SystemdError(f"unshare exited with {self._proc.returncode}: {self.log_tail()}")
        return unshare_init(self._proc)  # the enter shell execs unshare

    def _running(self) -> bool:
        result = self.run("systemctl", "is-system-running", check=False)
        state = result.stdout.strip()
        if state in ("degraded", "maintenance", "stopping", "offline"):
            raise SystemdError(f"the private systemd is {state}: {self.run('systemctl', '--failed').stdout}")
        return state == "running"

    def log_tail(self) -> str:
        try:
            return (self.base / "namespace.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30) -> None:
        """Kill everything in the namespace and remove its cgroups."""
        if self.init_pid > 1 and _pid_ns(self.init_pid) == self.pid_namespace:
            os.kill(self.init_pid, signal.SIGKILL)
        if self._proc is not None:
            if self._proc.poll() is None and not self.init_pid:
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout)
        wait_for(lambda: not self._namespace_processes(), "the namespace's processes to exit", timeout)
        for cgroup in self.cgroups:
            if cgroup.exists():
                wait_for(functools.partial(_cgroup_empty, cgroup), f"{cgroup} to empty", timeout)
                _remove_cgroup(cgroup)

    # ------------------------------------------------------------------ inspection

    def leftovers(self) -> list[str]:
        """Processes, cgroups and mounts of this harness still present on the host."""
        found = [f"process {pid}" for pid in self._namespace_processes()]
        found += [f"cgroup {cgroup}" for cgroup in self.cgroups if cgroup.exists()]
        with open("/proc/self/mountinfo", encoding="utf-8") as mounts:
            found += [f"mount {line.split()[4]}" for line in mounts if str(self.base) in line]
        return found

    def _namespace_processes(self) -> list[int]:
        if self.pid_namespace is None:
            return []
        return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _pid_ns(pid) == self.pid_namespace]

    # ------------------------------------------------------------------ driving it

    def run(self, *argv: str, check: bool = True, input: str | None = None, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command inside the namespaces (absolute paths: the working directory is /)."""
        if not self.init_pid:
            raise SystemdError("the private systemd is not running")
        environment = {"PATH": PATH, "LANG": "C.UTF-8", "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0", **(env or {})}
        result = subprocess.run(
            ["nsenter", "-t", str(self.init_pid), "-m", "-p", "-u", "--wd=/", "--", *argv],
            input=input, capture_output=True, text=True, timeout=timeout, env=environment, check=False,
        )
        if check and result.returncode != 0:
            raise SystemdError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
        return result

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("systemctl", "--no-pager", *args, check=check)

    def write(self, path: str, text: str) -> None:
        """Write a file as seen inside the namespaces (e.g. under /etc)."""
        self.run("sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "write", path, input=text)

    def show(self, unit: str, *properties: str) -> dict[str, str]:
        result = self.systemctl("show", unit, *(f"--property={name}" for name in properties))
        return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)

    def main_pid(self, unit: str) -> int:
        """The unit's MainPID as seen inside the namespace; 0 when it has none."""
        return int(self.show(unit, "MainPID")["MainPID"] or 0)

    def kill_main(self, unit: str, sig: str) -> int:
        """Send ``sig`` to the unit's main process (never to pid 0 or 1); returns that pid."""
        pid = self.main_pid(unit)
        if pid <= 1:
            raise SystemdError(f"{unit} has no main process to signal (MainPID={pid})")
        self.run("kill", f"-{sig}", str(pid))
        return pid

    def journal(self, *args: str) -> list[dict[str, str]]:
        """Journal entries as JSON objects (journalctl inside the namespaces)."""
        out = self.run("journalctl", "--no-pager", "-o", "json", *args, check=False).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _cgroup_empty(cgroup: Path) -> bool:
    return not _cgroup_processes(cgroup)


def _cgroup_processes(cgroup: Path) -> list[str]:
    pids: list[str] = []
    for procs in cgroup.rglob("cgroup.procs"):
        try:
            pids += procs.read_text().split()
        except OSError:
            continue
    return pids


def _remove_cgroup(cgroup: Path) -> None:
    for folder in sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        folder.rmdir()
    cgroup.rmdir()


def _remove_stale_cgroups() -> None:
    """Remove empty cgroups of harnesses whose test process died without tearing down."""
    for hierarchy in (CGROUP_V2, CGROUP_V1):
        for cgroup in hierarchy.glob(f"{PREFIX}*"):
            owner = cgroup.name[len(PREFIX):].split("-", 1)[0]
            if owner.isdigit() and not _alive(int(owner)) and not _cgroup_processes(cgroup):
                _remove_cgroup(cgroup)
