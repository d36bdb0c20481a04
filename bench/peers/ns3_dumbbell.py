#!/usr/bin/env python3
"""Run one dumbbell scenario in ns-3 (PyPI package `ns3`) and print comparable figures.

    .venv/bin/python bench/peers/ns3_dumbbell.py --scenario A [--duration 10] [--json]

The driver starts a child Python process that builds and runs the simulation (one process
per run, so the peak RSS is that run's); the child times Simulator::Run() alone with
time.perf_counter. Instrumentation is compiled C++ (cppyy.cppdef), never a Python callback,
so it does not slow the simulator down measurably:
  * bottleneck queue: time integral of the device queue's PacketsInQueue trace, the
    queue's own received counter, and drops counted from R1's traffic-control layer
    (TcDrop: with no queue disc, a full device queue is stopped and the traffic-control
    layer drops what arrives while it is stopped) plus the queue's own drops;
  * delivered data packets: the receivers' PointToPointNetDevice MacRx trace, counting
    packets larger than 200 bytes (every data packet is 1500 IP bytes, every ACK < 100);
  * goodput: PacketSink::GetTotalRx() (bytes handed to the application);
  * sender diagnostics: each socket's Tx and CongState traces (data segments sent,
    retransmitted segments, retransmission timeouts).
If the `ns3` package is not importable by this Python, the child is started with the
project venv's Python (<repo>/.venv) when that one has it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CHILD_MARK = "NS3RESULT "

# Loss recovery: ns-3's default is TcpPrrRecovery; TcpClassicRecovery (RFC 5681/6675 style
# window inflation) is the default here because ns-2 has no PRR. --recovery prr switches.
RECOVERY_TYPES = {"classic": "ns3::TcpClassicRecovery", "prr": "ns3::TcpPrrRecovery"}
SOCKET_TYPES = {"newreno": "ns3::TcpNewReno", "cubic": "ns3::TcpCubic"}
DATA_PKT_THRESHOLD = 200                    # bytes at MacRx (PPP header included)

CPP_HELPERS = r"""
#include <cstdint>
#include <string>
#include <vector>
namespace mfpeer {
using namespace ns3;

// Time-average of a queue's packet count, integrated exactly from its PacketsInQueue trace.
class QueueIntegrator {
  public:
    int64_t lastNs = 0;
    uint32_t lastQ = 0;
    long double integral = 0;  // packet * ns
    uint64_t changes = 0;
    uint32_t maxQ = 0;
    void Changed(uint32_t, uint32_t newValue) {
        if (newValue > maxQ) { maxQ = newValue; }
        int64_t now = Simulator::Now().GetNanoSeconds();
        integral += (long double)lastQ * (long double)(now - lastNs);
        lastNs = now;
        lastQ = newValue;
        ++changes;
    }
    double Integral(int64_t endNs) const {
        return (double)((integral + (long double)lastQ * (long double)(endNs - lastNs)) / 1e9L);
    }
};

class RxCounter {
  public:
    uint64_t pkts = 0;
    uint32_t threshold = 200;
    void Rx(Ptr<const Packet> p) { if (p->GetSize() >= threshold) { ++pkts; } }
};

Ptr<Queue<Packet>> DeviceQueue(Ptr<NetDevice> dev) {
    return DynamicCast<PointToPointNetDevice>(dev)->GetQueue();
}

bool SetDeviceQueuePackets(Ptr<NetDevice> dev, uint32_t pkts) {
    Ptr<Queue<Packet>> q = DeviceQueue(dev);
    q->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, pkts));
    return q->GetMaxSize().GetValue() == pkts;
}

bool ConnectQueue(Ptr<NetDevice> dev, QueueIntegrator* qi) {
    return DeviceQueue(dev)->TraceConnectWithoutContext(
        "PacketsInQueue", MakeCallback(&QueueIntegrator::Changed, qi));
}

// With no queue disc, a full device queue is *stopped* (NetDeviceQueueInterface flow
// control) and the traffic-control layer drops further packets itself ("TcDrop"): the
// bottleneck's drops are counted there (R1's other queues never fill).
class DropCounter {
  public:
    uint64_t pkts = 0;
    void Drop(Ptr<const Packet>) { ++pkts; }
};

