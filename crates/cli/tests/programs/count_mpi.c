/* An independent count of MPI calls, to check Hark's numbers against.
 *
 * Preloaded (before Hark's probe) into an MPI program, it wraps a few MPI
 * functions (their C entry points, and under Open MPI their Fortran ones
 * too), counts each call and the bytes it sends (count x type size; for
 * one-sided calls the origin buffer's, the result buffer's for
 * MPI_Get_accumulate, one element for MPI_Fetch_and_op and
 * MPI_Compare_and_swap), forwards to the next definition found with
 * dlsym(RTLD_NEXT) -- Hark's wrapper, then the MPI library -- and at
 * MPI_Finalize (or mpi_finalize_) writes one line per function, "name calls
 * bytes", to $COUNT_DIR/count.<world rank>.
 *
 * It shares no code with Hark: it is the yardstick. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SEND, ISEND, SSEND, RSEND, RECV, IRECV, SENDRECV, WAIT, WAITALL, WAITANY,
       TEST, IPROBE, PROBE, BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER,
       ALLGATHERV, ALLTOALL, ALLTOALLV, GATHER, SCATTER, PUT, GET, ACCUMULATE,
       GET_ACCUMULATE, FETCH_AND_OP, COMPARE_AND_SWAP, COMM_SPLIT, COMM_FREE,
       /* MPI 4.0 (counted where the library has them) */
       START, SEND_C, RECV_C, ISEND_C, IRECV_C, SENDRECV_C, ALLREDUCE_C, BCAST_C,
       PSEND_INIT, PRECV_INIT, PREADY, PREADY_RANGE, PREADY_LIST, PARRIVED,
       ALLREDUCE_INIT, BCAST_INIT, BARRIER_INIT, ISENDRECV, ISENDRECV_REPLACE,
       COMM_IDUP_WITH_INFO, SESSION_INIT, SESSION_FINALIZE, SESSION_GET_NUM_PSETS,
       SESSION_GET_NTH_PSET, SESSION_GET_INFO, SESSION_GET_PSET_INFO,
       GROUP_FROM_SESSION_PSET, COMM_CREATE_FROM_GROUP, NFUNC };
static const char *names[NFUNC] = {
    "MPI_Send", "MPI_Isend", "MPI_Ssend", "MPI_Rsend", "MPI_Recv", "MPI_Irecv",
    "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Test",
    "MPI_Iprobe", "MPI_Probe", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce",
    "MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
    "MPI_Alltoallv", "MPI_Gather", "MPI_Scatter", "MPI_Put", "MPI_Get",
    "MPI_Accumulate", "MPI_Get_accumulate", "MPI_Fetch_and_op",
    "MPI_Compare_and_swap", "MPI_Comm_split", "MPI_Comm_free",
    "MPI_Start", "MPI_Send_c", "MPI_Recv_c", "MPI_Isend_c", "MPI_Irecv_c", "MPI_Sendrecv_c",
    "MPI_Allreduce_c", "MPI_Bcast_c", "MPI_Psend_init", "MPI_Precv_init", "MPI_Pready",
    "MPI_Pready_range", "MPI_Pready_list", "MPI_Parrived", "MPI_Allreduce_init",
    "MPI_Bcast_init", "MPI_Barrier_init", "MPI_Isendrecv", "MPI_Isendrecv_replace",
    "MPI_Comm_idup_with_info", "MPI_Session_init", "MPI_Session_finalize",
    "MPI_Session_get_num_psets", "MPI_Session_get_nth_pset", "MPI_Session_get_info",
    "MPI_Session_get_pset_info", "MPI_Group_from_session_pset", "MPI_Comm_create_from_group"};
static unsigned long long calls[NFUNC], bytes[NFUNC];
/* Atomic: under MPI_THREAD_MULTIPLE threads call MPI at once. */
#define ADD(counter, v) __atomic_fetch_add(&(counter), (v), __ATOMIC_RELAXED)

static void *next(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "count_mpi: no next %s\n", name);
        abort();
    }
    return p;
}

static unsigned long long size_of(int count, MPI_Datatype t) {
    int s = 0;
    if (count <= 0) return 0;
    PMPI_Type_size(t, &s);
    return (unsigned long long)count * (unsigned long long)s;
}

#define FORWARD(idx, type, name, args)           \
    static type real = 0;                        \
    if (!real) real = (type)next(name);          \
    ADD(calls[idx], 1);                          \
    return real args;

