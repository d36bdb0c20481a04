# ns-2 dumbbell benchmark (peer of the macroflow packet simulator).
#
# Usage: ns ns2_dumbbell.tcl key=value ...   (normally run by ns2_dumbbell.py, which passes
# every parameter explicitly; the defaults below are scenario A).
#
# N senders -> R1 -> bottleneck -> R2 -> N receivers, one bulk FTP/TCP flow per pair.
# Nothing is written to trace files: all figures come from in-memory counters
# (a QueueMonitor with a packet integrator on the bottleneck queue, a counting monitor
# on each R2->receiver link, and the sinks' bytes_ counters), so the measured wall time is
# the simulator's own. Prints one line "RESULT key value key value ..." at the end.

array set P {
    n        2
    bw       10000000
    bdelay   0.048
    abw      1000000000
    adelays  0.001,0.001
    qlim     84
    aqlim    100000
    dur      300
    seed     1
    starts   0,0
    variant  sack1
    delackon 1
    loss     0
    warmup   0
    mss      1448
    hdr      40
    tsopt    12
    ackhdr   52
    iw       10
    wnd      5793
    minrto   0.2
    tick     0.001
    delack   0.2
}
foreach a $argv {
    set i [string first = $a]
    if {$i < 1} { puts stderr "bad argument '$a' (want key=value)"; exit 2 }
    set k [string range $a 0 [expr {$i - 1}]]
    if {![info exists P($k)]} { puts stderr "unknown parameter '$k'"; exit 2 }
    set P($k) [string range $a [expr {$i + 1}] end]
}
set starts [split $P(starts) ,]
if {[llength $starts] != $P(n)} { puts stderr "starts must list $P(n) times"; exit 2 }
set adelays [split $P(adelays) ,]
if {[llength $adelays] != $P(n)} { puts stderr "adelays must list $P(n) delays"; exit 2 }

# cubic: ns-2's Linux TCP (Agent/TCP/Linux, the kernel's congestion-control modules run
# unchanged; here tcp_cubic) with a SACK sink.
switch -- $P(variant) {
    sack1   { set tcpClass Agent/TCP/Sack1;   set sinkClass Agent/TCPSink/Sack1 }
    newreno { set tcpClass Agent/TCP/Newreno; set sinkClass Agent/TCPSink }
    cubic   { set tcpClass Agent/TCP/Linux;   set sinkClass Agent/TCPSink/Sack1 }
    default { puts stderr "variant must be sack1, newreno or cubic"; exit 2 }
}
if {$P(delackon)} { set sinkClass $sinkClass/DelAck }

# ---- TCP configuration (class defaults, so every agent gets them) ----
# Data packet = packetSize_ (payload, the MSS) + tcpip_base_hdr_size_ (20 IP + 20 TCP)
# + ts_option_size_ (12: timestamp option padded to 4 bytes) = 1500 bytes on the link.
# ns-2 links add no link-layer header. (timestamps_ is the Tcl name of the C++ ts_option_:
# it both adds the option bytes and takes an RTT sample from every ACK's echoed timestamp.)
Agent/TCP set packetSize_ $P(mss)
Agent/TCP set tcpip_base_hdr_size_ $P(hdr)
Agent/TCP set timestamps_ true
Agent/TCP set ts_option_size_ $P(tsopt)
Agent/TCP set windowInit_ $P(iw)
Agent/TCP set windowInitOption_ 1
Agent/TCP set window_ $P(wnd)             ;# receiver window cap (packets): never the limit
Agent/TCP set maxcwnd_ 0
Agent/TCP set minrto_ $P(minrto)
Agent/TCP set tcpTick_ $P(tick)
Agent/TCP set maxburst_ 0                 ;# no burst limit
Agent/TCP set overhead_ 0                 ;# no random send jitter
Agent/TCP set ecn_ 0
Agent/TCPSink set packetSize_ $P(ackhdr)  ;# pure ACK size on the link
Agent/TCPSink set ts_echo_rfc1323_ true   ;# echo timestamps as RFC 7323 (Linux TCP needs it)
Agent/TCPSink/DelAck set interval_ $P(delack)
Agent/TCPSink/Sack1/DelAck set interval_ $P(delack)

set ns [new Simulator]
global defaultRNG
$defaultRNG seed $P(seed)

# ---- topology ----
set r1 [$ns node]
set r2 [$ns node]
$ns duplex-link $r1 $r2 $P(bw) $P(bdelay) DropTail
$ns queue-limit $r1 $r2 $P(qlim)
$ns queue-limit $r2 $r1 $P(qlim)

for {set i 0} {$i < $P(n)} {incr i} {
    set s($i) [$ns node]
    set d($i) [$ns node]
    set ad [lindex $adelays $i]
    $ns duplex-link $s($i) $r1 $P(abw) $ad DropTail
    $ns queue-limit $s($i) $r1 $P(aqlim)
    $ns queue-limit $r1 $s($i) $P(aqlim)
    $ns duplex-link $r2 $d($i) $P(abw) $ad DropTail
    $ns queue-limit $r2 $d($i) $P(aqlim)
    $ns queue-limit $d($i) $r2 $P(aqlim)
}

