"""TCP-in-UDP (TiU, issue 17) on the running kernel: coupled connections forced onto one path.

Each TCP segment of a connection that rides TiU leaves as a UDP datagram on one port pair per host
pair (the TiU port at both ends), its ports replaced by a 5-bit Connection ID, so ECMP and LAG hash
every coupled connection between two hosts onto one path (seed 003 sec. 9.4, the TCP-CCC draft
Figs. 1-3). The programs are ``bpf/tiu_tc.bpf.c`` (tc egress and ingress, and a cgroup sock_ops
program for the TiU-Setup option); the loader is ``crates/tiu-bpf``.

Root only. Typical use::

    from macroflow import tiu
    tiu.enable(["eth0"])                      # both ends of a path, the same port (default 8899)
    tiu.rule_add("10.0.0.0/8")                # connect()s to 10/8 ride TiU (an ID per host pair)
    print(tiu.format_status(tiu.status()))
    tiu.disable()

Which connections: a rule (the longest matching destination prefix; optionally a destination port
range and a socket mark, SO_MARK, for choosing per socket), or ``tiu=False`` for an exception.
Incoming TiU connections are learned from their SYNs. A connection whose peer has no TiU, or whose
path drops the UDP port, falls back to plain TCP at once (happy eyeballs: its SYN goes as TiU and
raw; the first answer decides). A 33rd connection to a host while 32 hold IDs runs plain TCP.

Grouping follows: ``macroflow_ccc`` reads TiU's connections map, so by default the connections TiU
carries between two hosts are one ctrlTCP group (``tiu pair A -> B``) and the pair's plain TCP
connections (fallen back, ``never``, the 33rd) another (``pair A -> B``). Every key carries the
network namespace: the same addresses in two namespaces are two host pairs.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from macroflow import _native

PIN_DIR = "/sys/fs/bpf/macroflow_tiu"
DEFAULT_PORT = 8899

DeviceLike = Union[str, Tuple[Optional[str], str]]


def missing() -> Optional[str]:
    """Why this build cannot enable TiU (None: it can)."""
    return _native._tiu_missing()


def _devices(devices: Union[DeviceLike, Iterable[DeviceLike]]) -> List[Tuple[Optional[str], str]]:
    if isinstance(devices, (str, tuple)):
        devices = [devices]  # one device, not the characters of its name
    out = []
    for d in devices:
        if isinstance(d, str):
            ns, _, dev = d.rpartition(":")
            out.append((ns or None, dev))
        elif isinstance(d, tuple) and len(d) == 2 and isinstance(d[1], str) and (d[0] is None or isinstance(d[0], str)):
            out.append((d[0], d[1]))
        else:
            raise ValueError(f"a device is a name, 'NETNS:DEV' or (netns, dev), got {d!r}")
    return out


def enable(devices: Union[DeviceLike, Sequence[DeviceLike]], port: int = DEFAULT_PORT, cgroup: Optional[str] = None) -> List[Dict[str, Any]]:
    """Enables TiU on ``devices`` (names, ``"NETNS:DEV"`` or ``(netns, dev)``), loading and pinning
    the programs first if needed; ``cgroup``: whose sockets' handshakes carry the Setup option
    (default: the cgroup v2 root, every socket, when TiU is loaded now; when it is enabled already,
    the cgroups it serves stay as they are; a cgroup given then is added, unless it is inside or
    around one served already). Returns every device TiU runs on. Each
    device is checked, and its settings recorded for ``disable``, before anything changes."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be 1-65535, got {port}")
    return list(_native._tiu_enable(_devices(devices), port, cgroup))


def disable() -> Dict[str, Any]:
    """Takes TiU off every device (putting back the offloads and gso_max_segs it found), detaches
    ``tiu_sockops`` from its cgroups and removes the pins. Returns what it did: ``devices``,
    ``gone`` (nothing to detach), ``restored``, ``not_restored`` (why), ``rules`` (removed with
    the pins), ``cgroups``, ``connections`` (that were riding TiU)."""
    return dict(_native._tiu_disable())


