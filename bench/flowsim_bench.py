"""Benchmark of the flow-level model (crates/flowsim), run by ``make bench-flowsim``.

Prints, each measured in this run:
- clamp (progressive filling with a heap, through the Python binding) against a plain C++
  progressive-filling solver (bench/peers/maxmin_plain.cpp, built here with g++ -O2) on a 1,024-host
  fat tree (k = 16, 6,144 links) with 10,000 and 100,000 flows; the two must agree;
- clamp against the literal Fig. 5 (clamp_oracle) at sizes the oracle can do;
- the fixed point of every sender model for 10,000 flows on a topology of about 1,000 nodes;
- how clamp's time grows with flows and with nodes (fat trees k = 8, 16, 24).
Times are the best of several repetitions (wall clock, one core). Ratios above 1 mean clamp is faster.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from macroflow import flowsim as fs

HERE = pathlib.Path(__file__).resolve().parent


def best(f, reps: int = 5) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def host_pairs(hosts, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(len(hosts), size=n)
    b = (a + 1 + rng.integers(len(hosts) - 1, size=n)) % len(hosts)
    return [(hosts[i], hosts[j]) for i, j in zip(a, b)]


def build_peer(tmp: pathlib.Path) -> pathlib.Path:
    gxx = shutil.which("g++")
    if gxx is None:
        sys.exit("g++ not found: the C++ peer cannot be built (Debian package g++)")
    exe = tmp / "maxmin_plain"
    subprocess.run([gxx, "-O2", "-std=c++17", "-o", str(exe), str(HERE / "peers" / "maxmin_plain.cpp")], check=True)
    return exe


def peer(exe: pathlib.Path, m: fs.FlowModel, tmp: pathlib.Path, reps: int = 5):
    caps = [c for _, _, c in m.links()]
    lines = [f"{len(caps)} {m.n_flows}", " ".join(repr(c) for c in caps)]
    lines += [f"{len(r)} " + " ".join(map(str, r)) for r in (m.route(i) for i in range(m.n_flows))]
    inp = tmp / "input.txt"
    inp.write_text("\n".join(lines) + "\n")
    times, rates = [], None
    for _ in range(reps):
        with inp.open() as f:
            out = subprocess.run([str(exe)], stdin=f, capture_output=True, text=True, check=True).stdout.split()
        times.append(float(out[0]) / 1e3)
        rates = [float(x) for x in out[1:]]
    return min(times), rates


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        exe = build_peer(tmp)
        print("clamp against a plain C++ progressive-filling solver, 1,024-host fat tree (k=16, 6,144 links)")
        print(f"{'flows':>8} {'clamp ms':>10} {'C++ plain ms':>13} {'ratio':>7} {'max |diff|':>11}")
        tree = fs.fat_tree(16)
        for n in (10_000, 100_000):
            m = fs.FlowModel(tree.links(), host_pairs(tree.edge_nodes, n, seed=1))
            t_clamp = best(m.clamp)
            t_peer, r_peer = peer(exe, m, tmp)
            diff = float(np.max(np.abs(np.asarray(m.clamp()) - np.asarray(r_peer))))
            print(f"{n:>8} {t_clamp * 1e3:>10.2f} {t_peer * 1e3:>13.2f} {t_peer / t_clamp:>6.2f}x {diff:>11.2e}")

    print("\nclamp against the literal Fig. 5 (one brick-wall computation per flow), same fat tree")
    print(f"{'flows':>8} {'clamp ms':>10} {'oracle ms':>10} {'ratio':>9}")
    for n in (250, 1000, 2000):
        m = fs.FlowModel(tree.links(), host_pairs(tree.edge_nodes, n, seed=2))
        t_c = best(m.clamp)
        t_o = best(m.clamp_oracle, reps=1)
        assert np.allclose(m.clamp(), m.clamp_oracle(), rtol=1e-9, atol=1e-12)
        print(f"{n:>8} {t_c * 1e3:>10.3f} {t_o * 1e3:>10.1f} {t_o / t_c:>8.0f}x")

    topo = fs.synthetic("barabasi", 1000, 1100, "geometric", seed=1, edge_nodes=768)
    flows = fs.uniform_flows(topo.edge_nodes, 10_000, seed=1)
    m = fs.model_of(topo, flows)
    print(f"\nsender models to their fixed point, 10,000 flows, Barabási topology of {topo.info['nodes']} nodes "
          f"({2 * topo.info['edges']} links); goal: under 1 s each")
    print(f"{'model':>15} {'ms':>9} {'iterations':>11}")
    mmf = m.clamp()
    for model in fs.SENDER_MODELS:
        r = {}
        t = best(lambda: r.update(m.senders(model, alpha=0.2, epsilon=1e-6, mmf=mmf)), reps=3)
        print(f"{model:>15} {t * 1e3:>9.1f} {r['iterations']:>11}")
    r = {}
    t = best(lambda: r.update(m.loss_load(10.0, mmf=mmf)), reps=1)
    print(f"{'loss_load k=10':>15} {t * 1e3:>9.1f} {r['iterations']:>11}")

    print("\nclamp's growth with flows (fat tree k=16) and with nodes (fat trees, 10 flows per host)")
    print(f"{'topology':>18} {'nodes':>7} {'links':>7} {'flows':>8} {'clamp ms':>10} {'ns/flow-hop':>12}")
    for k, n in ((16, 1_000), (16, 10_000), (16, 100_000), (8, 1_280), (16, 10_240), (24, 34_560)):
        t = fs.fat_tree(k)
        m = fs.FlowModel(t.links(), host_pairs(t.edge_nodes, n, seed=3))
        tc = best(m.clamp)
        hops = sum(m.hop_counts())
        print(f"{'fat tree k=' + str(k):>18} {m.n_nodes:>7} {m.n_links:>7} {n:>8} {tc * 1e3:>10.2f} {tc / hops * 1e9:>12.1f}")


if __name__ == "__main__":
    main()
