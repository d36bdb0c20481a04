//! `libmacroflow_fse`: the C client library of `macroflowd`. It wraps the blocking Rust client
//! [`fsed::client::Client`] behind the C ABI that `include/macroflow_fse.h` declares and
//! documents (the header is the specification; this file follows it).
//!
//! Every exported function catches panics ([`std::panic::catch_unwind`]) so none crosses the
//! boundary (a panic becomes [`MF_FSE_ERR_INTERNAL`]), checks every pointer before use (NULL is
//! [`MF_FSE_ERR_BAD_ARGUMENT`]) and records the call's error in the client (or, without a
//! client, in a thread-local) for `mf_fse_last_error`, `mf_fse_error_field` and
//! `mf_fse_error_message`.
//!
//! The structs below are `#[repr(C)]` mirrors of the header's; the C test
//! (`tests/c/test_client.c`) prints the C sizes and offsets and `tests/c_client.rs` compares
//! them with these.

#![allow(non_camel_case_types)]

use fsed::client::{Client, ClientError};
use fsed::proto::{GroupSpec, RateAlgorithm, WindowState, MAX_LABEL_BYTES};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// Success.
pub const MF_FSE_OK: c_int = 0;
/// The socket failed.
pub const MF_FSE_ERR_IO: c_int = -1;
/// The daemon refused the request (nothing changed).
pub const MF_FSE_ERR_DAEMON: c_int = -2;
/// The daemon sent something this library does not understand.
pub const MF_FSE_ERR_PROTOCOL: c_int = -3;
/// A NULL pointer, a bad enum value, a label that is not UTF-8 or too long; nothing was sent.
pub const MF_FSE_ERR_BAD_ARGUMENT: c_int = -4;
/// A panic inside the library, caught at the boundary.
pub const MF_FSE_ERR_INTERNAL: c_int = -5;

/// `mf_fse_group.kind` values.
pub const MF_FSE_GROUP_FGI: c_int = 0;
pub const MF_FSE_GROUP_LABEL: c_int = 1;
pub const MF_FSE_GROUP_FIVE_TUPLE: c_int = 2;

/// The size of `mf_fse_group_info.coupler`, NUL included.
pub const MF_FSE_COUPLER_NAME_LEN: usize = 32;

/// A five-tuple and DSCP (addresses 16 bytes, IPv4 as IPv4-mapped IPv6; ports in host order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mf_fse_five_tuple {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
    pub dscp: u8,
}

