"""The ECMP demonstration of issue 17 (root): 8 parallel TCP connections between a client and a
server with two equal-cost paths between them, without TiU, with TiU, and with TiU and
macroflow_ccc.

Namespaces: client c -- router r1 ==(path A: 10 Mbit/s, path B: 30 Mbit/s)== router r2 -- server s.
Both routers hash flows onto the two paths by their five-tuple (fib_multipath_hash_policy=1,
L4), r1 for client-to-server packets, r2 for the way back; each router's egress onto a path is a
tbf bottleneck (10 or 30 Mbit/s, 50 ms of queue). TiU runs on c's and s's devices (the hosts),
never on the routers: they see UDP datagrams of one port pair when TiU is on.

Clients: two iperf3 clients at once, 4 connections each to ports 5201 and 5202 (uploads, c to s;
with macroflow_ccc one group, priorities 1 and 2 by port), then 8 parallel curl downloads from
lighttpd (s to c). Per path, the routers' transmit counters show where the packets went.

    sudo .venv/bin/python bench/tiu_ecmp.py [--seconds 10] [--out out/tiu-ecmp] [--ipv6]

Prints a table and writes result.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import re
import tempfile
import threading
import time
from pathlib import Path

TAG = f"te{os.getpid() % 10000}"
NS = {k: f"{TAG}{k}" for k in ("c", "r1", "r2", "s")}
PORT = 8897
# The address plan: IPv4, or IPv6 with --ipv6 (set by `plan()`). Link n is 10.83.n.0/24 or
# fd83:n::/64; the server's own address is on its loopback.
V4 = {"net": "10.83.{}.{}", "len": "24", "server": "10.83.9.1", "host": "32", "clients": "10.83.1.0/24"}
V6 = {"net": "fd83:{}::{}", "len": "64", "server": "fd83:9::1", "host": "128", "clients": "fd83:1::/64"}
P = dict(V4)
SERVER = P["server"]


def plan(ipv6: bool) -> None:
    global SERVER
    P.clear()
    P.update(V6 if ipv6 else V4)
    SERVER = P["server"]


def a(link: int, host: int) -> str:
    return P["net"].format(link, host)


def url_host() -> str:
    return f"[{SERVER}]" if ":" in SERVER else SERVER
RATES = {"A": "10mbit", "B": "30mbit"}


def sh(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def nsx(ns: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", NS[ns], *args, **kw)


def veth(a: str, da: str, b: str, db: str) -> None:
    sh("ip", "link", "add", da, "netns", NS[a], "type", "veth", "peer", "name", db, "netns", NS[b])
    for n, d in ((a, da), (b, db)):
        sh("ip", "-n", NS[n], "link", "set", d, "up")


def setup() -> None:
    for n in NS.values():
        sh("ip", "netns", "add", n)
        sh("ip", "-n", n, "link", "set", "lo", "up")
    veth("c", "c0", "r1", "r1c")
    veth("r1", "r1a", "r2", "r2a")
    veth("r1", "r1b", "r2", "r2b")
    veth("r2", "r2s", "s", "s0")
    ln, host = P["len"], P["host"]
    addrs = [("c", "c0", a(1, 1)), ("r1", "r1c", a(1, 2)), ("r1", "r1a", a(2, 1)), ("r2", "r2a", a(2, 2)),
             ("r1", "r1b", a(3, 1)), ("r2", "r2b", a(3, 2)), ("r2", "r2s", a(4, 1)), ("s", "s0", a(4, 2))]
    # IPv6 addresses without duplicate detection: usable at once.
    extra = ["nodad"] if ":" in SERVER else []
    for n, d, x in addrs:
        sh("ip", "-n", NS[n], "addr", "add", f"{x}/{ln}", "dev", d, *extra)
    sh("ip", "-n", NS["s"], "addr", "add", f"{SERVER}/{host}", "dev", "lo", *extra)
    sh("ip", "-n", NS["c"], "route", "add", "default", "via", a(1, 2))
    sh("ip", "-n", NS["s"], "route", "add", "default", "via", a(4, 1))
    for r in ("r1", "r2"):
        if ":" in SERVER:
            nsx(r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
            nsx(r, "sysctl", "-qw", "net.ipv6.fib_multipath_hash_policy=1")
        else:
            nsx(r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            nsx(r, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1")
    sh("ip", "-n", NS["r1"], "route", "add", f"{SERVER}/{host}",
       "nexthop", "via", a(2, 2), "nexthop", "via", a(3, 2))
    sh("ip", "-n", NS["r2"], "route", "add", f"{SERVER}/{host}", "via", a(4, 2))
    sh("ip", "-n", NS["r2"], "route", "add", P["clients"],
       "nexthop", "via", a(2, 1), "nexthop", "via", a(3, 1))
    # The bottlenecks: each router's egress onto a path (both directions are shaped).
    for r, side in (("r1", "r1"), ("r2", "r2")):
        for p, rate in RATES.items():
            nsx(r, "ethtool", "-K", f"{side}{p.lower()}", "tso", "off", "gso", "off", "gro", "off")
            sh("tc", "-n", NS[r], "qdisc", "add", "dev", f"{side}{p.lower()}", "root", "tbf",
               "rate", rate, "burst", "3000", "latency", "50ms")


def set_rates(rates: dict) -> None:
    """Each path's bottleneck rate, both directions (tbf changed in place)."""
    for r in ("r1", "r2"):
        for p, rate in rates.items():
            sh("tc", "-n", NS[r], "qdisc", "change", "dev", f"{r}{p.lower()}", "root", "tbf",
               "rate", rate, "burst", "3000", "latency", "50ms")