# ---- random loss (Mathis cases): on R1 -> R2 only (data), ahead of the queue ----
# `lossmodel` -> SimpleLink errormodule puts the model at the link's head and points its drop
# target at the link's drop trace, so the bottleneck QueueMonitor counts these drops too.
if {$P(loss) > 0} {
    set em [new ErrorModel]
    $em set rate_ $P(loss)
    $em unit pkt
    $em ranvar [new RandomVariable/Uniform]
    $ns lossmodel $em $r1 $r2
}

# ---- monitors ----
# Bottleneck: arrivals, drops, and the time integral of the number of packets waiting
# in R1's queue (the packet being serialized has left the queue, as in ns-3).
set qmon [$ns monitor-queue $r1 $r2 ""]
# Receivers: count packets leaving R2 towards each receiver (no integrators needed).
for {set i 0} {$i < $P(n)} {incr i} {
    set rmon($i) [new QueueMonitor]
    [$ns link $r2 $d($i)] attach-monitors [new SnoopQueue/In] [new SnoopQueue/Out] \
        [new SnoopQueue/Drop] $rmon($i)
}

# ---- flows ----
for {set i 0} {$i < $P(n)} {incr i} {
    set tcp($i) [new $tcpClass]
    $tcp($i) set fid_ $i
    set sink($i) [new $sinkClass]
    $ns attach-agent $s($i) $tcp($i)
    $ns attach-agent $d($i) $sink($i)
    $ns connect $tcp($i) $sink($i)
    set ftp($i) [new Application/FTP]
    $ftp($i) attach-agent $tcp($i)
    if {$P(variant) eq "cubic"} { $ns at 0 "$tcp($i) select_ca cubic" }
    $ns at [lindex $starts $i] "$ftp($i) start"
}

# Counters at the end of the warm-up (if any), to report [warmup, end] alone.
set W(done) 0
proc queue_integral {} {
    global ns qmon
    set pint [$qmon get-pkts-integrator]
    return [expr {[$pint set sum_] + [$pint set lasty_] * ([$ns now] - [$pint set lastx_])}]
}
proc totals {} {
    global P sink tcp
    set bytes 0
    set rexmit 0
    for {set i 0} {$i < $P(n)} {incr i} {
        incr bytes [$sink($i) set bytes_]
        incr rexmit [$tcp($i) set nrexmitpack_]
    }
    return [list $bytes $rexmit]
}
proc warmup {} {
    global W qmon
    set W(arr) [$qmon set parrivals_]
    set W(drop) [$qmon set pdrops_]
    set W(q) [queue_integral]
    lassign [totals] W(bytes) W(rexmit)
    set W(done) 1
}
if {$P(warmup) > 0} { $ns at $P(warmup) "warmup" }

proc finish {} {
    global ns P qmon rmon sink tcp t_run0 W
    set t_run [expr {([clock microseconds] - $t_run0) / 1e6}]
    set now [$ns now]
    set pint [$qmon get-pkts-integrator]
    set qsum [expr {[$pint set sum_] + [$pint set lasty_] * ($now - [$pint set lastx_])}]
    set meanq [expr {$qsum / $now}]
    set pktbytes [expr {$P(mss) + $P(hdr) + $P(tsopt)}]
    set delivered 0
    set app 0
    set rexmit 0
    set sent 0
    set rtos 0
    set flows {}
    for {set i 0} {$i < $P(n)} {incr i} {
        # every packet to a receiver is a data packet except the one header-only SYN
        # (seqno 0, syn_ true); packets still on the 1-access-link wire at the end
        # are counted as delivered.
        incr delivered [expr {[$rmon($i) set pdepartures_] - 1}]
        # sink bytes_: in-order bytes, counted with the on-link size of each packet
        # (1500 per data packet, plus the 40-byte SYN, which the integer division drops)
        set fp [expr {[$sink($i) set bytes_] / $pktbytes}]
        incr app $fp
        lappend flows $fp
        incr rexmit [$tcp($i) set nrexmitpack_]
        incr sent [$tcp($i) set ndatapack_]
        incr rtos [$tcp($i) set nrexmit_]
    }
    set after ""
    if {$W(done)} {
        set span [expr {$now - $P(warmup)}]
        lassign [totals] bytes rexmit_all
        set arr [expr {[$qmon set parrivals_] - $W(arr)}]
        set dr [expr {[$qmon set pdrops_] - $W(drop)}]
        set after [format " warm_arrivals %d warm_drops %d warm_mean_queue %.9f warm_app_pkts %d warm_rexmit %d" \
            $arr $dr [expr {([queue_integral] - $W(q)) / $span}] \
            [expr {($bytes - $W(bytes)) / $pktbytes}] [expr {$rexmit_all - $W(rexmit)}]]
    }
    puts [format "RESULT version %s now %.9f run_wall_s %.6f bottleneck_arrivals %d bottleneck_drops %d bottleneck_departures %d queue_integral %.9f mean_queue_pkts %.9f delivered_data_pkts %d app_delivered_pkts %d sender_data_pkts %d sender_rexmit_pkts %d sender_rtos %d flow_app_pkts %s" \
        [ns-version] $now $t_run [$qmon set parrivals_] [$qmon set pdrops_] \
        [$qmon set pdepartures_] $qsum $meanq $delivered $app $sent $rexmit $rtos [join $flows ,]]$after
    flush stdout
    exit 0
}

$ns at $P(dur) "finish"
set t_run0 [clock microseconds]
$ns run