/// A flow group, tagged by `kind`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mf_fse_group {
    pub kind: c_int,
    pub fgi: u64,
    pub label: *const c_char,
    pub five_tuple: mf_fse_five_tuple,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mf_fse_registered {
    pub flow: u64,
    pub group: u64,
    pub rate_bps: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mf_fse_registered_window {
    pub flow: u64,
    pub group: u64,
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mf_fse_window {
    pub set: c_int,
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mf_fse_flow_info {
    pub flow: u64,
    pub group: u64,
    pub priority: f64,
    pub effective_priority: f64,
    pub rate_or_cwnd: f64,
    pub desired_rate_bps: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mf_fse_group_info {
    pub group: u64,
    pub sum_calculated: f64,
    pub leftover: f64,
    pub flow_count: u32,
    pub coupler: [c_char; MF_FSE_COUPLER_NAME_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mf_fse_push {
    pub flow: u64,
    pub rate_bps: f64,
}

/// A call's error, as the accessors return it.
#[derive(Debug)]
struct LastError {
    code: c_int,
    field: CString,
    message: CString,
}

impl LastError {
    fn ok() -> Self {
        LastError {
            code: MF_FSE_OK,
            field: CString::default(),
            message: CString::default(),
        }
    }

    fn set(&mut self, fail: Fail) -> c_int {
        let (code, field, message) = fail.parts();
        *self = LastError {
            code,
            field: c_string(field),
            message: c_string(message),
        };
        code
    }
}

/// A string for C: interior NULs (never expected) become '?'.
fn c_string(s: String) -> CString {
    CString::new(s.replace('\0', "?")).unwrap_or_default()
}

thread_local! {
    /// The error of the thread's last `mf_fse_connect` or call with a NULL client.
    static THREAD_ERROR: RefCell<LastError> = RefCell::new(LastError::ok());
}

/// A connection (opaque to C).
#[derive(Debug)]
pub struct mf_fse_client {
    client: Client,
    error: LastError,
}

/// Why a call failed.
#[derive(Debug)]
enum Fail {
    Client(ClientError),
    BadArgument(&'static str, String),
    Internal(String),
}

impl From<ClientError> for Fail {
    fn from(e: ClientError) -> Self {
        Fail::Client(e)
    }
}

impl Fail {
    fn parts(self) -> (c_int, String, String) {
        match self {
            Fail::Client(ClientError::Io(e)) => (MF_FSE_ERR_IO, String::new(), e.to_string()),
            Fail::Client(ClientError::Daemon { field, message }) => {
                (MF_FSE_ERR_DAEMON, field, message)
            }
            Fail::Client(ClientError::Protocol(m)) => (MF_FSE_ERR_PROTOCOL, String::new(), m),
            Fail::Client(ClientError::Argument(m)) => (MF_FSE_ERR_BAD_ARGUMENT, String::new(), m),
            Fail::BadArgument(field, m) => (MF_FSE_ERR_BAD_ARGUMENT, field.to_string(), m),
            Fail::Internal(m) => (MF_FSE_ERR_INTERNAL, String::new(), m),
        }
    }
}

fn null(field: &'static str) -> Fail {
    Fail::BadArgument(field, format!("{field} is NULL"))
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    format!("internal error (please report): {what}")
}

/// Records a failure of a call without a client in the thread's error.
fn fail_thread(fail: Fail) -> c_int {
    THREAD_ERROR.with(|e| e.borrow_mut().set(fail))
}

/// Runs `f` on the client behind `c` with panics caught and the error recorded.
///
/// # Safety
/// `c` is NULL or a client from `mf_fse_connect`, not yet closed, used by no other thread.
unsafe fn call(c: *mut mf_fse_client, f: impl FnOnce(&mut Client) -> Result<c_int, Fail>) -> c_int {
    let run = AssertUnwindSafe(|| {
        // SAFETY: the caller's contract.
        let Some(c) = (unsafe { c.as_mut() }) else {
            return fail_thread(null("client"));
        };
        c.error = LastError::ok();
        let fail = match catch_unwind(AssertUnwindSafe(|| f(&mut c.client))) {
            Ok(Ok(n)) => return n,
            Ok(Err(e)) => e,
            Err(p) => Fail::Internal(panic_message(&*p)),
        };
        c.error.set(fail)
    });
    catch_unwind(run).unwrap_or(MF_FSE_ERR_INTERNAL)
}

/// Writes `v` through `out` (checked non-NULL by the caller).
///
/// # Safety
/// `out` is valid for writes of a `T`.
unsafe fn put<T>(out: *mut T, v: T) {
    // SAFETY: the caller's contract; write() does not drop the (uninitialised) old value.
    unsafe { out.write(v) }
}

/// The group a C caller names.
///
/// # Safety
/// `g` is NULL or points to an `mf_fse_group`; its label, if the kind is a label, is NULL or
/// readable up to its NUL or `MAX_LABEL_BYTES + 1` bytes, whichever comes first.
unsafe fn group_spec(g: *const mf_fse_group) -> Result<GroupSpec, Fail> {
    // SAFETY: the caller's contract.
    let Some(g) = (unsafe { g.as_ref() }) else {
        return Err(null("group"));
    };
    match g.kind {
        MF_FSE_GROUP_FGI => Ok(GroupSpec::Explicit(g.fgi)),
        MF_FSE_GROUP_LABEL => {
            if g.label.is_null() {
                return Err(null("group.label"));
            }
            // Read at most MAX_LABEL_BYTES + 1 bytes: a longer label is refused without
            // reading (or sending) the rest.
            let mut bytes = Vec::new();
            loop {
                // SAFETY: within the label's bytes up to its NUL (the caller's contract).
                let b = unsafe { *g.label.add(bytes.len()) } as u8;
                if b == 0 {
                    break;
                }
                if bytes.len() == MAX_LABEL_BYTES {
                    return Err(Fail::BadArgument(
                        "group.label",
                        format!("longer than {MAX_LABEL_BYTES} bytes"),
                    ));
                }
                bytes.push(b);
            }
            match String::from_utf8(bytes) {
                Ok(s) => Ok(GroupSpec::Configured(s)),
                Err(e) => Err(Fail::BadArgument(
                    "group.label",
                    format!("not valid UTF-8: {}", e.utf8_error()),
                )),
            }
        }
        MF_FSE_GROUP_FIVE_TUPLE => {
            let t = &g.five_tuple;
            Ok(GroupSpec::Multiplexed {
                src: t.src,
                dst: t.dst,
                protocol: t.protocol,
                src_port: t.src_port,
                dst_port: t.dst_port,
                dscp: t.dscp,
            })
        }
        k => Err(Fail::BadArgument(
            "group.kind",
            format!("{k}: expected MF_FSE_GROUP_FGI (0), _LABEL (1) or _FIVE_TUPLE (2)"),
        )),
    }
}

fn algorithm(a: c_int) -> Result<Option<RateAlgorithm>, Fail> {
    Ok(Some(match a {
        -1 => return Ok(None),
        0 => RateAlgorithm::Active,
        1 => RateAlgorithm::ConservativeActive,
        2 => RateAlgorithm::SimplePassive,
        3 => RateAlgorithm::Passive,
        _ => {
            return Err(Fail::BadArgument(
                "algorithm",
                format!("{a}: expected -1 (none) or an enum mf_fse_algorithm value (0 ..= 3)"),
            ))
        }
    }))
}

fn timeout_ms(t: i32) -> Result<Option<u32>, Fail> {
    match t {
        -1 => Ok(None),
        t if t >= 0 => Ok(Some(t as u32)),
        t => Err(Fail::BadArgument(
            "timeout_ms",
            format!("{t}: expected -1 (the daemon's default) or >= 0"),
        )),
    }
}

/// Connects to the daemon at `path`; see the header.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_connect(
    path: *const c_char,
    out: *mut *mut mf_fse_client,
) -> c_int {
    let run = AssertUnwindSafe(|| {
        THREAD_ERROR.with(|e| *e.borrow_mut() = LastError::ok());
        if out.is_null() {
            return fail_thread(null("out"));
        }
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe { put(out, std::ptr::null_mut()) };
        if path.is_null() {
            return fail_thread(null("path"));
        }
        // SAFETY: the caller's contract.
        let path = unsafe { CStr::from_ptr(path) };
        let path = std::ffi::OsStr::from_bytes(path.to_bytes());
        match Client::connect(path) {
            Ok(client) => {
                let c = Box::new(mf_fse_client {
                    client,
                    error: LastError::ok(),
                });
                // SAFETY: as above.
                unsafe { put(out, Box::into_raw(c)) };
                MF_FSE_OK
            }
            Err(e) => fail_thread(e.into()),
        }
    });
    catch_unwind(run).unwrap_or_else(|p| fail_thread(Fail::Internal(panic_message(&*p))))
}

/// Closes and frees a client; see the header.
///
/// # Safety
/// `client` is NULL or a client from `mf_fse_connect` not yet closed; it is not used after.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_close(client: *mut mf_fse_client) -> c_int {
    if client.is_null() {
        return catch_unwind(|| fail_thread(null("client"))).unwrap_or(MF_FSE_ERR_INTERNAL);
    }
    // SAFETY: the caller's contract: it came from Box::into_raw in mf_fse_connect.
    let c = unsafe { Box::from_raw(client) };
    catch_unwind(AssertUnwindSafe(move || drop(c))).map_or(MF_FSE_ERR_INTERNAL, |()| MF_FSE_OK)
}

/// The uid and pid the daemon sees; see the header.
///
/// # Safety
/// `client` as for [`mf_fse_close`] (not closed); the outs NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_peer(
    client: *const mf_fse_client,
    uid_out: *mut u32,
    pid_out: *mut i32,
) -> c_int {
    // SAFETY: the caller's contract; `call` only reads through the pointer here.
    unsafe {
        call(client.cast_mut(), |c| {
            let (uid, pid) = c.peer();
            if !uid_out.is_null() {
                put(uid_out, uid);
            }
            if !pid_out.is_null() {
                put(pid_out, pid);
            }
            Ok(MF_FSE_OK)
        })
    }
}

/// Registers a rate-based flow; see the header.
///
/// # Safety
/// `client` a live client; `group` NULL or a valid `mf_fse_group` (label NUL-terminated);
/// `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_register_rate(
    client: *mut mf_fse_client,
    group: *const mf_fse_group,
    priority: f64,
    initial_rate_bps: f64,
    algorithm_: c_int,
    timeout_ms_: i32,
    out: *mut mf_fse_registered,
) -> c_int {
    // SAFETY: the caller's contract (the same as mf_fse_register_rate_desired's).
    unsafe {
        mf_fse_register_rate_desired(
            client,
            group,
            priority,
            initial_rate_bps,
            -1.0,
            algorithm_,
            timeout_ms_,
            out,
        )
    }
}

/// Registers a rate-based flow with the application's desired rate (`< 0`: none); see the
/// header.
///
/// # Safety
/// As for [`mf_fse_register_rate`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mf_fse_register_rate_desired(
    client: *mut mf_fse_client,
    group: *const mf_fse_group,
    priority: f64,
    initial_rate_bps: f64,
    desired_rate_bps: f64,
    algorithm_: c_int,
    timeout_ms_: i32,
    out: *mut mf_fse_registered,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            let group = group_spec(group)?;
            if out.is_null() {
                return Err(null("out"));
            }
            let a = algorithm(algorithm_)?;
            let t = timeout_ms(timeout_ms_)?;
            let d =
                (desired_rate_bps >= 0.0 || desired_rate_bps.is_nan()).then_some(desired_rate_bps);
            let r = c.register_rate(group, priority, initial_rate_bps, d, a, t)?;
            put(
                out,
                mf_fse_registered {
                    flow: r.flow,
                    group: r.group,
                    rate_bps: r.rate_bps,
                },
            );
            Ok(MF_FSE_OK)
        })
    }
}