typedef int (*send_t)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*isend_t)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*recv_t)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*irecv_t)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

int MPI_Send(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
    if (d != MPI_PROC_NULL) ADD(bytes[SEND], size_of(c, t));
    FORWARD(SEND, send_t, "MPI_Send", (b, c, t, d, tag, comm))
}
int MPI_Ssend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
    if (d != MPI_PROC_NULL) ADD(bytes[SSEND], size_of(c, t));
    FORWARD(SSEND, send_t, "MPI_Ssend", (b, c, t, d, tag, comm))
}
int MPI_Rsend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
    if (d != MPI_PROC_NULL) ADD(bytes[RSEND], size_of(c, t));
    FORWARD(RSEND, send_t, "MPI_Rsend", (b, c, t, d, tag, comm))
}
int MPI_Isend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r) {
    if (d != MPI_PROC_NULL) ADD(bytes[ISEND], size_of(c, t));
    FORWARD(ISEND, isend_t, "MPI_Isend", (b, c, t, d, tag, comm, r))
}
int MPI_Recv(void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st) {
    FORWARD(RECV, recv_t, "MPI_Recv", (b, c, t, s, tag, comm, st))
}
int MPI_Irecv(void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r) {
    FORWARD(IRECV, irecv_t, "MPI_Irecv", (b, c, t, s, tag, comm, r))
}
typedef int (*sendrecv_t)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype,
                          int, int, MPI_Comm, MPI_Status *);
int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int d, int stag, void *rb, int rc,
                 MPI_Datatype rt, int s, int rtag, MPI_Comm comm, MPI_Status *status) {
    if (d != MPI_PROC_NULL) ADD(bytes[SENDRECV], size_of(sc, st));
    FORWARD(SENDRECV, sendrecv_t, "MPI_Sendrecv", (sb, sc, st, d, stag, rb, rc, rt, s, rtag, comm, status))
}
typedef int (*wait_t)(MPI_Request *, MPI_Status *);
int MPI_Wait(MPI_Request *r, MPI_Status *s) { FORWARD(WAIT, wait_t, "MPI_Wait", (r, s)) }
typedef int (*waitall_t)(int, MPI_Request *, MPI_Status *);
int MPI_Waitall(int n, MPI_Request *r, MPI_Status *s) { FORWARD(WAITALL, waitall_t, "MPI_Waitall", (n, r, s)) }
typedef int (*waitany_t)(int, MPI_Request *, int *, MPI_Status *);
int MPI_Waitany(int n, MPI_Request *r, int *i, MPI_Status *s) { FORWARD(WAITANY, waitany_t, "MPI_Waitany", (n, r, i, s)) }
typedef int (*test_t)(MPI_Request *, int *, MPI_Status *);
int MPI_Test(MPI_Request *r, int *f, MPI_Status *s) { FORWARD(TEST, test_t, "MPI_Test", (r, f, s)) }
typedef int (*iprobe_t)(int, int, MPI_Comm, int *, MPI_Status *);
int MPI_Iprobe(int s, int t, MPI_Comm c, int *f, MPI_Status *st) { FORWARD(IPROBE, iprobe_t, "MPI_Iprobe", (s, t, c, f, st)) }
typedef int (*probe_t)(int, int, MPI_Comm, MPI_Status *);
int MPI_Probe(int s, int t, MPI_Comm c, MPI_Status *st) { FORWARD(PROBE, probe_t, "MPI_Probe", (s, t, c, st)) }
typedef int (*barrier_t)(MPI_Comm);
int MPI_Barrier(MPI_Comm c) { FORWARD(BARRIER, barrier_t, "MPI_Barrier", (c)) }
typedef int (*bcast_t)(void *, int, MPI_Datatype, int, MPI_Comm);
int MPI_Bcast(void *b, int c, MPI_Datatype t, int root, MPI_Comm comm) {
    FORWARD(BCAST, bcast_t, "MPI_Bcast", (b, c, t, root, comm))
}
typedef int (*reduce_t)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
int MPI_Reduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
    FORWARD(REDUCE, reduce_t, "MPI_Reduce", (s, r, c, t, op, root, comm))
}
typedef int (*allreduce_t)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
int MPI_Allreduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    FORWARD(ALLREDUCE, allreduce_t, "MPI_Allreduce", (s, r, c, t, op, comm))
}
typedef int (*allgather_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm) {
    FORWARD(ALLGATHER, allgather_t, "MPI_Allgather", (s, sc, st, r, rc, rt, comm))
}
typedef int (*allgatherv_t)(const void *, int, MPI_Datatype, void *, const int *, const int *, MPI_Datatype, MPI_Comm);
int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *d, MPI_Datatype rt, MPI_Comm comm) {
    FORWARD(ALLGATHERV, allgatherv_t, "MPI_Allgatherv", (s, sc, st, r, rc, d, rt, comm))
}
typedef int (*alltoall_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm) {
    FORWARD(ALLTOALL, alltoall_t, "MPI_Alltoall", (s, sc, st, r, rc, rt, comm))
}
typedef int (*alltoallv_t)(const void *, const int *, const int *, MPI_Datatype, void *, const int *, const int *, MPI_Datatype, MPI_Comm);
int MPI_Alltoallv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, const int *rc, const int *rd, MPI_Datatype rt, MPI_Comm comm) {
    FORWARD(ALLTOALLV, alltoallv_t, "MPI_Alltoallv", (s, sc, sd, st, r, rc, rd, rt, comm))
}
typedef int (*gather_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm) {
    FORWARD(GATHER, gather_t, "MPI_Gather", (s, sc, st, r, rc, rt, root, comm))
}
int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm) {
    FORWARD(SCATTER, gather_t, "MPI_Scatter", (s, sc, st, r, rc, rt, root, comm))
}

