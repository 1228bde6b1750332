//! The wire: the request's body and URL, the HTTP connections that carry it (opened before a
//! level starts, within the file-descriptor limit) and the kernel's clock on the bytes that
//! come back. Next, stream/ reads those bytes as an answer.

pub mod body;
pub mod fdlimit;
pub mod http;
pub mod preconnect;
pub mod read_delay;
pub mod sse;
pub mod wire_clock;