/// Registers a window-based flow; see the header.
///
/// # Safety
/// As for [`mf_fse_register_rate`].
#[no_mangle]
pub unsafe extern "C" fn mf_fse_register_window(
    client: *mut mf_fse_client,
    group: *const mf_fse_group,
    priority: f64,
    cwnd_pkts: f64,
    ssthresh_pkts: f64,
    timeout_ms_: i32,
    out: *mut mf_fse_registered_window,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            let group = group_spec(group)?;
            if out.is_null() {
                return Err(null("out"));
            }
            let t = timeout_ms(timeout_ms_)?;
            let r = c.register_window(group, priority, cwnd_pkts, ssthresh_pkts, t)?;
            put(
                out,
                mf_fse_registered_window {
                    flow: r.flow,
                    group: r.group,
                    cwnd_pkts: r.cwnd_pkts,
                    ssthresh_pkts: r.ssthresh_pkts,
                },
            );
            Ok(MF_FSE_OK)
        })
    }
}

/// UPDATE of a rate-based flow; see the header.
///
/// # Safety
/// `client` a live client; `rate_out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_update_rate(
    client: *mut mf_fse_client,
    flow: u64,
    cc_rate_bps: f64,
    desired_rate_bps: f64,
    rtt_us: i64,
    rate_out: *mut f64,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            if rate_out.is_null() {
                return Err(null("rate_out"));
            }
            let desired =
                (desired_rate_bps >= 0.0 || desired_rate_bps.is_nan()).then_some(desired_rate_bps);
            let rtt = u64::try_from(rtt_us).ok();
            let r = c.update_rate(flow, cc_rate_bps, desired, rtt)?;
            put(rate_out, r);
            Ok(MF_FSE_OK)
        })
    }
}

