//! The socket side: a Unix stream listener, one reader and one writer task per connection, and a
//! soft-state tick. The state is one [`Daemon`] behind a mutex: every request is a short critical
//! section, and the clock is read inside it so time never goes back.
//!
//! The caller's uid and pid come from the kernel (`SO_PEERCRED`), never from the client. Replies
//! and pushes of one connection go out in order through its writer. A push to a connection
//! whose outgoing queue is full (a client that stopped reading) is dropped and counted in
//! [`Stats::pushes_dropped`]; replies wait for room, at most [`FLUSH_TIMEOUT`], after which the
//! connection is closed and its flows leave.

use crate::config::Config;
use crate::daemon::{ClientId, Daemon};
use crate::proto::{self, Push, Reply, ReplyBody, Request, ServerMsg};
use coupling::Instant;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

/// Messages queued to one connection before pushes to it are dropped.
pub const QUEUE_MSGS: usize = 4096;

/// How often silent flows are looked for.
pub const EXPIRY_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// Counters over the daemon's life.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub refused_connections: AtomicU64,
    pub requests: AtomicU64,
    pub error_replies: AtomicU64,
    pub pushes: AtomicU64,
    pub pushes_dropped: AtomicU64,
    /// Connections closed for a frame that cannot be skipped (bad length) or a bad Hello.
    pub closed_for_errors: AtomicU64,
}

struct Shared {
    daemon: Mutex<Daemon>,
    epoch: std::time::Instant,
    outboxes: Mutex<HashMap<ClientId, mpsc::Sender<ServerMsg>>>,
    next_client: AtomicU64,
    stats: Arc<Stats>,
}

