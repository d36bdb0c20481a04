"""ctrlTCP in the running kernel (issue 16): the BPF struct_ops congestion control ``macroflow_ccc``.

Connections that use it and share a group act as one aggregate (one window shared by priority, one
reduction per loss event, ack-clocked handover for joiners); each keeps the kernel's NewReno as its
own controller. The program is ``bpf/macroflow_ccc.bpf.c``; the loader is ``crates/ccc-bpf``.

Root only. Typical use::

    from macroflow import ccc
    ccc.load()                              # registers macroflow_ccc (pinned: survives this process)
    ccc.rule_add(prefix="10.0.0.0/8", group=1, priority=2)   # optional: group and priority by rule
    s = socket.socket(); ccc.use(s)         # per socket: setsockopt(TCP_CONGESTION)
    ccc.set_socket_priority(s, 3)           # the application's own priority for its socket
    print(ccc.format_status(ccc.status()))
    ccc.unload()

Enabling it:

- per socket: ``setsockopt(IPPROTO_TCP, TCP_CONGESTION, "macroflow_ccc")`` (:func:`use`);
- per route: ``ip route replace 10.0.0.0/24 dev eth0 congctl macroflow_ccc`` (``congctl lock``
  also overrides a socket's own choice);
- system-wide: ``sysctl -w net.ipv4.tcp_congestion_control=macroflow_ccc`` (every new connection
  of the network namespace, including every connection of the machine between the same two
  addresses coupled together: mind that).

Grouping: by default the connections between the same two addresses form a group (as in the
dissertation). Rules (tried in order; the first match decides) assign a group number and a
priority by remote prefix, remote port range and cgroup, or leave matching connections uncoupled.
An application's own setting (:func:`set_socket_priority`) overrides the rules for its socket.
"""

from __future__ import annotations

import os
import socket as _socket
from typing import Any, Dict, List, Optional, Tuple, Union

from macroflow import _native

CC_NAME = "macroflow_ccc"
PIN_DIR = "/sys/fs/bpf/macroflow_ccc"

SockLike = Union[_socket.socket, int]


def missing() -> List[str]:
    """What this machine lacks to load the program (empty: nothing)."""
    return list(_native._ccc_missing())


DEFAULT_STALE_S = 30


def load(handover: bool = True, max_burst_pkts: int = 0, stale_s: int = DEFAULT_STALE_S) -> Dict[str, Any]:
    """Loads and registers ``macroflow_ccc``; returns the pin directory and each operation's
    verified instruction count. Raises RuntimeError saying why when it cannot.

    ``stale_s``: a member not heard from (no report, no ACK of its data) for this long is taken
    out of its group by another member's ACK or a join (0: never); if its connection is alive (it was idle), it joins
    again at its next report. This is what removes a connection the kernel destroyed without
    calling ``release`` (seen about once in 50,000 connections on a loaded 2-core VM)."""
    if max_burst_pkts < 0:
        raise ValueError("max_burst_pkts must be >= 0")
    if not 0 <= stale_s <= 86400:
        raise ValueError(f"stale_s must be 0 (never) to 86400 seconds, got {stale_s}")
    return dict(_native._ccc_load(handover, max_burst_pkts, stale_s))


def unload() -> Dict[str, Any]:
    """Unregisters it: new sockets can no longer choose it; sockets using it keep it until they
    close. Returns how many connections were still coupled and which pins were removed."""
    return dict(_native._ccc_unload())


def is_loaded() -> bool:
    return bool(_native._ccc_is_loaded())


def status() -> Dict[str, Any]:
    """Groups (each read under its lock) with their members, the counters, and the rules."""
    return dict(_native._ccc_status())


def gc(min_idle_s: float = 10.0) -> int:
    """Deletes the groups that have been empty for at least ``min_idle_s`` seconds (the program
    keeps an emptied group for the next connection of its key; the groups map holds 4096);
    returns how many."""
    return int(_native._ccc_gc(float(min_idle_s)))


def _cgroup_id(cgroup: Union[str, os.PathLike, int, None]) -> Optional[int]:
    if cgroup is None or isinstance(cgroup, int):
        return cgroup
    path = os.fspath(cgroup)
    if not path.startswith("/"):
        path = os.path.join("/sys/fs/cgroup", path)
    if not os.path.isdir(path):
        raise ValueError(f"no cgroup directory {path}")
    return os.stat(path).st_ino  # a cgroup v2 id is its directory's inode number