def teardown() -> None:
    for n in NS.values():
        sh("ip", "netns", "del", n, check=False)


def path_pkts() -> dict:
    """Packets each router has sent onto each path: r1 (client to server), r2 (server to client)."""
    out = {}
    for r in ("r1", "r2"):
        for p in ("a", "b"):
            st = json.loads(sh("ip", "-n", NS[r], "-s", "-j", "link", "show", f"{r}{p}").stdout)[0]
            out[f"{r}{p}"] = st["stats64"]["tx"]["packets"]
    return out


def tcp_ext(ns: str) -> dict:
    """The namespace's TCP counters that tell how losses were recovered (nstat, absolute)."""
    names = ("TcpExtTCPTimeouts", "TcpExtTCPFastRetrans", "TcpExtTCPLossProbes", "TcpRetransSegs")
    out = nsx(ns, "nstat", "-az", *names, check=False).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)", out, re.M)}


class Sampler:
    """Once a second while the uploads run: the kernel's cwnd of each client connection to
    the iperf3 ports (ss), and the connections TiU has fallen back (its status), to see what the
    throughput ratio is made of and which connections fell back."""

    def __init__(self, tiu_on: bool) -> None:
        self.tiu_on, self.stop = tiu_on, threading.Event()
        self.cwnd: list = []  # (t_s, {dport: [cwnd, ...]})
        self.plain: set = set()  # (local port, peer port) TiU held as fallen back
        self.errors: list = []  # status reads that failed (counted, shown)
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.wait(1.0):
            by_port: dict = {}
            out = nsx("c", "ss", "-tinH", "state", "established", "dst", url_host(), check=False).stdout
            # iperf3's control connections (one per port, idle) are left out: data ones only.
            for m in re.finditer(r":(\d+)\s+\S+:(520[12])\b.*?\n\s(.*)", out):
                cw, acked = re.search(r"cwnd:(\d+)", m.group(3)), re.search(r"bytes_acked:(\d+)", m.group(3))
                if cw and acked and int(acked.group(1)) > 1 << 20:
                    by_port.setdefault(int(m.group(2)), []).append(int(cw.group(1)))
            self.cwnd.append((time.monotonic() - t0, by_port))
            if self.tiu_on:
                r = sh(str(Path(sys.executable).parent / "macroflow"), "tiu", "status", "--json", check=False)
                if r.returncode != 0:
                    self.errors.append(r.stderr.strip())
                    continue
                st = json.loads(r.stdout)
                for p in st["host_pairs"]:
                    for c in p["connections"]:
                        if c["state"] == "plain":
                            self.plain.add((p["local"], c["local_port"], c["peer_port"]))

    def __enter__(self) -> "Sampler":
        self.t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.t.join()

    def cwnd_ratio(self, from_s: float):
        """Mean cwnd of the connections to 5202 over that of those to 5201, from `from_s` on
        (None without samples of both)."""
        a = [c for t, d in self.cwnd if t >= from_s for c in d.get(5201, [])]
        b = [c for t, d in self.cwnd if t >= from_s for c in d.get(5202, [])]
        return (sum(b) / len(b)) / (sum(a) / len(a)) if a and b else None


def macroflow(*args: str) -> str:
    exe = Path(sys.executable).parent / "macroflow"
    return sh(str(exe), *args).stdout


