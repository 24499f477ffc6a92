/* Prints whether Open MPI makes this rank yield the processor when an MPI
 * call finds nothing to do (the MCA parameter mpi_yield_when_idle, read
 * through the MPI tool interface): "rank R yield 0|1". */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int provided, rank, index, count;
    long long value = 0; /* wide enough for any integer type the library uses */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) != MPI_SUCCESS) {
        fprintf(stderr, "no mpi_yield_when_idle control variable\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_T_cvar_handle handle;
    MPI_T_cvar_handle_alloc(index, NULL, &handle, &count);
    MPI_T_cvar_read(handle, &value);
    MPI_T_cvar_handle_free(&handle);
    printf("rank %d yield %d\n", rank, value != 0);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