def rule_add(prefix: Optional[str] = None, ports: Optional[Tuple[int, int]] = None,
             cgroup: Union[str, os.PathLike, int, None] = None, group: Optional[int] = None,
             priority: float = 1.0, uncoupled: bool = False) -> int:
    """Appends a rule; returns its index. ``prefix`` is the remote address's (``10.0.0.0/8``),
    ``ports`` the remote port range, ``cgroup`` a cgroup v2 path (relative to /sys/fs/cgroup) or
    id, ``group`` a group number (None: the address pair's group)."""
    return int(_native._ccc_rule_add(prefix, ports, _cgroup_id(cgroup), group, float(priority), uncoupled))


def rules() -> List[Dict[str, Any]]:
    return list(_native._ccc_rules())


def rule_del(index: int) -> Dict[str, Any]:
    """Deletes rule ``index`` (the later ones move up); returns it."""
    if index < 0:
        raise ValueError("rule indices start at 0")
    return dict(_native._ccc_rule_del(index))


def _fd(sock: SockLike) -> int:
    return sock if isinstance(sock, int) else sock.fileno()


def use(sock: SockLike) -> None:
    """Makes the socket use ``macroflow_ccc`` (``setsockopt(TCP_CONGESTION)``)."""
    s = sock if isinstance(sock, _socket.socket) else _socket.socket(fileno=os.dup(sock))
    try:
        s.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_CONGESTION, CC_NAME.encode())
    finally:
        if s is not sock:
            s.close()


def set_socket_priority(sock: SockLike, priority: float, group: Optional[int] = None,
                        handover: Optional[bool] = None) -> None:
    """The application's own priority for its socket (and, set before connect, its group and
    whether a group it creates uses handover): written to the socket's storage in a pinned map,
    read by the program when the connection starts and at its next report after a change."""
    _native._ccc_set_socket(_fd(sock), float(priority), group, handover)


def format_status(st: Dict[str, Any]) -> str:
    """``status()`` as text: groups with their members, then the counters that are not zero."""
    c = st.get("config")
    lines = ["loaded with: " + (f"handover {'on' if c['handover'] else 'off'} by default, burst limit "
                                f"{c['max_burst_pkts'] or 'none'}, stale after "
                                + (f"{c['stale_s']} s" if c["stale_s"] else "never")
                                if c else "settings unknown (loaded by an older build)")]
    if not [g for g in st["groups"] if g["members"]]:
        lines.append("no coupled connection")
    names = [g["name"] for g in st["groups"]]
    for g in st["groups"]:
        # The same address pair in two network namespaces is two groups: told apart by cookie.
        if names.count(g["name"]) > 1 and g.get("netns"):
            g = {**g, "name": f"{g['name']} (netns cookie {g['netns']})"}
        if not g["members"]:
            lines.append(f"{g['name']}: empty for {g['empty_for_s'] or 0:.1f} s (`macroflow linux gc` deletes idle groups)")
            continue
        lines.append(f"{g['name']}: {len(g['members'])} connections, sum_cwnd {g['sum_cwnd_pkts']} pkts, "
                     f"sum_ssthresh {g['sum_ssthresh_pkts']}, sum of priorities {g['sum_priority']:g}, "
                     f"CoCo {g['coco']}, loss event {g['loss_event']}, reductions {g['reductions']}")
        for m in g["members"]:
            flags = "".join([" CoCo" if m["coordinating"] else "", " handover" if m["in_handover"] else "",
                             " timed-out" if m["timed_out"] else ""])
            lines.append(f"  conn {m['conn']}: priority {m['priority']:g} cwnd {m['cwnd_pkts']} "
                         f"ssthresh {m['ssthresh_pkts']} {m['state']}{flags}, last heard from {m['idle_s']} s ago")
        for bad in g["inconsistencies"]:
            lines.append(f"  INCONSISTENT: {bad}")
    lines.append("rules: " + ("none (groups by address pair, priority 1)" if not st["rules"] else ""))
    for r in st["rules"]:
        lines.append("  " + format_rule(r))
    nonzero = {k: v for k, v in st["stats"].items() if v}
    lines.append("counters: " + (", ".join(f"{k} {v}" for k, v in nonzero.items()) or "all zero"))
    return "\n".join(lines)


def format_rule(r: Dict[str, Any]) -> str:
    match = [f"to {r['prefix']}" if r["prefix"] else None,
             f"ports {r['ports'][0]}-{r['ports'][1]}" if r["ports"] else None,
             f"cgroup {r['cgroup_id']}" if r["cgroup_id"] else None]
    what = "uncoupled" if r["uncoupled"] else (f"group {r['group']}" if r["group"] else "its address pair's group")
    return f"{r['index']}: {' '.join(m for m in match if m) or 'any connection'} -> {what}, priority {r['priority']:g}"
