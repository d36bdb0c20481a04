"""TiU's overhead (issue 17, root): throughput and CPU per Gbit/s over a veth pair between two
network namespaces, with and without TiU, and the tc programs' run time per packet.

Three runs of `iperf3 -t SECONDS` (one connection, the client's namespace sending) each:

- `plain`: the veth pair as it comes (TSO/GSO/GRO, checksum offload);
- `plain, TiU's device settings` (the peer): transmit checksumming, TSO, GSO and GRO off and
  gso_max_segs 1, which TiU needs (crates/tiu-bpf/README.md); what remains between this and TiU
  is the translation itself;
- `TiU`: `macroflow tiu enable` on both ends and a rule for the server.

CPU is the whole machine's busy time over the run (/proc/stat: both ends and the veth run on this
host), per Gbit/s delivered. run_time_ns per packet comes from kernel.bpf_stats_enabled
(bpftool prog show). The ratio TiU : peer is what TiU costs; peer : plain is what its device
settings cost.

    sudo .venv/bin/python bench/tiu_bench.py [--seconds 10] [--out out/tiu-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TAG = f"tb{os.getpid() % 10000}"
A, B = f"{TAG}a", f"{TAG}b"
PORT = 8895


def sh(*args: str, check: bool = True) -> str:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def macroflow(*args: str) -> str:
    return sh(str(Path(sys.executable).parent / "macroflow"), *args)


def busy_jiffies() -> tuple:
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def setup() -> None:
    for n in (A, B):
        sh("ip", "netns", "add", n)
        sh("ip", "-n", n, "link", "set", "lo", "up")
    sh("ip", "link", "add", "v0", "netns", A, "type", "veth", "peer", "name", "v1", "netns", B)
    for n, d, a in ((A, "v0", "10.85.0.1/24"), (B, "v1", "10.85.0.2/24")):
        sh("ip", "-n", n, "addr", "add", a, "dev", d)
        sh("ip", "-n", n, "link", "set", d, "up")


def tiu_device_settings() -> None:
    for n, d in ((A, "v0"), (B, "v1")):
        sh("ip", "netns", "exec", n, "ethtool", "-K", d, "tx", "off", "tso", "off", "gso", "off", "gro", "off")
        sh("ip", "-n", n, "link", "set", d, "gso_max_segs", "1")


def prog_stats() -> dict:
    out = {}
    for name in ("egress", "ingress"):
        j = json.loads(sh("bpftool", "-j", "prog", "show", "pinned", f"/sys/fs/bpf/macroflow_tiu/{name}"))
        out[name] = (j.get("run_time_ns", 0), j.get("run_cnt", 0))
    return out


def run(mode: str, seconds: int) -> dict:
    srv = subprocess.Popen(["ip", "netns", "exec", B, "iperf3", "-s", "-1", "-B", "10.85.0.2"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    before = busy_jiffies()
    progs = prog_stats() if mode == "TiU" else None
    t0 = time.monotonic()
    j = json.loads(sh("ip", "netns", "exec", A, "iperf3", "-c", "10.85.0.2", "-t", str(seconds), "-J"))
    wall = time.monotonic() - t0
    after = busy_jiffies()
    srv.wait(timeout=10)
    bps = j["end"]["sum_received"]["bits_per_second"]
    hz = os.sysconf("SC_CLK_TCK")
    cpu_s = (after[0] - before[0]) / hz
    r = {"mode": mode, "gbps": bps / 1e9, "cpu_s_per_gbit": cpu_s / (bps * wall / 1e9),
         "cpu_busy_fraction": (after[0] - before[0]) / max(1, after[1] - before[1]),
         "retransmits": j["end"]["sum_sent"].get("retransmits", 0)}
    if progs is not None:
        now = prog_stats()
        for name in ("egress", "ingress"):
            ns, cnt = now[name][0] - progs[name][0], now[name][1] - progs[name][1]
            r[f"{name}_ns_per_pkt"] = ns / max(1, cnt)
            r[f"{name}_runs"] = cnt
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--out", default="out/tiu-bench")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("root needed (network namespaces, tc, BPF)")
    if "macroflow_tiu" in os.listdir("/sys/fs/bpf") if os.path.isdir("/sys/fs/bpf") else False:
        sys.exit("TiU is enabled already (`macroflow tiu disable` first): this benchmark enables and disables it")
    stats_was = sh("sysctl", "-n", "kernel.bpf_stats_enabled").strip()
    results = []
    try:
        setup()
        results.append(run("plain", a.seconds))
        tiu_device_settings()
        results.append(run("plain, TiU's device settings", a.seconds))
        macroflow("tiu", "enable", "--port", str(PORT), "--dev", f"{A}:v0", "--dev", f"{B}:v1")
        macroflow("tiu", "rule", "add", "10.85.0.2/32")
        sh("sysctl", "-qw", "kernel.bpf_stats_enabled=1")
        results.append(run("TiU", a.seconds))
        st = json.loads(macroflow("tiu", "status", "--json"))
        results[-1]["counters"] = {k: v for k, v in st["counters"].items() if v}
    finally:
        sh("sysctl", "-qw", f"kernel.bpf_stats_enabled={stats_was}", check=False)
        sh(str(Path(sys.executable).parent / "macroflow"), "tiu", "disable", check=False)
        for n in (A, B):
            sh("ip", "netns", "del", n, check=False)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    plain, peer, t = results
    summary = {"runs": results,
               "tiu_vs_peer_throughput": t["gbps"] / peer["gbps"],
               "tiu_vs_peer_cpu_per_gbit": t["cpu_s_per_gbit"] / peer["cpu_s_per_gbit"],
               "peer_vs_plain_throughput": peer["gbps"] / plain["gbps"]}
    (out / "result.json").write_text(json.dumps(summary, indent=1))
    print(f"{'mode':32s} {'Gbit/s':>7s} {'CPU s/Gbit':>10s} {'busy':>5s} {'retx':>6s}")
    for r in results:
        print(f"{r['mode']:32s} {r['gbps']:7.2f} {r['cpu_s_per_gbit']:10.3f} {r['cpu_busy_fraction']:5.2f} {r['retransmits']:6d}")
    print(f"TiU : peer  throughput {summary['tiu_vs_peer_throughput']:.2f}x, CPU per Gbit "
          f"{summary['tiu_vs_peer_cpu_per_gbit']:.2f}x; peer : plain throughput {summary['peer_vs_plain_throughput']:.2f}x")
    print(f"tc programs: egress {t['egress_ns_per_pkt']:.0f} ns per packet ({t['egress_runs']} runs), "
          f"ingress {t['ingress_ns_per_pkt']:.0f} ns per packet ({t['ingress_runs']} runs)")
    print(f"TiU counters: {t['counters']}")


if __name__ == "__main__":
    main()
