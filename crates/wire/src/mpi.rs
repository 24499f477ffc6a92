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
    /// Not recorded: a query or setting on a communicator (`Comm_rank`,
    /// `Comm_compare`, `Comm_set_errhandler`, ...), wrapped only so that a
    /// virtualised `MPI_COMM_WORLD` can be substituted in its arguments.
    Query,
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
    /// A second communicator argument: the peer communicator of
    /// `MPI_Intercomm_create`, the second of `MPI_Comm_compare`.
    Comm2,
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
    /// Element count of the buffer a one-sided operation's bytes are
    /// counted from: the origin's, the result's for `Get_accumulate` and
    /// `Rget_accumulate`.
    OriginCount,
    /// Datatype of that buffer.
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
    /// A `char *` argument that is not decoded; in Fortran it adds a hidden
    /// length argument at the end, like [`Arg::FileName`].
    Str,
    /// A communicator freed by the call (`MPI_Comm *`, set to `MPI_COMM_NULL`).
    CommFreed,
    /// Output window (`MPI_Win *`).
    WinOut,
    /// A window freed by the call (`MPI_Win *`).
    WinFreed,
    /// A file closed by the call (`MPI_File *`).
    FileClosed,
    /// Number of partitions of a partitioned send or receive: its bytes are
    /// this many times those of the count and datatype of one partition.
    Partitions,
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

macro_rules! table {
    ($($name:literal $class:ident [$($arg:ident),* $(,)?]),* $(,)?) => {
        /// Every wrapped MPI function; op `op::MPI_BASE + i` is `FUNCTIONS[i]`.
        pub static FUNCTIONS: &[Function] = &[
            $(Function { name: $name, class: Class::$class, args: &[$(Arg::$arg),*] }),*
        ];
    };
}