typedef int (*put_t)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win);
int MPI_Put(const void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win w) {
    if (r != MPI_PROC_NULL) ADD(bytes[PUT], size_of(oc, ot));
    FORWARD(PUT, put_t, "MPI_Put", (o, oc, ot, r, d, tc, tt, w))
}
typedef int (*get_t)(void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win);
int MPI_Get(void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win w) {
    if (r != MPI_PROC_NULL) ADD(bytes[GET], size_of(oc, ot));
    FORWARD(GET, get_t, "MPI_Get", (o, oc, ot, r, d, tc, tt, w))
}
typedef int (*accumulate_t)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype,
                            MPI_Op, MPI_Win);
int MPI_Accumulate(const void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc,
                   MPI_Datatype tt, MPI_Op op, MPI_Win w) {
    if (r != MPI_PROC_NULL) ADD(bytes[ACCUMULATE], size_of(oc, ot));
    FORWARD(ACCUMULATE, accumulate_t, "MPI_Accumulate", (o, oc, ot, r, d, tc, tt, op, w))
}
typedef int (*get_accumulate_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                                MPI_Aint, int, MPI_Datatype, MPI_Op, MPI_Win);
int MPI_Get_accumulate(const void *o, int oc, MPI_Datatype ot, void *res, int rc, MPI_Datatype rt,
                       int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Op op, MPI_Win w) {
    if (r != MPI_PROC_NULL) ADD(bytes[GET_ACCUMULATE], size_of(rc, rt));
    FORWARD(GET_ACCUMULATE, get_accumulate_t, "MPI_Get_accumulate",
            (o, oc, ot, res, rc, rt, r, d, tc, tt, op, w))
}
typedef int (*fetch_and_op_t)(const void *, void *, MPI_Datatype, int, MPI_Aint, MPI_Op, MPI_Win);
int MPI_Fetch_and_op(const void *o, void *res, MPI_Datatype t, int r, MPI_Aint d, MPI_Op op, MPI_Win w) {
    if (r != MPI_PROC_NULL) ADD(bytes[FETCH_AND_OP], size_of(1, t));
    FORWARD(FETCH_AND_OP, fetch_and_op_t, "MPI_Fetch_and_op", (o, res, t, r, d, op, w))
}
typedef int (*compare_and_swap_t)(const void *, const void *, void *, MPI_Datatype, int, MPI_Aint,
                                  MPI_Win);
int MPI_Compare_and_swap(const void *o, const void *c, void *res, MPI_Datatype t, int r, MPI_Aint d,
                         MPI_Win w) {
    if (r != MPI_PROC_NULL) ADD(bytes[COMPARE_AND_SWAP], size_of(1, t));
    FORWARD(COMPARE_AND_SWAP, compare_and_swap_t, "MPI_Compare_and_swap", (o, c, res, t, r, d, w))
}