impl Shared {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn push_all(&self, pushes: Vec<(ClientId, Push)>) {
        if pushes.is_empty() {
            return;
        }
        let out = self.outboxes.lock().expect("not poisoned");
        for (c, p) in pushes {
            let sent = out
                .get(&c)
                .is_some_and(|tx| tx.try_send(ServerMsg::Push(p)).is_ok());
            let counter = if sent {
                &self.stats.pushes
            } else {
                &self.stats.pushes_dropped
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A running daemon's listening socket: removed when dropped.
pub struct Socket {
    pub path: PathBuf,
    pub listener: UnixListener,
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the socket at `path` with permissions `mode` (e.g. 0o660: its group may connect). A
/// stale socket file (nothing listening) is replaced; a live one is an error.
pub fn bind(path: &Path, mode: u32) -> io::Result<Socket> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{}: a daemon is already listening", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(Socket {
        path: path.to_path_buf(),
        listener,
    })
}

/// Serves until `shutdown` completes. Returns the counters.
pub async fn serve(
    socket: Socket,
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> io::Result<Arc<Stats>> {
    let stats = Arc::new(Stats::default());
    let shared = Arc::new(Shared {
        daemon: Mutex::new(Daemon::new(config).map_err(io::Error::other)?),
        epoch: std::time::Instant::now(),
        outboxes: Mutex::new(HashMap::new()),
        next_client: AtomicU64::new(1),
        stats: stats.clone(),
    });
    let ticker = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut t = tokio::time::interval(EXPIRY_TICK);
            loop {
                t.tick().await;
                let pushes = {
                    let mut d = shared.daemon.lock().expect("not poisoned");
                    let now = shared.now();
                    d.expire(now)
                };
                shared.push_all(pushes);
            }
        })
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            r = socket.listener.accept() => {
                let (stream, _) = match r {
                    Ok(s) => s,
                    Err(_) => {
                        // E.g. EMFILE: the client sees its connect fail; wait rather than spin
                        // until a connection closes.
                        stats.refused_connections.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let shared = shared.clone();
                tokio::spawn(async move { connection(shared, stream).await });
            }
        }
    }
    ticker.abort();
    Ok(stats)
}

async fn connection(shared: Arc<Shared>, stream: UnixStream) {
    let (uid, pid) = match stream.peer_cred() {
        Ok(c) => (c.uid(), c.pid().unwrap_or(0)),
        Err(_) => return,
    };
    let client = shared.next_client.fetch_add(1, Ordering::Relaxed);
    let refused = {
        let mut d = shared.daemon.lock().expect("not poisoned");
        d.connect(client, uid).err()
    };
    let (rd, mut wr) = stream.into_split();
    // Buffered: a client that pipelines requests has many frames read in one system call.
    let mut rd = tokio::io::BufReader::with_capacity(64 * 1024, rd);
    if let Some(why) = refused {
        shared
            .stats
            .refused_connections
            .fetch_add(1, Ordering::Relaxed);
        let msg = ServerMsg::Reply(Reply {
            id: 0,
            body: ReplyBody::error("connect", why),
        });
        let _ = wr.write_all(&proto::encode(&msg)).await;
        return;
    }
    shared.stats.connections.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = mpsc::channel::<ServerMsg>(QUEUE_MSGS);
    shared
        .outboxes
        .lock()
        .expect("not poisoned")
        .insert(client, tx.clone());
    let writer = tokio::spawn(async move {
        let mut buf = Vec::new();
        while let Some(m) = rx.recv().await {
            buf.clear();
            buf.extend_from_slice(&proto::encode(&m));
            // Coalesce what is already queued into one write.
            while buf.len() < 64 * 1024 {
                match rx.try_recv() {
                    Ok(m) => buf.extend_from_slice(&proto::encode(&m)),
                    Err(_) => break,
                }
            }
            if wr.write_all(&buf).await.is_err() {
                break;
            }
        }
    });
    let mut payload = Vec::new();
    loop {
        let mut prefix = [0u8; 4];
        if rd.read_exact(&mut prefix).await.is_err() {
            break; // closed, or killed mid-frame
        }
        let n = match proto::frame_len(prefix) {
            Ok(n) => n,
            Err(why) => {
                // The stream cannot be resynchronised: say why and close.
                shared
                    .stats
                    .closed_for_errors
                    .fetch_add(1, Ordering::Relaxed);
                let _ = tx
                    .send(ServerMsg::Reply(Reply {
                        id: 0,
                        body: ReplyBody::error("frame", why),
                    }))
                    .await;
                break;
            }
        };
        payload.resize(n, 0);
        if rd.read_exact(&mut payload).await.is_err() {
            break;
        }
        shared.stats.requests.fetch_add(1, Ordering::Relaxed);
        let (reply, close) = match proto::decode::<Request>(&payload) {
            Err(why) => (
                Reply {
                    id: request_id(&payload),
                    body: ReplyBody::error("frame", why),
                },
                false,
            ),
            Ok(req) => {
                let out = {
                    let mut d = shared.daemon.lock().expect("not poisoned");
                    let now = shared.now();
                    d.handle(client, req.op, now)
                };
                shared.push_all(out.pushes);
                let body = match out.reply {
                    ReplyBody::Hello { version, uid, .. } => ReplyBody::Hello { version, uid, pid },
                    b => b,
                };
                (Reply { id: req.id, body }, out.close)
            }
        };
        if matches!(reply.body, ReplyBody::Error { .. }) {
            shared.stats.error_replies.fetch_add(1, Ordering::Relaxed);
        }
        // A client that does not read its replies fills its queue; one that has not made room
        // within FLUSH_TIMEOUT is let go (its flows leave), so it cannot hold a task and an fd.
        if tx
            .send_timeout(ServerMsg::Reply(reply), FLUSH_TIMEOUT)
            .await
            .is_err()
        {
            shared
                .stats
                .closed_for_errors
                .fetch_add(1, Ordering::Relaxed);
            break;
        }
        if close {
            shared
                .stats
                .closed_for_errors
                .fetch_add(1, Ordering::Relaxed);
            break;
        }
    }
    shared
        .outboxes
        .lock()
        .expect("not poisoned")
        .remove(&client);
    drop(tx);
    let pushes = {
        let mut d = shared.daemon.lock().expect("not poisoned");
        let now = shared.now();
        d.disconnect(client, now)
    };
    shared.push_all(pushes);
    // The writer sends what is queued (a last error reply, say) and ends; a client that stopped
    // reading would hold it (and the connection's fd) for ever, so it gets a bounded time.
    let mut writer = writer;
    if tokio::time::timeout(FLUSH_TIMEOUT, &mut writer)
        .await
        .is_err()
    {
        writer.abort();
        let _ = writer.await;
    }
}

/// How long a closing connection's writer may take to send what is queued.
pub const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The id of a request that did not decode, if its first field (a varint) did: the client can
/// match the error to its request. 0 otherwise.
fn request_id(payload: &[u8]) -> u32 {
    postcard::take_from_bytes::<u32>(payload).map_or(0, |(id, _)| id)
}

/// A daemon serving in a thread of this process, on its own current-thread runtime as
/// `macroflowd` runs it (tests, benchmarks, an application embedding the FSE): stopped, and its
/// socket removed, when dropped.
pub struct Background {
    pub path: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<io::Result<Arc<Stats>>>>,
}

impl Background {
    /// Binds `path` with permissions `mode` and serves `config` until dropped; returns once the
    /// socket listens (or with the bind's error).
    pub fn start(path: &Path, mode: u32, config: Config) -> io::Result<Background> {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
        let p = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("macroflowd".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async move {
                    let socket = match bind(&p, mode) {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                            return Err(e);
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    serve(socket, config, async {
                        let _ = rx.await;
                    })
                    .await
                })
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Background {
                path: path.to_path_buf(),
                stop: Some(tx),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(io::Error::other(
                "the daemon's thread ended before it listened",
            )),
        }
    }

    /// Stops the daemon; returns its counters.
    pub fn stop(mut self) -> io::Result<Arc<Stats>> {
        self.finish()
    }

    fn finish(&mut self) -> io::Result<Arc<Stats>> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the daemon's thread panicked"))?,
            None => Err(io::Error::other("already stopped")),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
