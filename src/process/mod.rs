//! The operating system's side of the processes throughline starts or is: a started
//! command's process group and tree (stop, liveness, reaping), what a child inherits, the
//! open-files limit, this process's CPU time and memory, and pinning to cores. One room, so
//! that a server, a bisect build and a self-benchmark case are stopped and counted alike
//! (a zombie is gone everywhere: its process runs nothing and holds nothing but its pid).
//! A leaf: it uses no other module of the crate.

pub mod env;
pub mod group;
pub mod open_files;
pub mod pin;
pub mod tree;
pub mod usage;