def is_enabled() -> bool:
    return bool(_native._tiu_is_enabled())


def status() -> Dict[str, Any]:
    """The port, devices, rules, per host pair the port pair and ID table, and the counters."""
    return dict(_native._tiu_status())


def rule_add(prefix: str, ports: Optional[Tuple[int, int]] = None, mark: int = 0, tiu: bool = True) -> None:
    """Connections to ``prefix`` (and a port in ``ports``, and SO_MARK ``mark`` if not 0) ride
    TiU (``tiu=False``: never). Replaces the rule for the same prefix."""
    if ports is not None:
        if any(isinstance(p, bool) or not isinstance(p, int) for p in ports):
            raise ValueError(f"ports must be whole numbers, got {ports}")
        ports = tuple(ports)
    if ports is not None and (len(ports) != 2 or not (0 < ports[0] <= ports[1] < 65536)):
        raise ValueError(f"ports must be LO-HI within 1-65535, got {ports}")
    if isinstance(mark, bool) or not isinstance(mark, int) or not 0 <= mark < 2**32:
        raise ValueError(f"mark must be a 32-bit value, got {mark}")
    _native._tiu_rule_add(str(prefix), ports, int(mark), bool(tiu))


def rule_del(prefix: str) -> None:
    _native._tiu_rule_del(prefix)


def rules() -> List[Dict[str, Any]]:
    return list(_native._tiu_rules())


def format_rule(r: Dict[str, Any]) -> str:
    s = f"{r['prefix']}"
    if r["ports"]:
        s += f" ports {r['ports'][0]}-{r['ports'][1]}"
    if r["mark"]:
        s += f" mark {r['mark']:#x}"
    return s + (": TiU" if r["tiu"] else ": never TiU")


def format_status(st: Dict[str, Any]) -> str:
    lines = [f"TiU port {st['port']}; devices: "
             + (", ".join(d["dev"] + (f" (netns {d['netns']})" if d["netns"] else "") for d in st["devices"]) or "none")]
    lines.append("Setup option for sockets in: " + (", ".join(st.get("cgroups") or []) or "no cgroup"))
    lines.append("rules: " + ("; ".join(format_rule(r) for r in st["rules"]) or "none (only learned connections)"))
    for p in st["host_pairs"]:
        ns = f" (netns {p['netns']})" if p.get("netns") else ""
        lines.append(f"{p['local']} -> {p['peer']}{ns}: UDP {p['udp_ports'][0]} -> {p['udp_ports'][1]}, "
                     f"{len(p['connections'])} connections, {p['ids_held']} IDs held for the peer's segments")
        for c in p["connections"]:
            cid = "refused" if c["conn_id"] == 255 else f"ID {c['conn_id']:2d}"
            lines.append(f"  {cid}  TCP {c['local_port']} -> {c['peer_port']}  {c['state']}")
    c = st["counters"]
    lines.append("translated: out %d data + %d SYN, in %d data + %d SYN" % (c["eg_data"], c["eg_syn"], c["in_data"], c["in_syn"]))
    lines.append("fallen back: %d connections, %d segments sent plain; raw handshake copies %d sent, %d late copies dropped"
                 % (c["fallback"], c["eg_fallen_back"], c["eg_raw_copy"], c["in_dup_handshake"]))
    lines.append("IDs: %d allocated, %d connect()s found all 32 taken (plain TCP), %d collisions refused"
                 % (c["alloc"], c["alloc_full"], c["in_collision"]))
    lines.append("held for their TiU copy: %d raw SYNs and SYN-ACKs; %d TiU SYNs nothing listened for"
                 % (c["in_raw_syn_held"], c["in_no_listener"]))
    rejected = {k: v for k, v in c.items() if k in (
        "in_no_checksum", "in_unknown_id", "in_malformed", "in_error", "in_unfinished", "in_refused_syn",
        "eg_uncarried", "eg_no_setup", "eg_error", "in_not_tiu") and v}
    lines.append("rejected or passed untranslated: " + (", ".join(f"{k} {v}" for k, v in rejected.items()) or "none"))
    return "\n".join(lines)