/// UPDATE of a window-based flow; see the header.
///
/// # Safety
/// `client` a live client; `out` NULL or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mf_fse_update_window(
    client: *mut mf_fse_client,
    flow: u64,
    cwnd_pkts: f64,
    ssthresh_pkts: f64,
    state: c_int,
    timeout: c_int,
    in_flight_pkts: f64,
    out: *mut mf_fse_window,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            if out.is_null() {
                return Err(null("out"));
            }
            let state = match state {
                0 => WindowState::SlowStart,
                1 => WindowState::CongestionAvoidance,
                2 => WindowState::FastRecovery,
                s => {
                    return Err(Fail::BadArgument(
                        "state",
                        format!("{s}: expected an enum mf_fse_window_state value (0 ..= 2)"),
                    ))
                }
            };
            let w = c.update_window(
                flow,
                cwnd_pkts,
                ssthresh_pkts,
                state,
                timeout != 0,
                in_flight_pkts,
            )?;
            put(
                out,
                match w {
                    Some((cwnd_pkts, ssthresh_pkts)) => mf_fse_window {
                        set: 1,
                        cwnd_pkts,
                        ssthresh_pkts,
                    },
                    None => mf_fse_window::default(),
                },
            );
            Ok(MF_FSE_OK)
        })
    }
}

