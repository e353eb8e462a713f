"""Two network namespaces joined by a veth pair, where the kernel's own TCP runs for `pcapq lab`
and the kernel tests.

    with NetnsPair() as net:
        net.sysctl(net.server_ns, "net.core.somaxconn", 16)
        server = net.popen(net.server_ns, [sys.executable, "-c", SERVER_CODE])
        with net.capture(tmp_path / "x.pcap"):
            net.run(net.client_ns, [sys.executable, "-c", CLIENT_CODE])

Client namespace: interface `pq-c`, 10.231.N.1/24. Server namespace: `pq-s`, 10.231.N.2/24.
NetnsRouted puts a router namespace between them (client 10.231.N.1, server 10.232.N.2), for
what a router does: answer with ICMP, forward onto a link with a smaller MTU.
The veth pairs are created inside the namespaces, so the host's own network is never touched.
Everything (processes, tcpdump, namespaces) goes away on exit, also when the body raises
(KeyboardInterrupt included). Sysctls are only ever written inside the namespaces, and each
write is checked not to have reached the host's own value (`sysctl()`).
Outside root, without `ip`/`tcpdump` (or the other `tools` asked for), or when `ip netns add`
fails, entering raises LabUnavailable.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Sequence

from pcapq.lab.errors import LabError, LabUnavailable

CLIENT_IF = "pq-c"
SERVER_IF = "pq-s"
# The router's ends of the two veth pairs of NetnsRouted.
ROUTER_CLIENT_IF = "pq-rc"
ROUTER_SERVER_IF = "pq-rs"
# The middle namespace's ends of NetnsDelayed's two veth pairs.
PATH_CLIENT_IF = "pq-pc"
PATH_SERVER_IF = "pq-ps"

_serial = itertools.count()


# The Debian/Ubuntu package that provides each tool.
PACKAGES = {"ip": "iproute2", "tc": "iproute2", "nstat": "iproute2", "ss": "iproute2", "tcpdump": "tcpdump", "nft": "nftables",
            "nginx": "nginx", "ab": "apache2-utils"}


def missing_tools(tools: Sequence[str]) -> list[str]:
    return [tool for tool in tools if shutil.which(tool) is None]


def install_hint(tools: Sequence[str]) -> str:
    packages = sorted({PACKAGES.get(t, t) for t in tools})
    return f"apt-get install {' '.join(packages)}"


def unavailable_reason(tools: Sequence[str] = ("ip", "tcpdump")) -> str | None:
    """Why namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (run with sudo)"
    missing = missing_tools(tools)
    if missing:
        names = ", ".join(f"`{t}`" for t in missing)
        return f"needs {names}, not installed; install with: {install_hint(missing)}"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise LabError(f"ip {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _host_sysctl(key: str) -> str | None:
    """The host's own value of a sysctl (this process runs in the host's namespace)."""
    try:
        return Path("/proc/sys", *key.split(".")).read_text().strip()
    except OSError:
        return None


class Capture:
    """A tcpdump process, capturing from the moment `start()` returns."""

    def __init__(self, argv: list[str], stdout: int | IO[bytes] | None = None) -> None:
        self.argv = argv
        self._stdout = stdout
        self.proc: subprocess.Popen[Any] | None = None
        self.stderr_lines: list[str] = []
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> Capture:
        self.proc = subprocess.Popen(self.argv, stdout=self._stdout, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise LabError(f"tcpdump did not start: {self.argv}\n{self.stderr}")
        return self

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            # libpcap has activated the handle when tcpdump prints this.
            if "listening on" in line:
                self._listening.set()

    def wait(self, timeout: float) -> int:
        """For a capture with `-c`: waits until tcpdump has its packets and exits."""
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        self._finish_reading()
        return rc

    def _finish_reading(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
            if not self._reader.is_alive() and self.proc is not None and self.proc.stderr is not None:
                self.proc.stderr.close()

    def stop(self, settle: float = 0.3) -> None:
        """Lets the last packets reach tcpdump, then stops it with SIGINT (it flushes and
        prints its counters)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            time.sleep(settle)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._finish_reading()

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def dropped(self) -> int | None:
        """'N packets dropped by kernel' from tcpdump's closing counters."""
        for line in self.stderr_lines:
            if "dropped by kernel" in line:
                return int(line.split()[0])
        return None

    def __enter__(self) -> Capture:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NetnsPair:
    """Client and server namespaces joined by a veth pair. Use as a context manager."""

    def __init__(
        self,
        subnet: int | None = None,
        tools: Sequence[str] = ("ip", "tcpdump"),
        say: Callable[[str], None] | None = None,
    ) -> None:
        serial = next(_serial)
        tag = f"{os.getpid()}-{serial}"
        self.client_ns = f"pcapq-c-{tag}"
        self.server_ns = f"pcapq-s-{tag}"
        n = subnet if subnet is not None else (os.getpid() + serial) % 254 + 1
        self.client_ip = f"10.231.{n}.1"
        self.server_ip = f"10.231.{n}.2"
        self.client_if = CLIENT_IF
        self.server_if = SERVER_IF
        # Where capture() runs tcpdump unless told: the server's veth, in its namespace.
        self.capture_ns = self.server_ns
        self.capture_if = SERVER_IF
        self._created: list[str] = []
        self._procs: list[subprocess.Popen[Any]] = []
        self._captures: list[Capture] = []
        self._tools = tools
        # Narration for `pcapq lab`: one line per step (silent in tests).
        self.say: Callable[[str], None] = say or (lambda _line: None)

    # -- setup and teardown

    def __enter__(self) -> NetnsPair:
        reason = unavailable_reason(self._tools)
        if reason:
            raise LabUnavailable(reason)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def _setup(self) -> None:
        self._add_namespaces((self.client_ns, "client"), (self.server_ns, "server"))
        self._veth((self.client_ns, CLIENT_IF, self.client_ip), (self.server_ns, SERVER_IF, self.server_ip))

    def _add_namespaces(self, *named: tuple[str, str]) -> None:
        """Creates each (namespace, role), without IPv6 (no router solicitations etc. in the
        captures) and with its loopback up."""
        for ns, _role in named:
            proc = _ip("netns", "add", ns, check=False)
            if proc.returncode != 0:
                raise LabUnavailable(f"`ip netns add` failed: {proc.stderr.strip()}")
            self._created.append(ns)
        self.say("network namespaces " + " and ".join(f"{ns} ({role})" for ns, role in named) + " created")
        for ns, _role in named:
            self.sysctl(ns, "net.ipv6.conf.all.disable_ipv6", 1)
            self.sysctl(ns, "net.ipv6.conf.default.disable_ipv6", 1)
            _ip("-n", ns, "link", "set", "lo", "up")

    def _veth(self, a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
        """A veth pair made inside the namespaces, (namespace, interface, address) at each end,
        on a /24, with static neighbours (no ARP exchange delays or precedes the first packet);
        returns once both ends are up."""
        (ns_a, if_a, ip_a), (ns_b, if_b, ip_b) = a, b
        self.say(f"veth pair {if_a} ({ip_a}) <-> {if_b} ({ip_b}), made inside the namespaces")
        _ip("-n", ns_a, "link", "add", if_a, "type", "veth", "peer", "name", if_b, "netns", ns_b)
        for ns, iface, addr in (a, b):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", iface)
            _ip("-n", ns, "link", "set", iface, "up")
        mac = {ns: _ip("-n", ns, "-br", "link", "show", iface).stdout.split()[2] for ns, iface, _ in (a, b)}
        _ip("-n", ns_a, "neigh", "replace", ip_b, "lladdr", mac[ns_b], "dev", if_a, "nud", "permanent")
        _ip("-n", ns_b, "neigh", "replace", ip_a, "lladdr", mac[ns_a], "dev", if_b, "nud", "permanent")
        deadline = time.monotonic() + 5
        while not all("LOWER_UP" in _ip("-n", ns, "link", "show", iface).stdout for ns, iface, _ in (a, b)):
            if time.monotonic() > deadline:
                raise LabError(f"veth pair {if_a} <-> {if_b} did not come up")
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops every capture and process started here and deletes the namespaces. A second
        Ctrl-C during the clean-up is ignored, so that nothing is left behind."""
        if not self._created and not self._procs and not self._captures:
            return
        previous = signal.getsignal(signal.SIGINT)
        in_main_thread = threading.current_thread() is threading.main_thread()
        if in_main_thread:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self._close()
        finally:
            if in_main_thread:
                signal.signal(signal.SIGINT, previous)

    def _close(self) -> None:
        for cap in self._captures:
            try:
                cap.stop(settle=0)
            except Exception:
                pass
        for proc in self._procs:
            self.stop(proc)
        for ns in self._created:
            # Anything still running in our own namespace was started by us.
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", ns, check=False)
        if self._created:
            self.say(f"cleaned up: namespaces {' and '.join(self._created)} deleted, their processes stopped")
        self._created.clear()
        self._procs.clear()
        self._captures.clear()

    # -- running things inside

    def popen(self, ns: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Starts argv inside namespace `ns`. `ip netns exec` execs it, so the pid is argv's."""
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kwargs)
        self._procs.append(proc)
        return proc

    def run(self, ns: str, argv: Sequence[str], timeout: float = 30, check: bool = True,
            **kwargs: Any) -> subprocess.CompletedProcess[str]:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        proc = subprocess.run(["ip", "netns", "exec", ns, *argv], timeout=timeout, **kwargs)
        if check and proc.returncode != 0:
            raise LabError(f"{list(argv)} in {ns} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[Any], timeout: float = 5) -> None:
        """Stops one process we started: SIGTERM, then SIGKILL. Closes its pipes."""
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()

    def sysctl(self, ns: str, key: str, value: object) -> None:
        """Sets `key` inside namespace `ns` only. The TCP listen sysctls (net.core.somaxconn,
        net.ipv4.tcp_syncookies, tcp_max_syn_backlog, tcp_synack_retries, tcp_abort_on_overflow,
        ...) are per network namespace (struct netns_ipv4). If the host's value moved all the
        same, the key is global on this kernel: the host's value is put back and LabError raised."""
        host_before = _host_sysctl(key)
        self.run(ns, ["sysctl", "-q", "-w", f"{key}={value}"])
        host_after = _host_sysctl(key)
        if host_after != host_before and host_before is not None:
            subprocess.run(["sysctl", "-q", "-w", f"{key}={host_before}"], capture_output=True, timeout=10)
            raise LabError(f"{key} is not per network namespace on this kernel; the host's value was restored")
        self.say(f"sysctl {key}={value} in the {self.role(ns)} namespace")

    def role(self, ns: str) -> str:
        return "server" if ns == self.server_ns else "client" if ns == self.client_ns else ns

    def shape_egress(self, ns: str, iface: str, rate: str, burst: int = 300, limit: int = 100_000) -> None:
        """A token-bucket filter on iface's egress. Packets queue behind each other, which
        gives the ordering of a path with latency (this kernel may lack netem). Packets larger
        than `burst` bytes are dropped by tbf."""
        self.run(ns, ["tc", "qdisc", "add", "dev", iface, "root", "tbf", "rate", rate, "burst", str(burst), "limit", str(limit)])

    def capture_at(self, side: str) -> None:
        """Where capture() runs tcpdump unless told: "server" (the server's veth, in its
        namespace) or "client" (the client's veth, in its namespace: the proxy's side)."""
        if side == "server":
            self.capture_ns, self.capture_if = self.server_ns, SERVER_IF
        elif side == "client":
            self.capture_ns, self.capture_if = self.client_ns, CLIENT_IF
        else:
            raise LabError(f"no capture point {side!r}: 'client' or 'server'")
        self.say(f"tcpdump will run on {self.capture_if}, the {side}'s veth")

    def read_sysctl(self, ns: str, key: str) -> str:
        return self.run(ns, ["sysctl", "-n", key]).stdout.strip()

    def nstat(self, ns: str) -> dict[str, int]:
        """The namespace's absolute SNMP/netstat counters (`nstat -az`), without touching
        nstat's history file."""
        env = dict(os.environ, NSTAT_HISTORY=os.devnull)
        doc = json.loads(self.run(ns, ["nstat", "-azs", "--json"], env=env).stdout)
        return {k: int(v) for k, v in doc.get("kernel", doc).items()}

    def capture(
        self,
        path: str | Path,
        *,
        ns: str | None = None,
        iface: str | None = None,
        snaplen: int | None = None,
        count: int | None = None,
        linktype: str | None = None,
        buffer_kib: int = 32768,
        bpf: Sequence[str] = (),
        extra: Sequence[str] = (),
        stdout: int | IO[bytes] | None = None,
    ) -> Capture:
        """tcpdump in namespace `ns` on `iface` (default: `capture_ns` and `capture_if`), writing
        `path` ('-' for standard output, then pass `stdout`) packet by packet (-U).
        Use as a context manager, or call start()/stop().

        In immediate mode libpcap gives each packet a ring slot of the snaplen (64 KiB on a
        veth with offloads, 256 KiB on `any`): the default 2 MiB ring holds a handful, and a
        busy machine drops packets. Hence the larger buffer (-B)."""
        argv = ["tcpdump", "-n", "-U", "--immediate-mode", "-B", str(buffer_kib), "-Z", "root",
                "-i", iface or self.capture_if, "-w", str(path)]
        if snaplen is not None:
            argv += ["-s", str(snaplen)]
        if count is not None:
            argv += ["-c", str(count)]
        if linktype is not None:
            argv += ["-y", linktype]
        argv += [*extra, *bpf]
        cap = Capture(["ip", "netns", "exec", ns or self.capture_ns, *argv], stdout=stdout)
        self._captures.append(cap)
        return cap


class NetnsRouted(NetnsPair):
    """Client, router and server namespaces: a path with one hop in the middle, for what a
    router does (answer with ICMP, forward with a smaller MTU). Use as a context manager.

        client pq-c 10.231.N.1 <-> pq-rc 10.231.N.254  router  pq-rs 10.232.N.254 <-> pq-s 10.232.N.2 server

    The router forwards (net.ipv4.ip_forward=1 in its namespace) and answers every error at once
    (net.ipv4.icmp_ratelimit=0: by default Linux sends one per second per destination,
    icmp_global_allow() / icmpv4_xrlim_allow()). tcpdump runs on the client's veth by default:
    the proxy's side of the path, the one that sees the router's answers.
    """

    def __init__(
        self,
        subnet: int | None = None,
        tools: Sequence[str] = ("ip", "tcpdump"),
        say: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(subnet, tools, say)
        n = self.client_ip.split(".")[2]
        self.router_ns = self.client_ns.replace("pcapq-c-", "pcapq-r-")
        self.router_client_if = ROUTER_CLIENT_IF
        self.router_server_if = ROUTER_SERVER_IF
        self.router_client_ip = f"10.231.{n}.254"
        self.router_server_ip = f"10.232.{n}.254"
        self.server_ip = f"10.232.{n}.2"
        self.capture_ns = self.client_ns
        self.capture_if = CLIENT_IF

    def _setup(self) -> None:
        self._add_namespaces((self.client_ns, "client"), (self.router_ns, "router"), (self.server_ns, "server"))
        self._veth((self.client_ns, CLIENT_IF, self.client_ip), (self.router_ns, ROUTER_CLIENT_IF, self.router_client_ip))
        self._veth((self.router_ns, ROUTER_SERVER_IF, self.router_server_ip), (self.server_ns, SERVER_IF, self.server_ip))
        self.sysctl(self.router_ns, "net.ipv4.ip_forward", 1)
        self.sysctl(self.router_ns, "net.ipv4.icmp_ratelimit", 0)
        _ip("-n", self.client_ns, "route", "add", _subnet(self.server_ip), "via", self.router_client_ip)
        _ip("-n", self.server_ns, "route", "add", _subnet(self.client_ip), "via", self.router_server_ip)
        self.say("client and server route each other's /24 through the router, which forwards")

    def role(self, ns: str) -> str:
        return "router" if ns == self.router_ns else super().role(ns)


def _subnet(addr: str) -> str:
    return addr.rsplit(".", 1)[0] + ".0/24"


class NetnsDelayed(NetnsPair):
    """Client and server on one /24 with a path between them that delays, reorders or drops,
    for kernels without netem: a middle namespace whose two veths are bridged in user space by
    pcapq.lab.delayline (start_path()). Use as a context manager.

        client pq-c 10.231.N.1 <-> pq-pc  path (delayline)  pq-ps <-> pq-s 10.231.N.2 server

    The middle namespace has no addresses and does not forward: every frame goes through the
    delay line, unchanged but for its TCP/UDP checksum. The client's and server's veths send one
    segment per frame (gso_max_segs 1: a packet socket cannot write a frame larger than the MTU).
    tcpdump runs on the server's veth by default (capture_at("client") for the client's)."""

    def __init__(
        self,
        subnet: int | None = None,
        tools: Sequence[str] = ("ip", "tcpdump"),
        say: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(subnet, tools, say)
        self.path_ns = self.client_ns.replace("pcapq-c-", "pcapq-p-")
        self.path: subprocess.Popen[Any] | None = None
        self.path_settings = ""

    def _setup(self) -> None:
        self._add_namespaces((self.client_ns, "client"), (self.path_ns, "path"), (self.server_ns, "server"))
        self.say(f"veth pairs {CLIENT_IF} ({self.client_ip}) <-> {PATH_CLIENT_IF} and {PATH_SERVER_IF} <-> "
                 f"{SERVER_IF} ({self.server_ip}), the middle ones in the path namespace, without addresses")
        _ip("-n", self.client_ns, "link", "add", CLIENT_IF, "type", "veth", "peer", "name", PATH_CLIENT_IF,
            "netns", self.path_ns)
        _ip("-n", self.server_ns, "link", "add", SERVER_IF, "type", "veth", "peer", "name", PATH_SERVER_IF,
            "netns", self.path_ns)
        for ns, iface, addr in ((self.client_ns, CLIENT_IF, self.client_ip), (self.server_ns, SERVER_IF, self.server_ip)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", iface)
            _ip("-n", ns, "link", "set", "dev", iface, "gso_max_segs", "1")
            _ip("-n", ns, "link", "set", iface, "up")
        for iface in (PATH_CLIENT_IF, PATH_SERVER_IF):
            _ip("-n", self.path_ns, "link", "set", iface, "promisc", "on", "up")
        mac = {ns: _ip("-n", ns, "-br", "link", "show", iface).stdout.split()[2]
               for ns, iface in ((self.client_ns, CLIENT_IF), (self.server_ns, SERVER_IF))}
        _ip("-n", self.client_ns, "neigh", "replace", self.server_ip, "lladdr", mac[self.server_ns], "dev", CLIENT_IF,
            "nud", "permanent")
        _ip("-n", self.server_ns, "neigh", "replace", self.client_ip, "lladdr", mac[self.client_ns], "dev", SERVER_IF,
            "nud", "permanent")
        ends = ((self.client_ns, CLIENT_IF), (self.path_ns, PATH_CLIENT_IF), (self.path_ns, PATH_SERVER_IF),
                (self.server_ns, SERVER_IF))
        deadline = time.monotonic() + 5
        while not all("LOWER_UP" in _ip("-n", ns, "link", "show", iface).stdout for ns, iface in ends):
            if time.monotonic() > deadline:
                raise LabError("the path's veth pairs did not come up")
            time.sleep(0.02)

    def start_path(
        self,
        delay_cs: float = 0.0,
        delay_sc: float = 0.0,
        hold_every: int = 0,
        hold_for: float = 0.0,
        drop_every: int = 0,
        direction: str = "sc",
        step_after: int = 0,
        step_cs: float = 0.0,
        deadline: float = 60.0,
    ) -> None:
        """Starts the delay line: `delay_cs` s from client to server, `delay_sc` back; in
        `direction`, each `hold_every`th first transmission of a TCP data segment `hold_for` s
        later still (reordered), each `drop_every`th dropped; after `step_after` frames from the
        client, `step_cs` s client to server instead of `delay_cs`. Returns once it forwards."""
        import selectors
        import sys

        argv = [sys.executable, "-m", "pcapq.lab.delayline", PATH_CLIENT_IF, PATH_SERVER_IF,
                "--delay-cs", str(delay_cs), "--delay-sc", str(delay_sc), "--hold-every", str(hold_every),
                "--hold-for", str(hold_for), "--hold-dir", direction, "--drop-every", str(drop_every),
                "--drop-dir", direction, "--step-after", str(step_after), "--step-cs", str(step_cs),
                "--deadline", str(deadline)]
        self.path = self.popen(self.path_ns, argv, stdout=subprocess.PIPE, text=True)
        assert self.path.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.path.stdout, selectors.EVENT_READ)
        if not sel.select(10) or self.path.stdout.readline().strip() != "ready":
            raise LabError("the delay line did not start")
        parts = [f"{delay_cs * 1000:g} ms client->server, {delay_sc * 1000:g} ms server->client"]
        if step_after:
            parts.append(f"client->server {step_cs * 1000:g} ms from the client's frame {step_after + 1} on")
        where = "server->client" if direction == "sc" else "client->server"
        if hold_every:
            parts.append(f"every {hold_every}th new data segment {where} held {hold_for * 1000:g} ms more (reordered)")
        if drop_every:
            parts.append(f"every {drop_every}th new data segment {where} dropped")
        self.path_settings = "; ".join(parts)
        self.say(f"path (user-space delay line in the middle namespace): {self.path_settings}")

    def stop_path(self) -> dict[str, Any]:
        """Stops the delay line; its counters (frames each way, the segments held and dropped)."""
        if self.path is None:
            return {}
        proc, self.path = self.path, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate(timeout=5)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else {}

    def role(self, ns: str) -> str:
        return "path" if ns == self.path_ns else super().role(ns)