bool ConnectTcDrop(Ptr<Node> node, DropCounter* c) {
    return node->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
        "TcDrop", MakeCallback(&DropCounter::Drop, c));
}

bool ConnectRx(Ptr<NetDevice> dev, RxCounter* c) {
    return dev->TraceConnectWithoutContext("MacRx", MakeCallback(&RxCounter::Rx, c));
}

// Sender-side diagnostics, from the socket's Tx trace (every segment TCP sends) and its
// CongState trace: data segments sent, retransmitted segments (sequence number below the
// highest one already sent, as ns-2 counts them) and retransmission timeouts (entries
// into CA_LOSS).
class SenderStats {
  public:
    uint64_t dataPkts = 0;
    uint64_t retx = 0;
    uint64_t rtos = 0;
    bool any = false;
    SequenceNumber32 highest;
    void Tx(Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>) {
        uint32_t len = p->GetSize();
        if (len == 0) { return; }
        ++dataPkts;
        SequenceNumber32 end = h.GetSequenceNumber() + len;
        if (any && h.GetSequenceNumber() < highest) { ++retx; }
        if (!any || end > highest) { highest = end; any = true; }
    }
    // The first timeouts' times (ns), to show repeated-timeout episodes.
    std::vector<int64_t> rtoTimes;
    void CongState(TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t now) {
        if (now == TcpSocketState::CA_LOSS) {
            ++rtos;
            if (rtoTimes.size() < 40) { rtoTimes.push_back(Simulator::Now().GetNanoSeconds()); }
        }
    }
    std::string RtoTimes() const {
        std::string out;
        for (auto t : rtoTimes) { out += std::to_string(t) + ","; }
        return out;
    }
};

// The socket exists only once the application has started: connect just after that.
void ConnectSenderNow(Ptr<Application> app, SenderStats* s) {
    Ptr<Socket> sock = DynamicCast<BulkSendApplication>(app)->GetSocket();
    NS_ABORT_MSG_IF(!sock, "BulkSendApplication has no socket yet");
    sock->TraceConnectWithoutContext("Tx", MakeCallback(&SenderStats::Tx, s));
    sock->TraceConnectWithoutContext("CongState", MakeCallback(&SenderStats::CongState, s));
}

void ConnectSenderAt(Ptr<Application> app, SenderStats* s, int64_t atNs) {
    Simulator::Schedule(NanoSeconds(atNs), &ConnectSenderNow, app, s);
}

uint64_t SinkTotalRx(Ptr<Application> app) {
    return DynamicCast<PacketSink>(app)->GetTotalRx();
}

// Bernoulli loss of packets arriving at `dev` (R2's end of the bottleneck: data only), each drop
// counted from the device's PhyRxDrop trace.
bool AddLoss(Ptr<NetDevice> dev, double p, DropCounter* c) {
    Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
    em->SetRate(p);
    em->SetUnit(RateErrorModel::ERROR_UNIT_PACKET);
    dev->SetAttribute("ReceiveErrorModel", PointerValue(em));
    return dev->TraceConnectWithoutContext("PhyRxDrop", MakeCallback(&DropCounter::Drop, c));
}

// The counters at the end of the warm-up, to report [warmup, end] alone.
class Warmup {
  public:
    Ptr<NetDevice> dev;
    QueueIntegrator* qi = nullptr;
    DropCounter* tc = nullptr;
    DropCounter* rnd = nullptr;
    std::vector<Ptr<Application>> sinks;
    std::vector<SenderStats*> senders;
    bool done = false;
    uint64_t enq = 0, drops = 0, rndDrops = 0, bytes = 0, retx = 0;
    double qint = 0;
    void AddSink(Ptr<Application> a) { sinks.push_back(a); }
    void AddSender(SenderStats* s) { senders.push_back(s); }
    void Take() {
        Ptr<Queue<Packet>> q = DeviceQueue(dev);
        enq = q->GetTotalReceivedPackets();
        drops = q->GetTotalDroppedPacketsBeforeEnqueue() + q->GetTotalDroppedPacketsAfterDequeue() + tc->pkts;
        rndDrops = rnd->pkts;
        qint = qi->Integral(Simulator::Now().GetNanoSeconds());
        bytes = 0;
        for (auto& a : sinks) { bytes += DynamicCast<PacketSink>(a)->GetTotalRx(); }
        retx = 0;
        for (auto* st : senders) { retx += st->retx; }
        done = true;
    }
    void At(int64_t ns) { Simulator::Schedule(NanoSeconds(ns), &Warmup::Take, this); }
};