table! {
    // The first twelve lines are the order of the original skeleton: op codes
    // are append-only, so new functions go at the end, whatever their family.
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

    // Environment.
    "MPI_Abort" Other [Comm, Other],
    "MPI_Pcontrol" Other [Level],

    // Blocking point-to-point.
    "MPI_Bsend" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Ssend" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Rsend" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Sendrecv" Sendrecv [SendBuf, SendCount, SendType, Dest, Tag, RecvBuf, RecvCount, RecvType, Source, RecvTag, Comm, Status],
    "MPI_Sendrecv_replace" Sendrecv [SendBuf, SendCount, SendType, Dest, Tag, Source, RecvTag, Comm, Status],

    // Non-blocking point-to-point.
    "MPI_Ibsend" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Issend" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Irsend" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],

    // Persistent point-to-point.
    "MPI_Send_init" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Bsend_init" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Ssend_init" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Rsend_init" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Recv_init" RecvInit [RecvBuf, RecvCount, RecvType, Source, Tag, Comm, RequestOut],
    "MPI_Start" Start [Request],
    "MPI_Startall" Start [RequestCount, Requests],

    // Probes and matched receives.
    "MPI_Probe" Probe [Source, Tag, Comm, Status],
    "MPI_Iprobe" Probe [Source, Tag, Comm, Flag, Status],
    "MPI_Mprobe" Probe [Source, Tag, Comm, MessageOut, Status],
    "MPI_Improbe" Probe [Source, Tag, Comm, Flag, MessageOut, Status],
    "MPI_Mrecv" Recv [RecvBuf, RecvCount, RecvType, Message, Status],
    "MPI_Imrecv" Irecv [RecvBuf, RecvCount, RecvType, Message, RequestOut],

    // Completion.
    "MPI_Waitany" Wait [RequestCount, Requests, Index, Status],
    "MPI_Waitsome" Wait [RequestCount, Requests, OutCount, Indices, Statuses],
    "MPI_Test" Test [Request, Flag, Status],
    "MPI_Testall" Test [RequestCount, Requests, Flag, Statuses],
    "MPI_Testany" Test [RequestCount, Requests, Index, Flag, Status],
    "MPI_Testsome" Test [RequestCount, Requests, OutCount, Indices, Statuses],
    "MPI_Request_free" RequestMisc [Request],
    "MPI_Cancel" RequestMisc [Request],

    // Blocking collectives.
    "MPI_Gather" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm],
    "MPI_Gatherv" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Root, Comm],
    "MPI_Scatter" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm],
    "MPI_Scatterv" Collective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCount, RecvType, Root, Comm],
    "MPI_Allgather" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Allgatherv" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Alltoall" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Alltoallv" Collective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Alltoallw" Collective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm],
    "MPI_Reduce" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Root, Comm],
    "MPI_Reduce_scatter" Collective [SendBuf, RecvBuf, RecvCounts, SendType, Other, Comm],
    "MPI_Reduce_scatter_block" Collective [SendBuf, RecvBuf, RecvCount, SendType, Other, Comm],
    "MPI_Scan" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm],
    "MPI_Exscan" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm],
    "MPI_Neighbor_allgather" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Neighbor_allgatherv" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Neighbor_alltoall" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Neighbor_alltoallv" Collective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Neighbor_alltoallw" Collective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm],

    // Non-blocking collectives.
    "MPI_Ibarrier" Icollective [Comm, RequestOut],
    "MPI_Ibcast" Icollective [SendBuf, SendCount, SendType, Root, Comm, RequestOut],
    "MPI_Igather" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm, RequestOut],
    "MPI_Igatherv" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Root, Comm, RequestOut],
    "MPI_Iscatter" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm, RequestOut],
    "MPI_Iscatterv" Icollective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCount, RecvType, Root, Comm, RequestOut],
    "MPI_Iallgather" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Iallgatherv" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ialltoall" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Ialltoallv" Icollective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ialltoallw" Icollective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm, RequestOut],
    "MPI_Ireduce" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Root, Comm, RequestOut],
    "MPI_Iallreduce" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm, RequestOut],
    "MPI_Ireduce_scatter" Icollective [SendBuf, RecvBuf, RecvCounts, SendType, Other, Comm, RequestOut],
    "MPI_Ireduce_scatter_block" Icollective [SendBuf, RecvBuf, RecvCount, SendType, Other, Comm, RequestOut],
    "MPI_Iscan" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm, RequestOut],
    "MPI_Iexscan" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm, RequestOut],
    "MPI_Ineighbor_allgather" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_allgatherv" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_alltoall" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_alltoallv" Icollective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_alltoallw" Icollective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm, RequestOut],

    // Communicators and topologies.
    "MPI_Comm_dup" CommCreate [Comm, NewComm],
    "MPI_Comm_dup_with_info" CommCreate [Comm, Other, NewComm],
    "MPI_Comm_idup" CommCreate [Comm, NewComm, RequestOut],
    "MPI_Comm_split" CommCreate [Comm, Other, Other, NewComm],
    "MPI_Comm_split_type" CommCreate [Comm, Other, Other, Other, NewComm],
    "MPI_Comm_create" CommCreate [Comm, Other, NewComm],
    "MPI_Comm_create_group" CommCreate [Comm, Other, Other, NewComm],
    "MPI_Intercomm_create" CommCreate [Comm, Other, Comm2, Other, Other, NewComm],
    "MPI_Intercomm_merge" CommCreate [Comm, Other, NewComm],
    "MPI_Cart_create" CommCreate [Comm, Other, Other, Other, Other, NewComm],
    "MPI_Cart_sub" CommCreate [Comm, Other, NewComm],
    "MPI_Graph_create" CommCreate [Comm, Other, Other, Other, Other, NewComm],
    "MPI_Dist_graph_create" CommCreate [Comm, Other, Other, Other, Other, Other, Other, Other, NewComm],
    "MPI_Dist_graph_create_adjacent" CommCreate [Comm, Other, Other, Other, Other, Other, Other, Other, Other, NewComm],
    "MPI_Comm_get_parent" CommCreate [NewComm],
    "MPI_Comm_free" CommFree [CommFreed],
    "MPI_Comm_disconnect" CommFree [CommFreed],

    // Groups: timed only.
    "MPI_Comm_group" Other [Comm, Other],
    "MPI_Comm_remote_group" Other [Comm, Other],
    "MPI_Group_incl" Other [Other, Other, Other, Other],
    "MPI_Group_excl" Other [Other, Other, Other, Other],
    "MPI_Group_range_incl" Other [Other, Other, Other, Other],
    "MPI_Group_range_excl" Other [Other, Other, Other, Other],
    "MPI_Group_union" Other [Other, Other, Other],
    "MPI_Group_intersection" Other [Other, Other, Other],
    "MPI_Group_difference" Other [Other, Other, Other],
    "MPI_Group_free" Other [Other],

    // One-sided: windows.
    "MPI_Win_create" Win [Other, Other, Other, Other, Comm, WinOut],
    "MPI_Win_allocate" Win [Other, Other, Other, Comm, Other, WinOut],
    "MPI_Win_allocate_shared" Win [Other, Other, Other, Comm, Other, WinOut],
    "MPI_Win_create_dynamic" Win [Other, Comm, WinOut],
    "MPI_Win_free" Win [WinFreed],
    "MPI_Win_attach" Win [Win, Other, Other],
    "MPI_Win_detach" Win [Win, Other],

    // One-sided: data movement.
    "MPI_Put" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win],
    "MPI_Get" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win],
    "MPI_Accumulate" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win],
    // The result buffer is the one counted: it is always significant,
    // while the origin is ignored under `MPI_NO_OP`, the usual atomic read
    // of ARMCI-style libraries (Global Arrays, NWChem).
    "MPI_Get_accumulate" Rma [Other, Other, Other, Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win],
    "MPI_Fetch_and_op" Rma [Other, Other, OriginType, TargetRank, Other, Other, Win],
    "MPI_Compare_and_swap" Rma [Other, Other, Other, OriginType, TargetRank, Other, Win],
    "MPI_Rput" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win, RequestOut],
    "MPI_Rget" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win, RequestOut],
    "MPI_Raccumulate" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win, RequestOut],
    "MPI_Rget_accumulate" Rma [Other, Other, Other, Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win, RequestOut],

    // One-sided: synchronisation.
    "MPI_Win_fence" RmaSync [Other, Win],
    "MPI_Win_start" RmaSync [Other, Other, Win],
    "MPI_Win_complete" RmaSync [Win],
    "MPI_Win_post" RmaSync [Other, Other, Win],
    "MPI_Win_wait" RmaSync [Win],
    "MPI_Win_test" RmaSync [Win, Flag],
    "MPI_Win_lock" RmaSync [Other, TargetRank, Other, Win],
    "MPI_Win_unlock" RmaSync [TargetRank, Win],
    "MPI_Win_lock_all" RmaSync [Other, Win],
    "MPI_Win_unlock_all" RmaSync [Win],
    "MPI_Win_flush" RmaSync [TargetRank, Win],
    "MPI_Win_flush_all" RmaSync [Win],
    "MPI_Win_flush_local" RmaSync [TargetRank, Win],
    "MPI_Win_flush_local_all" RmaSync [Win],
    "MPI_Win_sync" RmaSync [Win],

    // MPI-IO: file management.
    "MPI_File_open" FileMeta [Comm, FileName, Other, Other, FileOut],
    "MPI_File_close" FileMeta [FileClosed],
    "MPI_File_delete" FileMeta [FileName, Other],
    "MPI_File_set_size" FileMeta [File, Other],
    "MPI_File_preallocate" FileMeta [File, Other],
    "MPI_File_sync" FileMeta [File],
    "MPI_File_set_view" FileMeta [File, Other, Other, Other, Str, Other],
    "MPI_File_seek" FileMeta [File, Offset, Other],
    "MPI_File_seek_shared" FileMeta [File, Offset, Other],
    "MPI_File_set_atomicity" FileMeta [File, Other],

    // MPI-IO: reads.
    "MPI_File_read" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_all" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_at" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_at_all" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_shared" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_ordered" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_iread" FileRead [File, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_all" FileRead [File, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_at" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_at_all" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_shared" FileRead [File, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_read_all_begin" FileRead [File, RecvBuf, RecvCount, RecvType],
    "MPI_File_read_all_end" FileRead [File, Other, Status],
    "MPI_File_read_at_all_begin" FileRead [File, Offset, RecvBuf, RecvCount, RecvType],
    "MPI_File_read_at_all_end" FileRead [File, Other, Status],
    "MPI_File_read_ordered_begin" FileRead [File, RecvBuf, RecvCount, RecvType],
    "MPI_File_read_ordered_end" FileRead [File, Other, Status],

    // MPI-IO: writes.
    "MPI_File_write" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_all" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_at" FileWrite [File, Offset, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_at_all" FileWrite [File, Offset, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_shared" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_ordered" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_iwrite" FileWrite [File, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_all" FileWrite [File, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_at" FileWrite [File, Offset, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_at_all" FileWrite [File, Offset, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_shared" FileWrite [File, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_write_all_begin" FileWrite [File, SendBuf, SendCount, SendType],
    "MPI_File_write_all_end" FileWrite [File, Other, Status],
    "MPI_File_write_at_all_begin" FileWrite [File, Offset, SendBuf, SendCount, SendType],
    "MPI_File_write_at_all_end" FileWrite [File, Other, Status],
    "MPI_File_write_ordered_begin" FileWrite [File, SendBuf, SendCount, SendType],
    "MPI_File_write_ordered_end" FileWrite [File, Other, Status],

    // Dynamic processes (appended: op codes stay stable). The communicators
    // they create are defined like any other; members of another world have
    // no world rank here.
    "MPI_Comm_spawn" CommCreate [Str, Str, Other, Other, Other, Comm, NewComm, Other],
    "MPI_Comm_spawn_multiple" CommCreate [Other, Str, Str, Other, Other, Other, Comm, NewComm, Other],
    "MPI_Comm_accept" CommCreate [Str, Other, Other, Comm, NewComm],
    "MPI_Comm_connect" CommCreate [Str, Other, Other, Comm, NewComm],
    "MPI_Comm_join" CommCreate [Other, NewComm],
    "MPI_Open_port" Other [Other, Str],
    "MPI_Close_port" Other [Str],
    "MPI_Publish_name" Other [Str, Other, Str],
    "MPI_Unpublish_name" Other [Str, Other, Str],
    "MPI_Lookup_name" Other [Str, Other, Str],

    // Queries and settings on communicators: never recorded, wrapped so that
    // a virtualised world is substituted (`docs/mpi.md`, "Virtualised
    // worlds"). Attribute calls are deliberately absent: the predefined
    // attributes (`MPI_APPNUM`, `MPI_UNIVERSE_SIZE`, ...) live on the real
    // world only, so they must reach it.
    "MPI_Comm_size" Query [Comm, Other],
    "MPI_Comm_rank" Query [Comm, Other],
    "MPI_Comm_compare" Query [Comm, Comm2, Other],
    "MPI_Comm_test_inter" Query [Comm, Other],
    "MPI_Comm_remote_size" Query [Comm, Other],
    "MPI_Comm_set_errhandler" Query [Comm, Other],
    "MPI_Comm_get_errhandler" Query [Comm, Other],
    "MPI_Comm_call_errhandler" Query [Comm, Other],
    "MPI_Comm_set_name" Query [Comm, Str],
    "MPI_Comm_get_name" Query [Comm, Str, Other],
    "MPI_Comm_set_info" Query [Comm, Other],
    "MPI_Comm_get_info" Query [Comm, Other],
    "MPI_Topo_test" Query [Comm, Other],
    "MPI_Cart_map" Query [Comm, Other, Other, Other, Other],
    "MPI_Graph_map" Query [Comm, Other, Other, Other, Other],
    "MPI_Pack" Query [Other, Other, Other, Other, Other, Other, Comm],
    "MPI_Unpack" Query [Other, Other, Other, Other, Other, Other, Comm],
    "MPI_Pack_size" Query [Other, Other, Comm, Other],

    // Large-count variants (MPI 4.0): the same roles, every count an
    // `MPI_Count` (64 bits) and count arrays `MPI_Count[]`; the name's `_c`
    // tells the probe (`build.rs`). No Fortran entry points: MPICH gives them
    // only as `use mpi_f08` specific procedures of its own naming.
    "MPI_Send_c" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Bsend_c" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Ssend_c" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Rsend_c" Send [SendBuf, SendCount, SendType, Dest, Tag, Comm],
    "MPI_Recv_c" Recv [RecvBuf, RecvCount, RecvType, Source, Tag, Comm, Status],
    "MPI_Isend_c" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Ibsend_c" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Issend_c" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Irsend_c" Isend [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Irecv_c" Irecv [RecvBuf, RecvCount, RecvType, Source, Tag, Comm, RequestOut],
    "MPI_Send_init_c" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Bsend_init_c" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Ssend_init_c" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Rsend_init_c" SendInit [SendBuf, SendCount, SendType, Dest, Tag, Comm, RequestOut],
    "MPI_Recv_init_c" RecvInit [RecvBuf, RecvCount, RecvType, Source, Tag, Comm, RequestOut],
    "MPI_Sendrecv_c" Sendrecv [SendBuf, SendCount, SendType, Dest, Tag, RecvBuf, RecvCount, RecvType, Source, RecvTag, Comm, Status],
    "MPI_Sendrecv_replace_c" Sendrecv [SendBuf, SendCount, SendType, Dest, Tag, Source, RecvTag, Comm, Status],
    "MPI_Mrecv_c" Recv [RecvBuf, RecvCount, RecvType, Message, Status],
    "MPI_Imrecv_c" Irecv [RecvBuf, RecvCount, RecvType, Message, RequestOut],
    "MPI_Bcast_c" Collective [SendBuf, SendCount, SendType, Root, Comm],
    "MPI_Gather_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm],
    "MPI_Gatherv_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Root, Comm],
    "MPI_Scatter_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm],
    "MPI_Scatterv_c" Collective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCount, RecvType, Root, Comm],
    "MPI_Allgather_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Allgatherv_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Alltoall_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Alltoallv_c" Collective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Alltoallw_c" Collective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm],
    "MPI_Reduce_c" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Root, Comm],
    "MPI_Allreduce_c" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm],
    "MPI_Reduce_scatter_c" Collective [SendBuf, RecvBuf, RecvCounts, SendType, Other, Comm],
    "MPI_Reduce_scatter_block_c" Collective [SendBuf, RecvBuf, RecvCount, SendType, Other, Comm],
    "MPI_Scan_c" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm],
    "MPI_Exscan_c" Collective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm],
    "MPI_Neighbor_allgather_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Neighbor_allgatherv_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Neighbor_alltoall_c" Collective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm],
    "MPI_Neighbor_alltoallv_c" Collective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm],
    "MPI_Neighbor_alltoallw_c" Collective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm],
    "MPI_Ibcast_c" Icollective [SendBuf, SendCount, SendType, Root, Comm, RequestOut],
    "MPI_Igather_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm, RequestOut],
    "MPI_Igatherv_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Root, Comm, RequestOut],
    "MPI_Iscatter_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Root, Comm, RequestOut],
    "MPI_Iscatterv_c" Icollective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCount, RecvType, Root, Comm, RequestOut],
    "MPI_Iallgather_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Iallgatherv_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ialltoall_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Ialltoallv_c" Icollective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ialltoallw_c" Icollective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm, RequestOut],
    "MPI_Ireduce_c" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Root, Comm, RequestOut],
    "MPI_Iallreduce_c" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm, RequestOut],
    "MPI_Ireduce_scatter_c" Icollective [SendBuf, RecvBuf, RecvCounts, SendType, Other, Comm, RequestOut],
    "MPI_Ireduce_scatter_block_c" Icollective [SendBuf, RecvBuf, RecvCount, SendType, Other, Comm, RequestOut],
    "MPI_Iscan_c" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm, RequestOut],
    "MPI_Iexscan_c" Icollective [SendBuf, RecvBuf, SendCount, SendType, Other, Comm, RequestOut],
    "MPI_Ineighbor_allgather_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_allgatherv_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_alltoall_c" Icollective [SendBuf, SendCount, SendType, RecvBuf, RecvCount, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_alltoallv_c" Icollective [SendBuf, SendCounts, Other, SendType, RecvBuf, RecvCounts, Other, RecvType, Comm, RequestOut],
    "MPI_Ineighbor_alltoallw_c" Icollective [SendBuf, SendCounts, Other, SendTypes, RecvBuf, RecvCounts, Other, RecvTypes, Comm, RequestOut],
    "MPI_Put_c" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win],
    "MPI_Get_c" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win],
    "MPI_Accumulate_c" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win],
    "MPI_Get_accumulate_c" Rma [Other, Other, Other, Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win],
    "MPI_Rput_c" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win, RequestOut],
    "MPI_Rget_c" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Win, RequestOut],
    "MPI_Raccumulate_c" Rma [Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win, RequestOut],
    "MPI_Rget_accumulate_c" Rma [Other, Other, Other, Other, OriginCount, OriginType, TargetRank, Other, Other, Other, Other, Win, RequestOut],
    "MPI_File_read_c" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_all_c" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_at_c" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_at_all_c" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_shared_c" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_read_ordered_c" FileRead [File, RecvBuf, RecvCount, RecvType, Status],
    "MPI_File_iread_c" FileRead [File, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_all_c" FileRead [File, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_at_c" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_at_all_c" FileRead [File, Offset, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_iread_shared_c" FileRead [File, RecvBuf, RecvCount, RecvType, RequestOut],
    "MPI_File_read_all_begin_c" FileRead [File, RecvBuf, RecvCount, RecvType],
    "MPI_File_read_at_all_begin_c" FileRead [File, Offset, RecvBuf, RecvCount, RecvType],
    "MPI_File_read_ordered_begin_c" FileRead [File, RecvBuf, RecvCount, RecvType],
    "MPI_File_write_c" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_all_c" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_at_c" FileWrite [File, Offset, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_at_all_c" FileWrite [File, Offset, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_shared_c" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_write_ordered_c" FileWrite [File, SendBuf, SendCount, SendType, Status],
    "MPI_File_iwrite_c" FileWrite [File, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_all_c" FileWrite [File, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_at_c" FileWrite [File, Offset, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_at_all_c" FileWrite [File, Offset, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_iwrite_shared_c" FileWrite [File, SendBuf, SendCount, SendType, RequestOut],
    "MPI_File_write_all_begin_c" FileWrite [File, SendBuf, SendCount, SendType],
    "MPI_File_write_at_all_begin_c" FileWrite [File, Offset, SendBuf, SendCount, SendType],
    "MPI_File_write_ordered_begin_c" FileWrite [File, SendBuf, SendCount, SendType],

    // Partitioned point-to-point (MPI 4.0): a persistent send or receive of
    // `partitions` x `count` elements, followed like `MPI_Send_init` requests
    // (each `MPI_Start` is one message of all partitions). `Pready*` and
    // `Parrived` are timed only.
    "MPI_Psend_init" SendInit [SendBuf, Partitions, SendCount, SendType, Dest, Tag, Comm, Other, RequestOut],
    "MPI_Precv_init" RecvInit [RecvBuf, Partitions, RecvCount, RecvType, Source, Tag, Comm, Other, RequestOut],
    "MPI_Pready" Other [Other, Other],
    "MPI_Pready_range" Other [Other, Other, Other],
    "MPI_Pready_list" Other [Other, Other, Other],
    "MPI_Parrived" Other [Other, Other, Other],

    // Persistent collectives and `Isendrecv` (MPI 4.0): timed only, their
    // requests not followed (`docs/mpi.md` says what this leaves out).
    "MPI_Barrier_init" Other [Comm, Other, Other],
    "MPI_Bcast_init" Other [Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Gather_init" Other [Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Gatherv_init" Other [Other, Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Scatter_init" Other [Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Scatterv_init" Other [Other, Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Allgather_init" Other [Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Allgatherv_init" Other [Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Alltoall_init" Other [Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Alltoallv_init" Other [Other, Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Alltoallw_init" Other [Other, Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Reduce_init" Other [Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Allreduce_init" Other [Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Reduce_scatter_init" Other [Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Reduce_scatter_block_init" Other [Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Scan_init" Other [Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Exscan_init" Other [Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Neighbor_allgather_init" Other [Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Neighbor_allgatherv_init" Other [Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Neighbor_alltoall_init" Other [Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Neighbor_alltoallv_init" Other [Other, Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Neighbor_alltoallw_init" Other [Other, Other, Other, Other, Other, Other, Other, Other, Comm, Other, Other],
    "MPI_Isendrecv" Other [Other, Other, Other, Other, Other, Other, Other, Other, Other, Other, Comm, Other],
    "MPI_Isendrecv_replace" Other [Other, Other, Other, Other, Other, Other, Other, Comm, Other],

    // Communicators (MPI 4.0).
    "MPI_Comm_idup_with_info" CommCreate [Comm, Other, NewComm, RequestOut],

    // Sessions (MPI 4.0): timed only. A communicator made from a session's
    // group is learnt where it is first used.
    "MPI_Session_init" Other [Other, Other, Other],
    "MPI_Session_finalize" Other [Other],
    "MPI_Session_get_num_psets" Other [Other, Other, Other],
    "MPI_Session_get_nth_pset" Other [Other, Other, Other, Other, Str],
    "MPI_Session_get_info" Other [Other, Other],
    "MPI_Session_get_pset_info" Other [Other, Str, Other],
    "MPI_Session_set_errhandler" Other [Other, Other],
    "MPI_Session_get_errhandler" Other [Other, Other],
    "MPI_Session_call_errhandler" Other [Other, Other],
    "MPI_Group_from_session_pset" Other [Other, Str, Other],
    "MPI_Comm_create_from_group" CommCreate [Other, Str, Other, Other, NewComm],
}

/// Whether `f` moves data or synchronises, but is only timed and counted:
/// the persistent collectives (`MPI_Allreduce_init`, ...) and
/// `MPI_Isendrecv(_replace)` of MPI 4.0, whose messages and collective
/// instances are in no matrix, byte count or wait state. The server says so
/// in the diagnostics of a program that calls them.
pub fn timed_only_communication(f: &Function) -> bool {
    // `MPI_Session_init` ends alike but has no communicator.
    let persistent_collective = f.name.ends_with("_init") && f.args.contains(&Arg::Comm);
    f.class == Class::Other && (persistent_collective || f.name.starts_with("MPI_Isendrecv"))
}

/// The function called `name` (C spelling), if wrapped.
pub fn by_name(name: &str) -> Option<(usize, &'static Function)> {
    FUNCTIONS.iter().enumerate().find(|(_, f)| f.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_unique_and_fits_the_mpi_op_range() {
        let mut names: Vec<_> = FUNCTIONS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FUNCTIONS.len());
        assert!(FUNCTIONS.len() < 0x400 - 1);
    }

    #[test]
    fn the_first_op_codes_never_move() {
        let first = [
            "MPI_Init",
            "MPI_Init_thread",
            "MPI_Finalize",
            "MPI_Send",
            "MPI_Recv",
            "MPI_Isend",
            "MPI_Irecv",
            "MPI_Wait",
            "MPI_Waitall",
            "MPI_Barrier",
            "MPI_Bcast",
            "MPI_Allreduce",
        ];
        for (i, name) in first.iter().enumerate() {
            assert_eq!(FUNCTIONS[i].name, *name);
        }
    }

    #[test]
    fn a_decoded_role_appears_at_most_once_per_function() {
        for f in FUNCTIONS {
            for (i, a) in f.args.iter().enumerate() {
                if matches!(a, Arg::Other | Arg::Str) {
                    continue;
                }
                assert!(!f.args[i + 1..].contains(a), "{} repeats {a:?}", f.name);
            }
        }
    }

    #[test]
    fn only_persistent_collectives_and_isendrecv_are_timed_only_communication() {
        let names: Vec<&str> = FUNCTIONS
            .iter()
            .filter(|f| timed_only_communication(f))
            .map(|f| f.name)
            .collect();
        assert!(names.contains(&"MPI_Allreduce_init"));
        assert!(names.contains(&"MPI_Isendrecv_replace"));
        assert!(!names.contains(&"MPI_Send_init"));
        assert!(!names.contains(&"MPI_Psend_init"));
        assert!(!names.contains(&"MPI_Session_init"));
        assert_eq!(names.len(), 22 + 2, "{names:?}");
    }

    #[test]
    fn functions_that_post_requests_say_where_the_request_goes() {
        for f in FUNCTIONS {
            let posts = matches!(
                f.class,
                Class::Isend
                    | Class::Irecv
                    | Class::SendInit
                    | Class::RecvInit
                    | Class::Icollective
            );
            if posts {
                assert_eq!(f.args.last(), Some(&Arg::RequestOut), "{}", f.name);
            }
        }
    }
}