typedef int (*comm_split_t)(MPI_Comm, int, int, MPI_Comm *);
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *out) {
    FORWARD(COMM_SPLIT, comm_split_t, "MPI_Comm_split", (c, color, key, out))
}
typedef int (*comm_free_t)(MPI_Comm *);
int MPI_Comm_free(MPI_Comm *c) { FORWARD(COMM_FREE, comm_free_t, "MPI_Comm_free", (c)) }

#if MPI_VERSION >= 4
/* MPI 4.0. A partitioned send's bytes are all its partitions', counted at
 * each MPI_Start of its request (the request's bytes are remembered here). */
static unsigned long long size_of_c(MPI_Count count, MPI_Datatype t) {
    MPI_Count s = 0;
    if (count <= 0) return 0;
    PMPI_Type_size_c(t, &s);
    return (unsigned long long)count * (unsigned long long)s;
}
static struct { MPI_Request r; unsigned long long bytes; } psends[64];
static int npsends;

typedef int (*start_t)(MPI_Request *);
int MPI_Start(MPI_Request *r) {
    for (int i = 0; i < npsends; i++)
        if (psends[i].r == *r) ADD(bytes[PSEND_INIT], psends[i].bytes);
    FORWARD(START, start_t, "MPI_Start", (r))
}
/* Not counted: only forgets a freed partitioned send, whose handle MPI
 * may give to the next request. */
