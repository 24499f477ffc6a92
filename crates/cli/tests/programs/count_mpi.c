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
       GET_ACCUMULATE, FETCH_AND_OP, COMPARE_AND_SWAP, COMM_SPLIT, COMM_FREE, NFUNC };
static const char *names[NFUNC] = {
    "MPI_Send", "MPI_Isend", "MPI_Ssend", "MPI_Rsend", "MPI_Recv", "MPI_Irecv",
    "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Test",
    "MPI_Iprobe", "MPI_Probe", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce",
    "MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
    "MPI_Alltoallv", "MPI_Gather", "MPI_Scatter", "MPI_Put", "MPI_Get",
    "MPI_Accumulate", "MPI_Get_accumulate", "MPI_Fetch_and_op",
    "MPI_Compare_and_swap", "MPI_Comm_split", "MPI_Comm_free"};
static unsigned long long calls[NFUNC], bytes[NFUNC];

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
    calls[idx]++;                                \
    return real args;

typedef int (*send_t)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*isend_t)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*recv_t)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*irecv_t)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

int MPI_Send(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
    if (d != MPI_PROC_NULL) bytes[SEND] += size_of(c, t);
    FORWARD(SEND, send_t, "MPI_Send", (b, c, t, d, tag, comm))
}
int MPI_Ssend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
    if (d != MPI_PROC_NULL) bytes[SSEND] += size_of(c, t);
    FORWARD(SSEND, send_t, "MPI_Ssend", (b, c, t, d, tag, comm))
}
int MPI_Rsend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
    if (d != MPI_PROC_NULL) bytes[RSEND] += size_of(c, t);
    FORWARD(RSEND, send_t, "MPI_Rsend", (b, c, t, d, tag, comm))
}
int MPI_Isend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r) {
    if (d != MPI_PROC_NULL) bytes[ISEND] += size_of(c, t);
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
    if (d != MPI_PROC_NULL) bytes[SENDRECV] += size_of(sc, st);
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
    if (r != MPI_PROC_NULL) bytes[PUT] += size_of(oc, ot);
    FORWARD(PUT, put_t, "MPI_Put", (o, oc, ot, r, d, tc, tt, w))
}
typedef int (*get_t)(void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win);
int MPI_Get(void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win w) {
    if (r != MPI_PROC_NULL) bytes[GET] += size_of(oc, ot);
    FORWARD(GET, get_t, "MPI_Get", (o, oc, ot, r, d, tc, tt, w))
}
typedef int (*accumulate_t)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype,
                            MPI_Op, MPI_Win);
int MPI_Accumulate(const void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc,
                   MPI_Datatype tt, MPI_Op op, MPI_Win w) {
    if (r != MPI_PROC_NULL) bytes[ACCUMULATE] += size_of(oc, ot);
    FORWARD(ACCUMULATE, accumulate_t, "MPI_Accumulate", (o, oc, ot, r, d, tc, tt, op, w))
}
typedef int (*get_accumulate_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                                MPI_Aint, int, MPI_Datatype, MPI_Op, MPI_Win);
int MPI_Get_accumulate(const void *o, int oc, MPI_Datatype ot, void *res, int rc, MPI_Datatype rt,
                       int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Op op, MPI_Win w) {
    if (r != MPI_PROC_NULL) bytes[GET_ACCUMULATE] += size_of(rc, rt);
    FORWARD(GET_ACCUMULATE, get_accumulate_t, "MPI_Get_accumulate",
            (o, oc, ot, res, rc, rt, r, d, tc, tt, op, w))
}
typedef int (*fetch_and_op_t)(const void *, void *, MPI_Datatype, int, MPI_Aint, MPI_Op, MPI_Win);
int MPI_Fetch_and_op(const void *o, void *res, MPI_Datatype t, int r, MPI_Aint d, MPI_Op op, MPI_Win w) {
    if (r != MPI_PROC_NULL) bytes[FETCH_AND_OP] += size_of(1, t);
    FORWARD(FETCH_AND_OP, fetch_and_op_t, "MPI_Fetch_and_op", (o, res, t, r, d, op, w))
}
typedef int (*compare_and_swap_t)(const void *, const void *, void *, MPI_Datatype, int, MPI_Aint,
                                  MPI_Win);
int MPI_Compare_and_swap(const void *o, const void *c, void *res, MPI_Datatype t, int r, MPI_Aint d,
                         MPI_Win w) {
    if (r != MPI_PROC_NULL) bytes[COMPARE_AND_SWAP] += size_of(1, t);
    FORWARD(COMPARE_AND_SWAP, compare_and_swap_t, "MPI_Compare_and_swap", (o, c, res, t, r, d, w))
}

typedef int (*comm_split_t)(MPI_Comm, int, int, MPI_Comm *);
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *out) {
    FORWARD(COMM_SPLIT, comm_split_t, "MPI_Comm_split", (c, color, key, out))
}
typedef int (*comm_free_t)(MPI_Comm *);
int MPI_Comm_free(MPI_Comm *c) { FORWARD(COMM_FREE, comm_free_t, "MPI_Comm_free", (c)) }

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
    calls[idx]++;                                \
    real args;

static unsigned long long f_size_of(const MPI_Fint *count, const MPI_Fint *type) {
    return size_of(*count, MPI_Type_f2c(*type));
}

typedef void (*f_send_t)(const void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                         MPI_Fint *);
void mpi_send_(const void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *d, MPI_Fint *tag, MPI_Fint *comm,
               MPI_Fint *e) {
    if (*d != MPI_PROC_NULL) bytes[SEND] += f_size_of(c, t);
    FFORWARD(SEND, f_send_t, "mpi_send_", (b, c, t, d, tag, comm, e))
}
void mpi_rsend_(const void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *d, MPI_Fint *tag,
                MPI_Fint *comm, MPI_Fint *e) {
    if (*d != MPI_PROC_NULL) bytes[RSEND] += f_size_of(c, t);
    FFORWARD(RSEND, f_send_t, "mpi_rsend_", (b, c, t, d, tag, comm, e))
}
typedef void (*f_isend_t)(const void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                          MPI_Fint *, MPI_Fint *, MPI_Fint *);
void mpi_isend_(const void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *d, MPI_Fint *tag,
                MPI_Fint *comm, MPI_Fint *r, MPI_Fint *e) {
    if (*d != MPI_PROC_NULL) bytes[ISEND] += f_size_of(c, t);
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