def run_mode(mode: str, seconds: int, www: Path) -> dict:
    """Uploads: two iperf3 clients at once, 4 connections each, to ports 5201 and 5202 (in the
    tiu+ccc mode one ctrlTCP group, priority 1 and 2 by port); then 8 curl downloads."""
    before = path_pkts()
    ext0 = tcp_ext("c")
    cc = ["-C", "macroflow_ccc"] if mode.startswith("tiu+ccc") else []
    srvs = [subprocess.Popen(["ip", "netns", "exec", NS["s"], "iperf3", "-s", "-1", "-B", SERVER, "-p", str(p)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in (5201, 5202)]
    time.sleep(0.5)
    clients = [subprocess.Popen(["ip", "netns", "exec", NS["c"], "iperf3", "-c", SERVER, "-p", str(p), "-P", "4",
                                 "-t", str(seconds), "-J", *cc], stdout=subprocess.PIPE, text=True)
               for p in (5201, 5202)]
    ups = []
    with Sampler(mode != "plain") as sampler:
        for c in clients:
            out, _ = c.communicate(timeout=seconds + 60)
            j = json.loads(out)
            if "error" in j:
                raise RuntimeError(f"iperf3 ({mode}): {j['error']}")
            ups.append(j)
    ext1 = tcp_ext("c")
    for srv in srvs:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    mid = path_pkts()
    # Downloads: 8 curls at once from lighttpd (the server's sockets use macroflow_ccc in the
    # tiu+ccc mode, by its route).
    downs = []
    with Sampler(mode != "plain") as dl_sampler:
        curls = [subprocess.Popen(["ip", "netns", "exec", NS["c"], "curl", "-s", "-o", "/dev/null", "-w",
                                   "%{size_download} %{time_total}", f"http://{url_host()}:8080/blob"],
                                  stdout=subprocess.PIPE, text=True) for _ in range(8)]
        for c in curls:
            out, _ = c.communicate(timeout=120)
            size, t = out.split()
            downs.append({"bytes": int(size), "s": float(t)})
    after = path_pkts()
    streams = [s for up in ups for s in up["end"]["streams"]]
    return {
        "mode": mode,
        "upload_bps": sum(up["end"]["sum_received"]["bits_per_second"] for up in ups),
        "upload_retransmits": sum(up["end"]["sum_sent"].get("retransmits", 0) for up in ups),
        "upload_by_port_bps": [up["end"]["sum_received"]["bits_per_second"] for up in ups],
        # From 5 s on, past the start-up (the two clients start apart; the first takes the path).
        "upload_by_port_bps_from_5s": [_rate_from(up, 5.0) for up in ups],
        "upload_streams_bps": [s["receiver"]["bits_per_second"] for s in streams],
        "upload_mean_rtt_ms": [s["sender"].get("mean_rtt", 0) / 1000 for s in streams],
        "upload_path_pkts": {k: mid[k] - before[k] for k in ("r1a", "r1b")},
        "download": downs,
        "download_path_pkts": {k: after[k] - mid[k] for k in ("r2a", "r2b")},
        # The kernel's own view of the uploads: cwnd 5202:5201 from 5 s on, and how losses were
        # recovered (timeouts against fast retransmissions).
        "upload_cwnd_ratio_from_5s": sampler.cwnd_ratio(5.0),
        "upload_cwnd_samples": sampler.cwnd,
        "upload_tcp_ext": {k: ext1.get(k, 0) - ext0.get(k, 0) for k in ext1},
        "fell_back": sorted(sampler.plain | dl_sampler.plain),
        "status_read_errors": sampler.errors + dl_sampler.errors,
    }


def _rate_from(up: dict, from_s: float) -> float:
    """The client's sending rate (bits/s) over its intervals that start at or after from_s."""
    ivs = [iv["sum"] for iv in up["intervals"] if iv["sum"]["start"] >= from_s - 1e-6]
    secs = sum(iv["seconds"] for iv in ivs)
    return sum(iv["bytes"] for iv in ivs) * 8 / secs if secs else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--out", default="out/tiu-ecmp")
    ap.add_argument("--ipv6", action="store_true", help="the same over IPv6 (multipath hash policy 1 for IPv6)")
    args = ap.parse_args()
    plan(args.ipv6)
    if os.geteuid() != 0:
        sys.exit("root needed (network namespaces, tc, BPF)")
    for tool in ("iperf3", "curl", "lighttpd", "ethtool"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (make deps installs it)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    www = Path(tempfile.mkdtemp(prefix="tiu-www-"))
    (www / "blob").write_bytes(os.urandom(4 << 20))
    conf = www / "lighttpd.conf"
    conf.write_text(f'server.document-root = "{www}"\nserver.port = 8080\nserver.bind = "{url_host()}"\n'
                    f'server.pid-file = "{www}/pid"\n')
    if os.path.exists("/sys/fs/bpf/macroflow_tiu"):
        sys.exit("TiU is enabled already (`macroflow tiu disable` first): this run enables and disables it")
    results = []
    ccc_loaded_here = False
    added_rules: list = []
    try:
        teardown()
        setup()
        httpd = subprocess.Popen(["ip", "netns", "exec", NS["s"], "lighttpd", "-D", "-f", str(conf)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        results.append(run_mode("plain", args.seconds, www))
        macroflow("tiu", "enable", "--port", str(PORT), "--dev", f"{NS['c']}:c0", "--dev", f"{NS['s']}:s0")
        macroflow("tiu", "rule", "add", P["clients"])
        macroflow("tiu", "rule", "add", f"{SERVER}/{P['host']}")
        results.append(run_mode("tiu", args.seconds, www))
        if "macroflow_ccc" not in sh("sysctl", "-n", "net.ipv4.tcp_available_congestion_control").stdout:
            macroflow("linux", "load")
            ccc_loaded_here = True
        # One group for the client's uploads, priority 2 for port 5202's (the server's downloads
        # form their own group by address pair).
        for port, prio in (("5201", "1"), ("5202", "2")):
            said = macroflow("linux", "rule", "add", "--ports", port, "--group", "7", "--priority", prio)
            added_rules.append(int(said.split()[1]))  # "rule N added"
        # The server's connections (the downloads) by route: a namespace's default congestion
        # control cannot be set to a BPF one here (EPERM).
        sh("ip", "-n", NS["s"], "route", "replace", "default", "via", a(4, 1), "congctl", "macroflow_ccc")
        # The hash seed is random per namespace, so which path TiU's port pair takes differs
        # from run to run: the coupled run goes over both rates, by swapping them.
        tiu_path = max(("A", "B"), key=lambda p: results[-1]["upload_path_pkts"][f"r1{p.lower()}"])
        results.append(run_mode(f"tiu+ccc {RATES[tiu_path][:-4]}M", args.seconds, www))
        set_rates({"A": RATES["B"], "B": RATES["A"]})
        results.append(run_mode(f"tiu+ccc {RATES['B' if tiu_path == 'A' else 'A'][:-4]}M", args.seconds, www))
        results.append({"mode": "tiu status", "text": macroflow("tiu", "status")})
        httpd.kill()
    finally:
        sh(str(Path(sys.executable).parent / "macroflow"), "tiu", "disable", check=False)
        for i in sorted(added_rules, reverse=True):  # only this run's rules
            sh(str(Path(sys.executable).parent / "macroflow"), "linux", "rule", "del", str(i), check=False)
        if ccc_loaded_here:
            sh(str(Path(sys.executable).parent / "macroflow"), "linux", "unload", check=False)
        teardown()
        shutil.rmtree(www, ignore_errors=True)
    (out / "result.json").write_text(json.dumps(results, indent=1))
    print(f"{'mode':12s} {'upload':>8s} {'5202:5201*':>10s} {'retx':>5s} {'RTT ms':>7s} {'path A/B pkts up':>18s} "
          f"{'path A/B pkts down':>19s} {'8 downloads':>12s}  per-connection upload Mbit/s (4 to 5201, 4 to 5202)")
    for r in results:
        if "upload_bps" not in r:
            continue
        up, dn = r["upload_path_pkts"], r["download_path_pkts"]
        d_s = max(d["s"] for d in r["download"])
        p1, p2 = r["upload_by_port_bps_from_5s"]
        rtt = sum(r["upload_mean_rtt_ms"]) / len(r["upload_mean_rtt_ms"])
        print(f"{r['mode']:12s} {r['upload_bps'] / 1e6:6.1f}Mb {p2 / p1:9.2f}x {r['upload_retransmits']:5d} {rtt:7.1f} "
              f"{up['r1a']:>8d}/{up['r1b']:<9d} {dn['r2a']:>9d}/{dn['r2b']:<9d} {d_s:10.2f} s  "
              + " ".join(f"{b / 1e6:.1f}" for b in r["upload_streams_bps"]))
    print("* the rate ratio from 5 s on (with macroflow_ccc the priorities are 1 and 2; 'tiu+ccc 10M': "
          "TiU's path limited to 10 Mbit/s)")
    for r in results:
        if "upload_bps" in r:
            e = r["upload_tcp_ext"]
            cw = r["upload_cwnd_ratio_from_5s"]
            print(f"{r['mode']:12s} kernel cwnd 5202:5201 from 5 s {'n/a' if cw is None else f'{cw:.2f}x'}; uploads: "
                  f"{e.get('TcpExtTCPTimeouts', 0)} timeouts, {e.get('TcpExtTCPFastRetrans', 0)} fast retransmits, "
                  f"{e.get('TcpExtTCPLossProbes', 0)} loss probes; fell back (local, port, peer port): "
                  f"{r['fell_back'] or 'none'}" + (f"; {len(r['status_read_errors'])} status reads failed" if r["status_read_errors"] else ""))
    print(results[-1]["text"])


if __name__ == "__main__":
    main()
