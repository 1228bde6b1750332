//! When response bytes reached this machine: the kernel's receive timestamp of each read
//! (`SO_TIMESTAMPNS` on Linux), not the moment the client got round to parsing them.
//!
//! A client that timestamps a chunk when its task parses it adds its own queueing to every
//! figure: with a thousand streams on one core, a burst of a thousand chunks takes the client
//! several milliseconds to work through, and the last chunk of the burst would look late by
//! all of it (the headroom check measured exactly this). The kernel stamps each packet as it
//! arrives, so a read carries the arrival time of its data however late the read is.
//!
//! hyper reads a connection on a task of its own and hands the body on one frame at a time
//! (it reads no further until the frame is taken), so the arrival time of the latest read is
//! the arrival time of the frame just taken. (On a runtime with several workers, the
//! connection's task may read the next frame in the instant between; only when that frame
//! had already arrived, i.e. when the client is a whole gap behind, which the read-delay
//! check flags.) When two chunks wait unread in the socket together, the kernel merges them
//! and keeps the later one's time: read_delay.rs measures how long reads wait, and the
//! headroom check flags trials where that could happen. Where the kernel gives no timestamp
//! (another OS, a socket option refused), the time of the read itself is used: still earlier
//! than the time of parsing.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Reads of this process that carried the kernel's receive time, and reads that did not (no
/// timestamp support, or the first packets after the kernel's timestamping was switched on:
/// Linux enables it system-wide with a short delay when the first socket asks).
static KERNEL_STAMPED_READS: AtomicU64 = AtomicU64::new(0);
static READ_TIME_READS: AtomicU64 = AtomicU64::new(0);

/// (reads timed by the kernel, reads timed when read) so far in this process.
pub fn read_counts() -> (u64, u64) {
    (
        KERNEL_STAMPED_READS.load(Ordering::Relaxed),
        READ_TIME_READS.load(Ordering::Relaxed),
    )
}

/// When bytes crossed a connection, shared with whoever holds the connection (the load
/// client's pool takes it from the connector's extras, http.rs): the arrival time of the
/// latest read and how long its data waited in the socket (known only from kernel stamps),
/// and when the latest request began to leave.
#[derive(Debug, Clone, Default)]
pub struct WireClock(Arc<Mutex<WireTimes>>);

/// When a read's data arrived, and how long it waited in the socket (kernel stamps only).
type LatestRead = (Instant, Option<Duration>);

#[derive(Debug, Default)]
struct WireTimes {
    latest_read: Option<LatestRead>,
    /// The first write after the latest read: HTTP/1.1 without pipelining writes a request
    /// only after the previous response was read, so this is when the current request's
    /// first bytes were handed to the kernel.
    write_started: Option<Instant>,
    /// A write happened since the latest read.
    writing: bool,
}

impl WireClock {
    /// When the data of the latest read arrived, and how long it waited to be read.
    pub fn latest_read(&self) -> Option<LatestRead> {
        self.times().latest_read
    }

    /// When the current request's first bytes were handed to the kernel.
    pub fn write_started(&self) -> Option<Instant> {
        self.times().write_started
    }

    fn times(&self) -> std::sync::MutexGuard<'_, WireTimes> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self, at: Instant, waited: Option<Duration>) {
        let mut times = self.times();
        times.latest_read = Some((at, waited));
        times.writing = false;
    }

    fn wrote(&self) {
        let mut times = self.times();
        if !times.writing {
            times.writing = true;
            times.write_started = Some(Instant::now());
        }
    }
}

/// A TCP connection that notes when its reads' data arrived and when each request began to
/// leave.
pub struct StampedTcp {
    tcp: TcpStream,
    clock: WireClock,
    /// The kernel agreed to timestamp this socket's packets.
    kernel_stamps: bool,
}

impl StampedTcp {
    pub fn new(tcp: TcpStream) -> StampedTcp {
        let kernel_stamps = enable_kernel_stamps(&tcp);
        StampedTcp {
            tcp,
            clock: WireClock::default(),
            kernel_stamps,
        }
    }

    /// Whether reads carry the kernel's receive time (else the time of the read).
    pub fn has_kernel_stamps(&self) -> bool {
        self.kernel_stamps
    }
}