typedef int (*request_free_t)(MPI_Request *);
int MPI_Request_free(MPI_Request *r) {
    static request_free_t real = 0;
    if (!real) real = (request_free_t)next("MPI_Request_free");
    for (int i = 0; i < npsends; i++)
        if (psends[i].r == *r) psends[i] = psends[--npsends];
    return real(r);
}
typedef int (*send_c_t)(const void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm);
int MPI_Send_c(const void *b, MPI_Count c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
    if (d != MPI_PROC_NULL) ADD(bytes[SEND_C], size_of_c(c, t));
    FORWARD(SEND_C, send_c_t, "MPI_Send_c", (b, c, t, d, tag, comm))
}
typedef int (*recv_c_t)(void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
int MPI_Recv_c(void *b, MPI_Count c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st) {
    FORWARD(RECV_C, recv_c_t, "MPI_Recv_c", (b, c, t, s, tag, comm, st))
}
typedef int (*isend_c_t)(const void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
int MPI_Isend_c(const void *b, MPI_Count c, MPI_Datatype t, int d, int tag, MPI_Comm comm,
                MPI_Request *r) {
    if (d != MPI_PROC_NULL) ADD(bytes[ISEND_C], size_of_c(c, t));
    FORWARD(ISEND_C, isend_c_t, "MPI_Isend_c", (b, c, t, d, tag, comm, r))
}
typedef int (*irecv_c_t)(void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
int MPI_Irecv_c(void *b, MPI_Count c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r) {
    FORWARD(IRECV_C, irecv_c_t, "MPI_Irecv_c", (b, c, t, s, tag, comm, r))
}
typedef int (*sendrecv_c_t)(const void *, MPI_Count, MPI_Datatype, int, int, void *, MPI_Count,
                            MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
int MPI_Sendrecv_c(const void *sb, MPI_Count sc, MPI_Datatype st, int d, int stag, void *rb,
                   MPI_Count rc, MPI_Datatype rt, int s, int rtag, MPI_Comm comm, MPI_Status *status) {
    if (d != MPI_PROC_NULL) ADD(bytes[SENDRECV_C], size_of_c(sc, st));
    FORWARD(SENDRECV_C, sendrecv_c_t, "MPI_Sendrecv_c",
            (sb, sc, st, d, stag, rb, rc, rt, s, rtag, comm, status))
}
typedef int (*allreduce_c_t)(const void *, void *, MPI_Count, MPI_Datatype, MPI_Op, MPI_Comm);
int MPI_Allreduce_c(const void *s, void *r, MPI_Count c, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    FORWARD(ALLREDUCE_C, allreduce_c_t, "MPI_Allreduce_c", (s, r, c, t, op, comm))
}
typedef int (*bcast_c_t)(void *, MPI_Count, MPI_Datatype, int, MPI_Comm);
int MPI_Bcast_c(void *b, MPI_Count c, MPI_Datatype t, int root, MPI_Comm comm) {
    FORWARD(BCAST_C, bcast_c_t, "MPI_Bcast_c", (b, c, t, root, comm))
}
typedef int (*psend_init_t)(const void *, int, MPI_Count, MPI_Datatype, int, int, MPI_Comm,
                            MPI_Info, MPI_Request *);
int MPI_Psend_init(const void *b, int parts, MPI_Count c, MPI_Datatype t, int d, int tag,
                   MPI_Comm comm, MPI_Info info, MPI_Request *r) {
    static psend_init_t real = 0;
    if (!real) real = (psend_init_t)next("MPI_Psend_init");
    ADD(calls[PSEND_INIT], 1);
    int rc = real(b, parts, c, t, d, tag, comm, info, r);
    if (rc == MPI_SUCCESS && npsends < 64 && d != MPI_PROC_NULL) {
        psends[npsends].r = *r;
        psends[npsends++].bytes = (unsigned long long)parts * size_of_c(c, t);
    }
    return rc;
}
int MPI_Precv_init(void *b, int parts, MPI_Count c, MPI_Datatype t, int s, int tag, MPI_Comm comm,
                   MPI_Info info, MPI_Request *r) {
    FORWARD(PRECV_INIT, psend_init_t, "MPI_Precv_init", (b, parts, c, t, s, tag, comm, info, r))
}
typedef int (*pready_t)(int, MPI_Request);
int MPI_Pready(int p, MPI_Request r) { FORWARD(PREADY, pready_t, "MPI_Pready", (p, r)) }
typedef int (*pready_range_t)(int, int, MPI_Request);
int MPI_Pready_range(int lo, int hi, MPI_Request r) {
    FORWARD(PREADY_RANGE, pready_range_t, "MPI_Pready_range", (lo, hi, r))
}
typedef int (*pready_list_t)(int, int[], MPI_Request);
int MPI_Pready_list(int n, int l[], MPI_Request r) {
    FORWARD(PREADY_LIST, pready_list_t, "MPI_Pready_list", (n, l, r))
}
typedef int (*parrived_t)(MPI_Request, int, int *);
int MPI_Parrived(MPI_Request r, int p, int *f) { FORWARD(PARRIVED, parrived_t, "MPI_Parrived", (r, p, f)) }
typedef int (*allreduce_init_t)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                                MPI_Request *);
int MPI_Allreduce_init(const void *s, void *r, int c, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                       MPI_Info info, MPI_Request *req) {
    FORWARD(ALLREDUCE_INIT, allreduce_init_t, "MPI_Allreduce_init", (s, r, c, t, op, comm, info, req))
}
typedef int (*bcast_init_t)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
int MPI_Bcast_init(void *b, int c, MPI_Datatype t, int root, MPI_Comm comm, MPI_Info info,
                   MPI_Request *req) {
    FORWARD(BCAST_INIT, bcast_init_t, "MPI_Bcast_init", (b, c, t, root, comm, info, req))
}
typedef int (*barrier_init_t)(MPI_Comm, MPI_Info, MPI_Request *);
int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request *req) {
    FORWARD(BARRIER_INIT, barrier_init_t, "MPI_Barrier_init", (comm, info, req))
}
typedef int (*isendrecv_t)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype,
                           int, int, MPI_Comm, MPI_Request *);
int MPI_Isendrecv(const void *sb, int sc, MPI_Datatype st, int d, int stag, void *rb, int rc,
                  MPI_Datatype rt, int s, int rtag, MPI_Comm comm, MPI_Request *req) {
    FORWARD(ISENDRECV, isendrecv_t, "MPI_Isendrecv", (sb, sc, st, d, stag, rb, rc, rt, s, rtag, comm, req))
}
typedef int (*isendrecv_replace_t)(void *, int, MPI_Datatype, int, int, int, int, MPI_Comm,
                                   MPI_Request *);
int MPI_Isendrecv_replace(void *b, int c, MPI_Datatype t, int d, int stag, int s, int rtag,
                          MPI_Comm comm, MPI_Request *req) {
    FORWARD(ISENDRECV_REPLACE, isendrecv_replace_t, "MPI_Isendrecv_replace",
            (b, c, t, d, stag, s, rtag, comm, req))
}
typedef int (*comm_idup_with_info_t)(MPI_Comm, MPI_Info, MPI_Comm *, MPI_Request *);
int MPI_Comm_idup_with_info(MPI_Comm c, MPI_Info info, MPI_Comm *out, MPI_Request *req) {
    FORWARD(COMM_IDUP_WITH_INFO, comm_idup_with_info_t, "MPI_Comm_idup_with_info", (c, info, out, req))
}
typedef int (*session_init_t)(MPI_Info, MPI_Errhandler, MPI_Session *);
int MPI_Session_init(MPI_Info info, MPI_Errhandler e, MPI_Session *s) {
    FORWARD(SESSION_INIT, session_init_t, "MPI_Session_init", (info, e, s))
}
typedef int (*session_finalize_t)(MPI_Session *);
int MPI_Session_finalize(MPI_Session *s) {
    FORWARD(SESSION_FINALIZE, session_finalize_t, "MPI_Session_finalize", (s))
}
typedef int (*session_get_num_psets_t)(MPI_Session, MPI_Info, int *);
int MPI_Session_get_num_psets(MPI_Session s, MPI_Info info, int *n) {
    FORWARD(SESSION_GET_NUM_PSETS, session_get_num_psets_t, "MPI_Session_get_num_psets", (s, info, n))
}
typedef int (*session_get_nth_pset_t)(MPI_Session, MPI_Info, int, int *, char *);
int MPI_Session_get_nth_pset(MPI_Session s, MPI_Info info, int n, int *len, char *name) {
    FORWARD(SESSION_GET_NTH_PSET, session_get_nth_pset_t, "MPI_Session_get_nth_pset",
            (s, info, n, len, name))
}
typedef int (*session_get_info_t)(MPI_Session, MPI_Info *);
int MPI_Session_get_info(MPI_Session s, MPI_Info *info) {
    FORWARD(SESSION_GET_INFO, session_get_info_t, "MPI_Session_get_info", (s, info))
}
typedef int (*session_get_pset_info_t)(MPI_Session, const char *, MPI_Info *);
int MPI_Session_get_pset_info(MPI_Session s, const char *name, MPI_Info *info) {
    FORWARD(SESSION_GET_PSET_INFO, session_get_pset_info_t, "MPI_Session_get_pset_info", (s, name, info))
}
typedef int (*group_from_session_pset_t)(MPI_Session, const char *, MPI_Group *);
int MPI_Group_from_session_pset(MPI_Session s, const char *name, MPI_Group *g) {
    FORWARD(GROUP_FROM_SESSION_PSET, group_from_session_pset_t, "MPI_Group_from_session_pset",
            (s, name, g))
}
typedef int (*comm_create_from_group_t)(MPI_Group, const char *, MPI_Info, MPI_Errhandler,
                                        MPI_Comm *);
int MPI_Comm_create_from_group(MPI_Group g, const char *tag, MPI_Info info, MPI_Errhandler e,
                               MPI_Comm *out) {
    FORWARD(COMM_CREATE_FROM_GROUP, comm_create_from_group_t, "MPI_Comm_create_from_group",
            (g, tag, info, e, out))
}
#endif

typedef int (*finalize_t)(void);
static void write_counts(void) {
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = getenv("COUNT_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/count.%d", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            for (int i = 0; i < NFUNC; i++)
                if (calls[i]) fprintf(f, "%s %llu %llu\n", names[i], calls[i], bytes[i]);
            fclose(f);
        }
    }
}