bool HasRootQueueDisc(Ptr<NetDevice> dev) {
    Ptr<TrafficControlLayer> tc = dev->GetNode()->GetObject<TrafficControlLayer>();
    return tc && tc->GetRootQueueDiscOnDevice(dev);
}
}  // namespace mfpeer
"""


def _have_ns3(python: str) -> bool:
    if python == sys.executable:
        return importlib.util.find_spec("ns") is not None and \
            importlib.util.find_spec("ns3") is not None
    r = subprocess.run([python, "-c", "import importlib.util as u, sys; "
                        "sys.exit(0 if u.find_spec('ns3') else 1)"], capture_output=True)
    return r.returncode == 0


def pick_python() -> str:
    if _have_ns3(sys.executable):
        return sys.executable
    venv_py = REPO / ".venv" / "bin" / "python"
    if venv_py.exists() and _have_ns3(str(venv_py)):
        return str(venv_py)
    C.die("the ns-3 Python bindings are not installed (PyPI package `ns3`, imported as "
          "`from ns import ns`). Install them with `bash bench/peers/install.sh` or "
          "`.venv/bin/pip install ns3`, then run this script with .venv/bin/python.")
    raise AssertionError


# ------------------------------------------------------------------------------------------
# child: build and run the simulation, print one NS3RESULT line
# ------------------------------------------------------------------------------------------
def child(sc: C.Scenario, seed: int, stagger: bool, recovery: str) -> None:
    try:
        from ns import ns  # noqa: F401  (cppyy loads every ns-3 module: takes seconds)
    except Exception as e:  # pragma: no cover - depends on the installation
        print(f"error: cannot import the ns-3 Python bindings: {e!r}", file=sys.stderr)
        raise SystemExit(3)
    cppyy = ns.cppyy
    cppyy.cppdef(CPP_HELPERS)
    mf = cppyy.gbl.mfpeer

    # ---- global TCP / queue configuration --------------------------------------------
    sd = ns.Config.SetDefault
    sd("ns3::TcpL4Protocol::SocketType", ns.StringValue(SOCKET_TYPES[sc.tcp]))
    if sc.tcp == "cubic":
        sd("ns3::TcpCubic::HyStart", ns.BooleanValue(False))  # ns-2's Linux CUBIC and ours have none
    sd("ns3::TcpL4Protocol::RecoveryType", ns.StringValue(recovery))
    sd("ns3::TcpSocket::SegmentSize", ns.UintegerValue(C.MSS_BYTES))
    sd("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(C.INITIAL_CWND_SEGMENTS))
    sd("ns3::TcpSocket::DelAckCount", ns.UintegerValue(C.DELACK_COUNT if sc.delack else 1))
    sd("ns3::TcpSocket::DelAckTimeout",
       ns.TimeValue(ns.MilliSeconds(int(round(C.DELACK_TIMEOUT_S * 1000)))))
    sd("ns3::TcpSocket::SndBufSize", ns.UintegerValue(C.SOCKET_BUFFER_BYTES))
    sd("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(C.SOCKET_BUFFER_BYTES))
    sd("ns3::TcpSocket::TcpNoDelay", ns.BooleanValue(True))
    sd("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))
    sd("ns3::TcpSocketBase::Timestamp", ns.BooleanValue(True))
    sd("ns3::TcpSocketBase::WindowScaling", ns.BooleanValue(True))
    sd("ns3::TcpSocketBase::LimitedTransmit", ns.BooleanValue(True))
    sd("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MilliSeconds(int(round(C.MIN_RTO_S * 1000)))))
    sd("ns3::TcpSocketBase::ClockGranularity",
       ns.TimeValue(ns.MilliSeconds(int(round(C.CLOCK_GRANULARITY_S * 1000)))))
    sd("ns3::TcpSocketBase::UseEcn", ns.StringValue("Off"))
    sd("ns3::TcpSocketState::EnablePacing", ns.BooleanValue(False))
    # every device queue (access links) effectively unbounded; the bottleneck is set below
    sd("ns3::DropTailQueue<Packet>::MaxSize", ns.StringValue(f"{C.ACCESS_QUEUE_PKTS}p"))
    ns.RngSeedManager.SetSeed(seed)
    ns.RngSeedManager.SetRun(1)

    # ---- topology ----------------------------------------------------------------------
    n = sc.n_flows
    senders = ns.NodeContainer()
    senders.Create(n)
    receivers = ns.NodeContainer()
    receivers.Create(n)
    routers = ns.NodeContainer()
    routers.Create(2)
    r1, r2 = routers.Get(0), routers.Get(1)

    access = ns.PointToPointHelper()
    access.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(sc.access_bps))))
    bottle = ns.PointToPointHelper()
    bottle.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(sc.bottleneck_bps))))
    bottle.SetChannelAttribute("Delay", ns.TimeValue(ns.NanoSeconds(int(round(sc.bottleneck_delay_s * 1e9)))))

    stack = ns.InternetStackHelper()
    stack.Install(senders)
    stack.Install(receivers)
    stack.Install(routers)

    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.0"))
    all_devs = []
    bn_devs = bottle.Install(r1, r2)             # device 0 on R1 -> the bottleneck queue
    addr.Assign(bn_devs)
    addr.NewNetwork()
    all_devs.append(bn_devs)
    recv_addrs = []
    recv_devs = []
    for i, delay in enumerate(sc.delays()):
        access.SetChannelAttribute("Delay", ns.TimeValue(ns.NanoSeconds(int(round(delay * 1e9)))))
        d = access.Install(senders.Get(i), r1)
        addr.Assign(d)
        addr.NewNetwork()
        all_devs.append(d)
        d = access.Install(r2, receivers.Get(i))
        ifc = addr.Assign(d)
        addr.NewNetwork()
        all_devs.append(d)
        recv_addrs.append(ifc.GetAddress(1))
        recv_devs.append(d.Get(1))
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    # No traffic-control queue discs anywhere (Ipv4AddressHelper::Assign installs the
    # default one): each device's own DropTailQueue is the only queue, as in ns-2.
    tch = ns.TrafficControlHelper()
    for d in all_devs:
        for k in range(d.GetN()):
            if mf.HasRootQueueDisc(d.Get(k)):
                tch.Uninstall(d.Get(k))
            assert not mf.HasRootQueueDisc(d.Get(k))
    bn_dev = bn_devs.Get(0)
    for k in range(2):
        assert mf.SetDeviceQueuePackets(bn_devs.Get(k), sc.queue_pkts)

    # ---- applications ----------------------------------------------------------------------
    starts = C.start_times(sc, seed, stagger)
    port = 5000
    sink_apps = []
    send_apps = []
    for i in range(n):
        sink_helper = ns.PacketSinkHelper(
            "ns3::TcpSocketFactory",
            ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
        sa = sink_helper.Install(receivers.Get(i))
        sa.Start(ns.Seconds(0.0))
        sink_apps.append(sa)
        bulk = ns.BulkSendHelper("ns3::TcpSocketFactory",
                                 ns.InetSocketAddress(recv_addrs[i], port).ConvertTo())
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        bulk.SetAttribute("SendSize", ns.UintegerValue(C.MSS_BYTES))
        ba = bulk.Install(senders.Get(i))
        ba.Start(ns.NanoSeconds(int(round(starts[i] * 1e9))))
        send_apps.append(ba)

    # ---- instrumentation (C++) ------------------------------------------------------------
    qi = mf.QueueIntegrator()
    assert mf.ConnectQueue(bn_dev, qi)
    tc_drops = mf.DropCounter()
    assert mf.ConnectTcDrop(r1, tc_drops)
    random_drops = mf.DropCounter()
    if sc.loss > 0:
        assert mf.AddLoss(bn_devs.Get(1), sc.loss, random_drops)
    counters = []
    for dev in recv_devs:
        c = mf.RxCounter()
        c.threshold = DATA_PKT_THRESHOLD
        assert mf.ConnectRx(dev, c)
        counters.append(c)

    sender_stats = []
    for i, ba in enumerate(send_apps):
        st = mf.SenderStats()
        mf.ConnectSenderAt(ba.Get(0), st, int(round(starts[i] * 1e9)) + 1)
        sender_stats.append(st)

    warm = mf.Warmup()
    if sc.warmup_s > 0:
        warm.dev, warm.qi, warm.tc, warm.rnd = bn_dev, qi, tc_drops, random_drops
        for sa in sink_apps:
            warm.AddSink(sa.Get(0))
        for st in sender_stats:
            warm.AddSender(st)
        warm.At(int(round(sc.warmup_s * 1e9)))

    end_ns = int(round(sc.duration_s * 1e9))
    ns.Simulator.Stop(ns.NanoSeconds(end_ns))
    setup_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    ns.Simulator.Run()
    wall = time.perf_counter() - t0

    now_s = ns.Simulator.Now().GetSeconds()
    events = int(ns.Simulator.GetEventCount())
    q = mf.DeviceQueue(bn_dev)
    enq = int(q.GetTotalReceivedPackets())
    drops = int(q.GetTotalDroppedPacketsBeforeEnqueue())
    drops_after = int(q.GetTotalDroppedPacketsAfterDequeue())
    flow_bytes = [int(mf.SinkTotalRx(sa.Get(0))) for sa in sink_apps]
    app_bytes = sum(flow_bytes)
    delivered = sum(int(c.pkts) for c in counters)
    out = {
        "now_s": now_s,
        "wall_run_s": wall,
        "events": events,
        "enqueued": enq,
        "drops": drops + drops_after + int(tc_drops.pkts) + int(random_drops.pkts),
        "random_drops": int(random_drops.pkts),
        "flow_bytes": flow_bytes,
        "tc_drops": int(tc_drops.pkts),
        "queue_drops": drops + drops_after,
        "queue_integral_pkt_s": float(qi.Integral(end_ns)),
        "queue_changes": int(qi.changes),
        "max_queue": int(qi.maxQ),
        "app_bytes": app_bytes,
        "sender_retx": sum(int(st.retx) for st in sender_stats),
        "sender_data": sum(int(st.dataPkts) for st in sender_stats),
        "sender_rtos": sum(int(st.rtos) for st in sender_stats),
        "flow_rtos": [int(st.rtos) for st in sender_stats],
        "rto_times_ns": [[int(x) for x in str(st.RtoTimes()).split(",") if x] for st in sender_stats],
        "delivered": delivered,
        "setup_rss_kb": setup_rss_kb,
        "version": ns3_version(),
        "starts": starts,
    }
    if warm.done:
        out["warm"] = {"enq": int(warm.enq), "drops": int(warm.drops), "rnd": int(warm.rndDrops),
                       "qint": float(warm.qint), "bytes": int(warm.bytes), "retx": int(warm.retx)}
    ns.Simulator.Destroy()
    print(CHILD_MARK + json.dumps(out), flush=True)


def ns3_version() -> str:
    try:
        from importlib.metadata import version
        return f"ns-3 (PyPI ns3 {version('ns3')})"
    except Exception:
        return "ns-3"


# ------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------
def main() -> None:
    ap = C.base_arg_parser(__doc__.splitlines()[0])
    ap.add_argument("--recovery", choices=sorted(RECOVERY_TYPES), default="classic",
                    help="loss recovery: classic = ns3::TcpClassicRecovery (default), "
                         "prr = ns3::TcpPrrRecovery (ns-3's own default)")
    ap.add_argument("--_child", action="store_true", help="internal: run the simulation here")
    args = ap.parse_args()
    sc = C.scenario_from_args(args)

    if args._child:
        child(sc, args.seed, args.stagger, RECOVERY_TYPES[args.recovery])
        return

    python = pick_python()
    cmd = [python, str(Path(__file__).resolve()), "--_child", "--scenario", args.scenario,
           "--duration", repr(sc.duration_s), "--seed", str(args.seed),
           "--recovery", args.recovery]
    if not args.stagger:
        cmd.append("--no-stagger")
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    run = C.run_child(cmd, env=env)
    line = next((l for l in run.stdout.splitlines() if l.startswith(CHILD_MARK)), None)
    if run.returncode != 0 or line is None:
        err = "\n".join(l for l in run.stderr.splitlines()
                        if "Failed to materialize symbols" not in l)
        C.die(f"ns-3 child exited with {run.returncode}\ncommand: {' '.join(cmd)}\n"
              f"stdout:\n{run.stdout[-3000:]}\nstderr:\n{err[-3000:]}", 1)
    r = json.loads(line[len(CHILD_MARK):])

    wall = r["wall_run_s"]
    arrivals = r["enqueued"] + r["drops"] - r["random_drops"]  # randomly dropped ones were enqueued
    goodput = r["app_bytes"] * 8.0 / sc.duration_s
    after = None
    if "warm" in r:
        w, span = r["warm"], sc.duration_s - sc.warmup_s
        dr = r["drops"] - w["drops"] - w["rnd"]
        arr = r["enqueued"] - w["enq"] + (r["drops"] - r["random_drops"] - w["drops"])
        after = {"warmup_s": sc.warmup_s, "loss_ratio": round(dr / arr, 8) if arr else 0.0,
                 "mean_queue_pkts": round((r["queue_integral_pkt_s"] - w["qint"]) / span, 4),
                 "goodput_bps": round((r["app_bytes"] - w["bytes"]) * 8.0 / span, 1),
                 "rexmit_pkts": r["sender_retx"] - w["retx"]}
    result = C.Result(
        simulator="ns-3",
        simulator_version=r["version"],
        scenario=sc.name,
        n_flows=sc.n_flows,
        sim_seconds=r["now_s"],
        wall_seconds=round(wall, 6),
        wall_clock_scope="Simulator::Run() only, perf_counter in the child",
        delivered_data_pkts=r["delivered"],
        delivered_pkts_per_wall_s=round(r["delivered"] / wall, 1) if wall > 0 else None,
        app_delivered_pkts=r["app_bytes"] // C.MSS_BYTES,
        events=r["events"],
        events_per_wall_s=round(r["events"] / wall, 1) if wall > 0 else None,
        peak_rss_mb=round(run.maxrss_kb / 1024.0, 1),
        goodput_bps=round(goodput, 1),
        goodput_utilization=round(goodput / sc.bottleneck_bps, 6),
        bottleneck_arrivals=arrivals,
        bottleneck_drops=r["drops"],
        loss_ratio=round(r["drops"] / arrivals, 8) if arrivals else 0.0,
        mean_queue_pkts=round(r["queue_integral_pkt_s"] / r["now_s"], 4),
        seed=args.seed,
        stagger=args.stagger,
        after_warmup=after,
        extra={
            "tcp": f"{SOCKET_TYPES[sc.tcp]}{' (HyStart off)' if sc.tcp == 'cubic' else ''} + "
                   f"{RECOVERY_TYPES[args.recovery]}, SACK, timestamps, DelAckCount {C.DELACK_COUNT if sc.delack else 1}",
            "flow_goodput_bps": [round(b * 8.0 / sc.duration_s, 1) for b in r["flow_bytes"]],
            "drops_random": r["random_drops"],
            "setup_rss_mb": round(r["setup_rss_kb"] / 1024.0, 1),
            "child_process_wall_s": round(run.wall_seconds, 3),
            "queue_trace_changes": r["queue_changes"],
            "max_queue_pkts": r["max_queue"],
            "sender_data_pkts": r["sender_data"],
            "sender_rexmit_pkts": r["sender_retx"],
            "sender_rtos": r["sender_rtos"],
            "flow_rtos": r["flow_rtos"],
            "first_rto_times_s": [[round(t / 1e9, 4) for t in ts] for ts in r["rto_times_ns"]],
            "drops_tc_layer": r["tc_drops"],
            "drops_device_queue": r["queue_drops"],
            "start_times_s": r["starts"],
        },
    )
    C.emit(result, args.json)


if __name__ == "__main__":
    main()