impl AsyncRead for StampedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.kernel_stamps {
            let before = buf.filled().len();
            let polled = Pin::new(&mut this.tcp).poll_read(cx, buf);
            if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                READ_TIME_READS.fetch_add(1, Ordering::Relaxed);
                this.clock.read(Instant::now(), None);
            }
            return polled;
        }
        loop {
            std::task::ready!(this.tcp.poll_read_ready(cx))?;
            // The unfilled part is not zeroed first (that memset was 5% of the client's CPU at
            // a thousand streams): recvmsg only writes into it.
            // SAFETY: nothing is written into `unfilled` but bytes recvmsg read (no
            // de-initialising), as `unfilled_mut` requires.
            let unfilled = unsafe { buf.unfilled_mut() };
            let (ptr, len) = (unfilled.as_mut_ptr().cast::<u8>(), unfilled.len());
            // A short read emptied the socket: the closure then reports WouldBlock so that
            // tokio forgets the readiness (as its own TcpStream does), and the bytes are taken
            // from `short`. Without this every chunk cost a second recvmsg that found nothing
            // (half of all the client's recvmsg calls at a thousand streams).
            let mut short = None;
            let read = this.tcp.try_io(tokio::io::Interest::READABLE, || {
                let (n, stamp) = recv_stamped(&this.tcp, ptr, len)?;
                if n > 0 && n < len {
                    short = Some((n, stamp));
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok((n, stamp))
            });
            let read = match short {
                Some(got) => Ok(got),
                None => read,
            };
            match read {
                Ok((n, stamp)) => {
                    // SAFETY: recvmsg wrote `n` bytes into the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    if n > 0 {
                        match stamp {
                            Some(at) => {
                                KERNEL_STAMPED_READS.fetch_add(1, Ordering::Relaxed);
                                let waited = at.elapsed();
                                super::read_delay::record(waited);
                                this.clock.read(at, Some(waited));
                            }
                            None => {
                                READ_TIME_READS.fetch_add(1, Ordering::Relaxed);
                                this.clock.read(Instant::now(), None);
                            }
                        }
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for StampedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.tcp).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.clock.wrote();
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.clock.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

impl Connection for StampedTcp {
    fn connected(&self) -> Connected {
        self.tcp.connected().extra(self.clock.clone())
    }
}

/// hyper-util's TCP connector (TCP_NODELAY, connect timeout), with each connection wrapped
/// in a [`StampedTcp`].
#[derive(Clone)]
pub struct StampingConnector {
    pub tcp: HttpConnector,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for StampingConnector {
    type Response = TokioIo<StampedTcp>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.tcp.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(TokioIo::new(StampedTcp::new(io.into_inner())))
        })
    }
}

#[cfg(target_os = "linux")]
fn enable_kernel_stamps(tcp: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

#[cfg(not(target_os = "linux"))]
fn enable_kernel_stamps(_: &TcpStream) -> bool {
    false
}

/// One `recvmsg`: the bytes read, and when the kernel received the last of them (as an
/// `Instant`), when it said.
#[cfg(target_os = "linux")]
fn recv_stamped(tcp: &TcpStream, buf: *mut u8, len: usize) -> io::Result<(usize, Option<Instant>)> {
    use std::os::fd::AsRawFd;
    // Room for one cmsghdr carrying a timespec, aligned for cmsghdr.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.cast(),
        iov_len: len,
    };
    // SAFETY: msghdr is plain data; zeroed is its documented initial state.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the iovec is the caller's unfilled buffer of `len` bytes and the control buffer
    // is `control`, both alive for the call.
    let n = unsafe { libc::recvmsg(tcp.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `control`, with the libc
    // macros that bound each step by msg_controllen.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                stamp = Some(to_instant(ts));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, stamp))
}

#[cfg(not(target_os = "linux"))]
fn recv_stamped(_: &TcpStream, _: *mut u8, _: usize) -> io::Result<(usize, Option<Instant>)> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// A wall-clock receive time as an `Instant`: now, less how long ago it was.
#[cfg(target_os = "linux")]
fn to_instant(ts: libc::timespec) -> Instant {
    let (now_wall, now) = (std::time::SystemTime::now(), Instant::now());
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::new(
            ts.tv_sec.max(0) as u64,
            ts.tv_nsec.clamp(0, 999_999_999) as u32,
        );
    match now_wall.duration_since(at) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        // A stamp "in the future" (the wall clock stepped back): the read time is the best
        // there is.
        Err(_) => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A stamped client connection and the server's end of it, on loopback.
    async fn connected_pair() -> (StampedTcp, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (StampedTcp::new(client), server)
    }

    /// Data written, then read 300 ms later: the read's arrival time is the write's, not the
    /// read's (on Linux, where the kernel stamps packets). Within 50 ms of the write: a busy
    /// machine can preempt the test between the write and its own clock reading, and a stamp
    /// taken at the read would still be 300 ms off.
    #[tokio::test]
    async fn a_late_read_keeps_the_arrival_time() {
        let (mut stamped, mut server) = connected_pair().await;
        let clock = stamped.clock.clone();
        // Linux switches timestamping on for the whole system a moment after the first
        // socket asks; packets before that carry no stamp.
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.write_all(b"data: 1\n\n").await.unwrap();
        let written = Instant::now();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut buf = [0u8; 64];
        let n = stamped.read(&mut buf).await.unwrap();
        let read_at = Instant::now();
        assert_eq!(&buf[..n], b"data: 1\n\n");
        let (arrived, _) = clock.latest_read().expect("a read sets the arrival time");
        assert!(arrived <= read_at);
        if cfg!(target_os = "linux") {
            assert!(stamped.has_kernel_stamps());
            let late_by = read_at.duration_since(arrived);
            let off = if arrived > written {
                arrived - written
            } else {
                written - arrived
            };
            assert!(late_by >= Duration::from_millis(250), "late by {late_by:?}");
            assert!(off < Duration::from_millis(50), "off by {off:?}");
        }
        // The connection still writes.
        stamped.write_all(b"ok").await.unwrap();
        let mut two = [0u8; 2];
        server.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ok");
    }

    /// A request's writes, its answer read, then the next request's writes: the clock keeps
    /// when each request began to leave, not its later writes.
    #[tokio::test]
    async fn the_write_clock_starts_at_each_requests_first_write() {
        let (mut stamped, mut server) = connected_pair().await;
        let clock = stamped.clock.clone();
        assert!(clock.write_started().is_none());

        let before = Instant::now();
        stamped.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let first = clock.write_started().expect("a write starts the clock");
        assert!(first >= before);
        tokio::time::sleep(Duration::from_millis(20)).await;
        stamped.write_all(b"\r\n").await.unwrap();
        assert_eq!(
            clock.write_started(),
            Some(first),
            "a later write of one request"
        );

        server.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        let _ = stamped.read(&mut buf).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let next_request = Instant::now();
        stamped.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let second = clock.write_started().unwrap();
        assert!(
            second >= next_request,
            "after a read, the next write starts anew"
        );
        assert!(second - first >= Duration::from_millis(40));
    }
}
