//! The MPI function table: one line per wrapped function.
//!
//! This table is the single specification the probe's MPI wrappers are
//! generated from (C entry points, the Fortran `mpif.h`/`use mpi` entry points
//! and the `use mpi_f08` ones), and the server's list of function names. Op
//! code `op::MPI_BASE + i` is `FUNCTIONS[i]`; entries are appended, never
//! reordered, so codes stay stable.
//!
//! Each argument is given the role it plays, in the order of the C prototype.
//! The probe reads what it needs from the roles alone; a function whose
//! arguments need no decoding lists them as [`Arg::Other`].

/// What an MPI function does, as far as the analyses care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Class {
    /// `MPI_Init`, `MPI_Init_thread`.
    Init,
    /// `MPI_Finalize`.
    Finalize,
    /// Blocking send (all modes).
    Send,
    /// Blocking receive (and `MPI_Mrecv`).
    Recv,
    /// `MPI_Sendrecv`, `MPI_Sendrecv_replace`.
    Sendrecv,
    /// Non-blocking send (all modes).
    Isend,
    /// Non-blocking receive (and `MPI_Imrecv`).
    Irecv,
    /// Persistent send request creation.
    SendInit,
    /// Persistent receive request creation.
    RecvInit,
    /// `MPI_Start`, `MPI_Startall`.
    Start,
    /// Blocking or non-blocking probe (`Probe`, `Iprobe`, `Mprobe`, `Improbe`).
    Probe,
    /// `MPI_Wait*`.
    Wait,
    /// `MPI_Test*`.
    Test,
    /// `MPI_Request_free`, `MPI_Cancel`.
    RequestMisc,
    /// Blocking collective.
    Collective,
    /// Non-blocking collective (a request completes it).
    Icollective,
    /// Creates a communicator (`dup`, `split`, `create`, topologies, intercomm).
    CommCreate,
    /// `MPI_Comm_free`, `MPI_Comm_disconnect`.
    CommFree,
    /// One-sided data movement (`Put`, `Get`, `Accumulate`, ...).
    Rma,
    /// One-sided synchronisation (`Win_fence`, `Win_lock`, `Win_flush`, ...).
    RmaSync,
    /// Window creation and freeing.
    Win,
    /// `MPI_File_open`, `MPI_File_close` and other file management.
    FileMeta,
    /// MPI-IO read (blocking or not, explicit offset, individual or shared pointer).
    FileRead,
    /// MPI-IO write.
    FileWrite,
    /// Anything else worth timing (`Pcontrol`, `Abort`, group calls, ...).
    Other,
}

/// The role of one argument, in C prototype order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arg {
    /// Not decoded.
    Other,
    /// Send buffer (may be `MPI_IN_PLACE`).
    SendBuf,
    /// Receive buffer.
    RecvBuf,
    /// Send element count (`int`).
    SendCount,
    /// Receive element count (`int`).
    RecvCount,
    /// Send counts per peer (`const int[]`, v/w variants).
    SendCounts,
    /// Receive counts per peer.
    RecvCounts,
    /// Send datatype.
    SendType,
    /// Receive datatype.
    RecvType,
    /// Send datatypes per peer (w variants).
    SendTypes,
    /// Receive datatypes per peer.
    RecvTypes,
    /// Destination rank in the communicator.
    Dest,
    /// Source rank in the communicator (may be `MPI_ANY_SOURCE`).
    Source,
    /// Root rank of a rooted collective.
    Root,
    /// Tag (for `Sendrecv`: the send tag).
    Tag,
    /// The receive tag of `Sendrecv`.
    RecvTag,
    /// The communicator.
    Comm,
    /// Output communicator (`MPI_Comm *`).
    NewComm,
    /// Output request (`MPI_Request *`).
    RequestOut,
    /// In/out request (`MPI_Request *`): Wait, Test, Start, Request_free, Cancel.
    Request,
    /// Number of requests in the array that follows.
    RequestCount,
    /// Request array (`MPI_Request[]`).
    Requests,
    /// Output status (`MPI_Status *`, may be `MPI_STATUS_IGNORE`).
    Status,
    /// Output statuses (`MPI_Status[]`, may be `MPI_STATUSES_IGNORE`).
    Statuses,
    /// Output index (`int *`, Waitany/Testany).
    Index,
    /// Output count (`int *`, Waitsome/Testsome).
    OutCount,
    /// Output indices (`int[]`, Waitsome/Testsome).
    Indices,
    /// Output flag (`int *`, Test*, Iprobe).
    Flag,
    /// Window.
    Win,
    /// Target rank of a one-sided operation.
    TargetRank,
    /// Origin element count of a one-sided operation.
    OriginCount,
    /// Origin datatype of a one-sided operation.
    OriginType,
    /// File handle (`MPI_File`).
    File,
    /// Output file handle (`MPI_File *`).
    FileOut,
    /// File name (`const char *`).
    FileName,
    /// File offset (`MPI_Offset`).
    Offset,
    /// Matched message (`MPI_Message *`), output of `Mprobe`.
    MessageOut,
    /// Matched message (`MPI_Message *`), input of `Mrecv`.
    Message,
    /// Level argument of `MPI_Pcontrol`.
    Level,
}

/// One wrapped MPI function.
#[derive(Clone, Copy, Debug)]
pub struct Function {
    /// The C name, as in the standard (`MPI_Send`).
    pub name: &'static str,
    /// What it does.
    pub class: Class,
    /// The roles of its arguments, in C prototype order.
    pub args: &'static [Arg],
}

impl Function {
    /// The Fortran name (`mpi_send`), without the trailing underscore that
    /// compilers add.
    pub fn fortran_name(&self) -> String {
        self.name.to_ascii_lowercase()
    }
}

macro_rules! table {
    ($($name:literal $class:ident [$($arg:ident),* $(,)?]),* $(,)?) => {
        /// Every wrapped MPI function; op `op::MPI_BASE + i` is `FUNCTIONS[i]`.
        pub static FUNCTIONS: &[Function] = &[
            $(Function { name: $name, class: Class::$class, args: &[$(Arg::$arg),*] }),*
        ];
    };
}

table! {
    "MPI_Init" Init [Other, Other],
    "MPI_Init_thread" Init [Other, Other, Other, Other],
    "MPI_Finalize" Finalize [],
    "MPI_Send" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Recv" Recv [RecvBuf, RecvCount, RecvType, Source, Tag, Comm, Status],
    "MPI_Isend" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Irecv" Irecv [RecvBuf, RecvCount, RecvType, Source, Tag, Comm, RequestOut],
    "MPI_Wait" Wait [Request, Status],
    "MPI_Waitall" Wait [RequestCount, Requests, Statuses],
    "MPI_Barrier" Collective [Comm],
    "MPI_Bcast" Collective [SendBuf, SendCount, SendType, Root, Comm],
    "MPI_Allreduce" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm],
}

/// The function called `name` (C spelling), if wrapped.
pub fn by_name(name: &str) -> Option<(usize, &'static Function)> {
    FUNCTIONS.iter().enumerate().find(|(_, f)| f.name == name)
}