int MPI_Finalize(void) {
    static finalize_t real = 0;
    if (!real) real = (finalize_t)next("MPI_Finalize");
    write_counts();
    return real();
}

#ifdef OPEN_MPI
/* Open MPI's Fortran bindings (mpif.h and `use mpi`: mpi_send_, ...) call
 * PMPI_* directly, so a Fortran program's calls are counted at their own
 * entry points. (MPICH's call the C MPI_* functions, which count them.) */
#define FFORWARD(idx, type, name, args)          \
    static type real = 0;                        \
    if (!real) real = (type)next(name);          \
    ADD(calls[idx], 1);                          \
    real args;

static unsigned long long f_size_of(const MPI_Fint *count, const MPI_Fint *type) {
    return size_of(*count, MPI_Type_f2c(*type));
}

typedef void (*f_send_t)(const void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                         MPI_Fint *);
void mpi_send_(const void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *d, MPI_Fint *tag, MPI_Fint *comm,
               MPI_Fint *e) {
    if (*d != MPI_PROC_NULL) ADD(bytes[SEND], f_size_of(c, t));
    FFORWARD(SEND, f_send_t, "mpi_send_", (b, c, t, d, tag, comm, e))
}
void mpi_rsend_(const void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *d, MPI_Fint *tag,
                MPI_Fint *comm, MPI_Fint *e) {
    if (*d != MPI_PROC_NULL) ADD(bytes[RSEND], f_size_of(c, t));
    FFORWARD(RSEND, f_send_t, "mpi_rsend_", (b, c, t, d, tag, comm, e))
}
typedef void (*f_isend_t)(const void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                          MPI_Fint *, MPI_Fint *, MPI_Fint *);
void mpi_isend_(const void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *d, MPI_Fint *tag,
                MPI_Fint *comm, MPI_Fint *r, MPI_Fint *e) {
    if (*d != MPI_PROC_NULL) ADD(bytes[ISEND], f_size_of(c, t));
    FFORWARD(ISEND, f_isend_t, "mpi_isend_", (b, c, t, d, tag, comm, r, e))
}
typedef void (*f_recv_t)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                         MPI_Fint *, MPI_Fint *);
void mpi_recv_(void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *s, MPI_Fint *tag, MPI_Fint *comm,
               MPI_Fint *st, MPI_Fint *e) {
    FFORWARD(RECV, f_recv_t, "mpi_recv_", (b, c, t, s, tag, comm, st, e))
}
void mpi_irecv_(void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *s, MPI_Fint *tag, MPI_Fint *comm,
                MPI_Fint *r, MPI_Fint *e) {
    FFORWARD(IRECV, f_recv_t, "mpi_irecv_", (b, c, t, s, tag, comm, r, e))
}
typedef void (*f_wait_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
void mpi_wait_(MPI_Fint *r, MPI_Fint *s, MPI_Fint *e) { FFORWARD(WAIT, f_wait_t, "mpi_wait_", (r, s, e)) }
typedef void (*f_waitall_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
void mpi_waitall_(MPI_Fint *n, MPI_Fint *r, MPI_Fint *s, MPI_Fint *e) {
    FFORWARD(WAITALL, f_waitall_t, "mpi_waitall_", (n, r, s, e))
}
typedef void (*f_barrier_t)(MPI_Fint *, MPI_Fint *);
void mpi_barrier_(MPI_Fint *c, MPI_Fint *e) { FFORWARD(BARRIER, f_barrier_t, "mpi_barrier_", (c, e)) }
typedef void (*f_bcast_t)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
void mpi_bcast_(void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *e) {
    FFORWARD(BCAST, f_bcast_t, "mpi_bcast_", (b, c, t, root, comm, e))
}
typedef void (*f_reduce_t)(const void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                           MPI_Fint *, MPI_Fint *);
void mpi_reduce_(const void *s, void *r, MPI_Fint *c, MPI_Fint *t, MPI_Fint *op, MPI_Fint *root,
                 MPI_Fint *comm, MPI_Fint *e) {
    FFORWARD(REDUCE, f_reduce_t, "mpi_reduce_", (s, r, c, t, op, root, comm, e))
}
typedef void (*f_allreduce_t)(const void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                              MPI_Fint *);
void mpi_allreduce_(const void *s, void *r, MPI_Fint *c, MPI_Fint *t, MPI_Fint *op, MPI_Fint *comm,
                    MPI_Fint *e) {
    FFORWARD(ALLREDUCE, f_allreduce_t, "mpi_allreduce_", (s, r, c, t, op, comm, e))
}
typedef void (*f_alltoall_t)(const void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *,
                             MPI_Fint *, MPI_Fint *);
void mpi_alltoall_(const void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc, MPI_Fint *rt,
                   MPI_Fint *comm, MPI_Fint *e) {
    FFORWARD(ALLTOALL, f_alltoall_t, "mpi_alltoall_", (s, sc, st, r, rc, rt, comm, e))
}
typedef void (*f_comm_split_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
void mpi_comm_split_(MPI_Fint *c, MPI_Fint *color, MPI_Fint *key, MPI_Fint *out, MPI_Fint *e) {
    FFORWARD(COMM_SPLIT, f_comm_split_t, "mpi_comm_split_", (c, color, key, out, e))
}
typedef void (*f_comm_free_t)(MPI_Fint *, MPI_Fint *);
void mpi_comm_free_(MPI_Fint *c, MPI_Fint *e) { FFORWARD(COMM_FREE, f_comm_free_t, "mpi_comm_free_", (c, e)) }
typedef void (*f_finalize_t)(MPI_Fint *);
void mpi_finalize_(MPI_Fint *e) {
    static f_finalize_t real = 0;
    if (!real) real = (f_finalize_t)next("mpi_finalize_");
    write_counts();
    real(e);
}
#endif