/// Changes a flow's priority; see the header.
///
/// # Safety
/// `client` NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_set_priority(
    client: *mut mf_fse_client,
    flow: u64,
    priority: f64,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            Ok(c.set_priority(flow, priority).map(|()| 0)?)
        })
    }
}

/// Keeps a flow alive; see the header.
///
/// # Safety
/// `client` NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_refresh(client: *mut mf_fse_client, flow: u64) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { call(client, |c| Ok(c.refresh(flow).map(|()| 0)?)) }
}

/// The flow leaves; see the header.
///
/// # Safety
/// `client` NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_leave(client: *mut mf_fse_client, flow: u64) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { call(client, |c| Ok(c.leave(flow).map(|()| 0)?)) }
}

/// Subscribes to a flow's pushes; see the header.
///
/// # Safety
/// `client` NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_subscribe(client: *mut mf_fse_client, flow: u64) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { call(client, |c| Ok(c.subscribe(flow).map(|()| 0)?)) }
}

fn flow_info(f: &fsed::proto::FlowInfo) -> mf_fse_flow_info {
    mf_fse_flow_info {
        flow: f.flow,
        group: f.group,
        priority: f.priority,
        effective_priority: f.effective_priority,
        rate_or_cwnd: f.rate_or_cwnd,
        desired_rate_bps: f.desired_rate_bps,
    }
}

/// One of the client's flows; see the header.
///
/// # Safety
/// `client` a live client; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_query_flow(
    client: *mut mf_fse_client,
    flow: u64,
    out: *mut mf_fse_flow_info,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            if out.is_null() {
                return Err(null("out"));
            }
            let f = c.query_flow(flow)?;
            put(out, flow_info(&f));
            Ok(MF_FSE_OK)
        })
    }
}

