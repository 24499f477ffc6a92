//! What the recorder needs to know about each wrapped function, computed from
//! the table in `hark_wire::mpi` by `build.rs` so that nothing is searched at
//! run time: where each decoded argument sits, and which behaviour applies.

/// Position of an absent argument.
pub(crate) const NO: u8 = u8::MAX;

/// How the recorder treats a function. Derived from the table's class, the
/// argument roles and, for collectives, the name (`build.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Init,
    Finalize,
    Abort,
    Pcontrol,
    Send,
    Recv,
    Sendrecv,
    /// Posts a send request; `persistent` for `*_init`.
    PostSend {
        persistent: bool,
    },
    /// Posts a receive request (`Irecv`, `Recv_init`, `Imrecv`).
    PostRecv {
        persistent: bool,
    },
    Start,
    Probe,
    /// `Wait*` and `Test*` (a `Flag` argument makes it a test).
    Complete,
    RequestFree,
    Cancel,
    Coll(Shape),
    CommCreate,
    CommFree,
    WinCreate,
    WinFree,
    /// Other window calls (`attach`, `detach`): timed, `obj` the window.
    WinOther,
    Rma,
    RmaSync,
    FileOpen,
    FileClose,
    /// Other file management: timed, `obj` the file.
    FileOther,
    /// A read or write (`write` tells which).
    FileIo {
        write: bool,
    },
    /// Timed only.
    Timed,
    /// Never recorded: a query whose wrapper only substitutes a virtualised
    /// world (`virt.rs`) and calls through.
    Query,
}

/// The data layout of a collective: which buffers it reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Barrier,
    Bcast,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    Alltoallw,
    Reduce,
    Allreduce,
    ReduceScatter,
    ReduceScatterBlock,
    Scan,
    NeighborAllgather,
    NeighborAllgatherv,
    NeighborAlltoall,
    NeighborAlltoallv,
    NeighborAlltoallw,
}

/// Where each decoded role sits in the argument list ([`NO`] if absent).
/// One field per `hark_wire::mpi::Arg` variant used in the table; `build.rs`
/// names them in snake case, so a new role fails to compile until added here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pos {
    pub send_buf: u8,
    pub recv_buf: u8,
    pub send_count: u8,
    pub recv_count: u8,
    pub send_counts: u8,
    pub recv_counts: u8,
    pub send_type: u8,
    pub recv_type: u8,
    pub send_types: u8,
    pub recv_types: u8,
    pub dest: u8,
    pub source: u8,
    pub root: u8,
    pub tag: u8,
    pub recv_tag: u8,
    pub comm: u8,
    #[allow(dead_code)] // only substituted (virt.rs), never decoded
    pub comm2: u8,
    pub new_comm: u8,
    pub request_out: u8,
    pub request: u8,
    pub request_count: u8,
    pub requests: u8,
    pub status: u8,
    pub statuses: u8,
    pub index: u8,
    pub out_count: u8,
    pub indices: u8,
    pub flag: u8,
    pub win: u8,
    pub target_rank: u8,
    pub origin_count: u8,
    pub origin_type: u8,
    pub file: u8,
    pub file_out: u8,
    pub file_name: u8,
    pub offset: u8,
    pub message_out: u8,
    pub message: u8,
    pub level: u8,
    pub comm_freed: u8,
    pub win_out: u8,
    pub win_freed: u8,
    pub file_closed: u8,
    pub partitions: u8,
}

/// Every role absent.
pub(crate) const NONE: Pos = Pos {
    send_buf: NO,
    recv_buf: NO,
    send_count: NO,
    recv_count: NO,
    send_counts: NO,
    recv_counts: NO,
    send_type: NO,
    recv_type: NO,
    send_types: NO,
    recv_types: NO,
    dest: NO,
    source: NO,
    root: NO,
    tag: NO,
    recv_tag: NO,
    comm: NO,
    comm2: NO,
    new_comm: NO,
    request_out: NO,
    request: NO,
    request_count: NO,
    requests: NO,
    status: NO,
    statuses: NO,
    index: NO,
    out_count: NO,
    indices: NO,
    flag: NO,
    win: NO,
    target_rank: NO,
    origin_count: NO,
    origin_type: NO,
    file: NO,
    file_out: NO,
    file_name: NO,
    offset: NO,
    message_out: NO,
    message: NO,
    level: NO,
    comm_freed: NO,
    win_out: NO,
    win_freed: NO,
    file_closed: NO,
    partitions: NO,
};

/// One function's plan; `PLANS[i]` belongs to `hark_wire::mpi::FUNCTIONS[i]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// The event's op code.
    pub op: u16,
    /// Number of C arguments.
    pub arity: u8,
    pub kind: Kind,
    pub pos: Pos,
    /// A large-count (`_c`) variant: counts are `MPI_Count` (64 bits), count
    /// arrays `MPI_Count[]`.
    pub large: bool,
}