/// A group and the client's flows in it; see the header.
///
/// # Safety
/// `client` a live client; `info` NULL or valid for a write; `flows` NULL or valid for writes
/// of `capacity` elements.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_query_group(
    client: *mut mf_fse_client,
    group: u64,
    info: *mut mf_fse_group_info,
    flows: *mut mf_fse_flow_info,
    capacity: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            if info.is_null() {
                return Err(null("info"));
            }
            if flows.is_null() && capacity > 0 {
                return Err(Fail::BadArgument(
                    "flows",
                    format!("flows is NULL with capacity {capacity}"),
                ));
            }
            let g = c.query_group(group)?;
            let mut coupler = [0 as c_char; MF_FSE_COUPLER_NAME_LEN];
            for (d, s) in coupler
                .iter_mut()
                .zip(g.coupler.bytes().take(MF_FSE_COUPLER_NAME_LEN - 1))
            {
                *d = s as c_char;
            }
            put(
                info,
                mf_fse_group_info {
                    group: g.group,
                    sum_calculated: g.sum_calculated,
                    leftover: g.leftover,
                    flow_count: g.flow_count,
                    coupler,
                },
            );
            for (i, f) in g.flows.iter().take(capacity).enumerate() {
                put(flows.add(i), flow_info(f));
            }
            Ok(c_int::try_from(g.flows.len()).unwrap_or(c_int::MAX))
        })
    }
}

/// The next push; see the header.
///
/// # Safety
/// `client` a live client; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_wait_push(
    client: *mut mf_fse_client,
    timeout_ms: c_int,
    out: *mut mf_fse_push,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        call(client, |c| {
            if out.is_null() {
                return Err(null("out"));
            }
            let p = if timeout_ms < 0 {
                loop {
                    if let Some(p) = c.wait_push(Duration::from_secs(3600))? {
                        break p;
                    }
                }
            } else {
                match c.wait_push(Duration::from_millis(timeout_ms as u64))? {
                    Some(p) => p,
                    None => return Ok(0),
                }
            };
            put(
                out,
                mf_fse_push {
                    flow: p.flow,
                    rate_bps: p.rate_bps,
                },
            );
            Ok(1)
        })
    }
}

/// The client's last error (NULL: the thread's); see the header.
///
/// # Safety
/// `client` NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_last_error(client: *const mf_fse_client) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { client.as_ref() } {
        Some(c) => c.error.code,
        None => THREAD_ERROR
            .try_with(|e| e.borrow().code)
            .unwrap_or(MF_FSE_ERR_INTERNAL),
    }
}

/// The pointer to one of the last error's strings; "" if the thread's is gone.
///
/// # Safety
/// `client` NULL or a live client.
unsafe fn error_str(
    client: *const mf_fse_client,
    pick: fn(&LastError) -> &CString,
) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { client.as_ref() } {
        Some(c) => pick(&c.error).as_ptr(),
        // The CString lives in the thread-local until the thread's next failing call without a
        // client replaces it.
        None => THREAD_ERROR
            .try_with(|e| pick(&e.borrow()).as_ptr())
            .unwrap_or(c"".as_ptr()),
    }
}

/// The field the last error names; see the header.
///
/// # Safety
/// `client` NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_error_field(client: *const mf_fse_client) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { error_str(client, |e| &e.field) }
}

/// The last error's message; see the header.
///
/// # Safety
/// `client` NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mf_fse_error_message(client: *const mf_fse_client) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { error_str(client, |e| &e.message) }
}

/// A static description of a status code.
#[no_mangle]
pub extern "C" fn mf_fse_strerror(status: c_int) -> *const c_char {
    match status {
        MF_FSE_OK => c"ok",
        MF_FSE_ERR_IO => c"i/o error",
        MF_FSE_ERR_DAEMON => c"refused by the daemon",
        MF_FSE_ERR_PROTOCOL => c"protocol error",
        MF_FSE_ERR_BAD_ARGUMENT => c"bad argument",
        MF_FSE_ERR_INTERNAL => c"internal error",
        s if s > 0 => c"ok (a count)",
        _ => c"unknown status",
    }
    .as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    fn thread_field() -> String {
        // SAFETY: the accessors never return NULL.
        unsafe { CStr::from_ptr(mf_fse_error_field(null())) }
            .to_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn null_clients_and_outs_are_bad_arguments() {
        unsafe {
            let mut out = std::ptr::dangling_mut::<mf_fse_client>();
            assert_eq!(mf_fse_connect(null(), &mut out), MF_FSE_ERR_BAD_ARGUMENT);
            assert!(out.is_null());
            assert_eq!(thread_field(), "path");
            assert_eq!(
                mf_fse_connect(c"/nonexistent".as_ptr(), null_mut()),
                MF_FSE_ERR_BAD_ARGUMENT
            );
            assert_eq!(thread_field(), "out");
            assert_eq!(
                mf_fse_connect(c"/nonexistent/socket".as_ptr(), &mut out),
                MF_FSE_ERR_IO
            );
            assert_eq!(mf_fse_last_error(null()), MF_FSE_ERR_IO);
            assert_eq!(mf_fse_close(null_mut()), MF_FSE_ERR_BAD_ARGUMENT);
            let mut rate = 0.0;
            assert_eq!(
                mf_fse_update_rate(null_mut(), 1, 1.0, -1.0, -1, &mut rate),
                MF_FSE_ERR_BAD_ARGUMENT
            );
            assert_eq!(thread_field(), "client");
            assert_eq!(mf_fse_leave(null_mut(), 1), MF_FSE_ERR_BAD_ARGUMENT);
            assert_eq!(
                mf_fse_peer(null(), null_mut(), null_mut()),
                MF_FSE_ERR_BAD_ARGUMENT
            );
        }
    }

    #[test]
    fn groups_from_c() {
        let mut g = mf_fse_group {
            kind: MF_FSE_GROUP_LABEL,
            fgi: 0,
            label: c"wlan0 uplink".as_ptr(),
            five_tuple: mf_fse_five_tuple::default(),
        };
        unsafe {
            assert_eq!(
                group_spec(&g).unwrap(),
                GroupSpec::Configured("wlan0 uplink".into())
            );
            let bad = [0xffu8, 0xfe, 0];
            g.label = bad.as_ptr().cast();
            assert!(matches!(
                group_spec(&g),
                Err(Fail::BadArgument("group.label", _))
            ));
            let long = vec![b'a'; MAX_LABEL_BYTES + 1]; // no NUL: must not be read past
            g.label = long.as_ptr().cast();
            assert!(matches!(
                group_spec(&g),
                Err(Fail::BadArgument("group.label", _))
            ));
            let mut ok = vec![b'a'; MAX_LABEL_BYTES];
            ok.push(0);
            g.label = ok.as_ptr().cast();
            assert!(group_spec(&g).is_ok());
            g.label = std::ptr::null();
            assert!(matches!(
                group_spec(&g),
                Err(Fail::BadArgument("group.label", _))
            ));
            g.kind = 7;
            assert!(matches!(
                group_spec(&g),
                Err(Fail::BadArgument("group.kind", _))
            ));
            g.kind = MF_FSE_GROUP_FGI;
            g.fgi = 42;
            assert_eq!(group_spec(&g).unwrap(), GroupSpec::Explicit(42));
            assert!(matches!(
                group_spec(null()),
                Err(Fail::BadArgument("group", _))
            ));
        }
    }

    #[test]
    fn strerror_covers_every_code() {
        for code in -5..=0 {
            let s = unsafe { CStr::from_ptr(mf_fse_strerror(code)) };
            assert_ne!(s.to_bytes(), b"unknown status", "{code}");
        }
    }
}
