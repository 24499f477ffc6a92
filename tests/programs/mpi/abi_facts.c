/* Prints the ABI facts the probe's abi.rs relies on, one `key value` per
 * line, for the MPI library this is compiled with. Read by the unit test in
 * crates/probe/src/adapters/mpi/abi.rs. Runs as a singleton (no mpirun). */
#include <mpi.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define H(x) ((unsigned long)(size_t)(x))

int main(int argc, char **argv) {
  MPI_Status st;
  unsigned char raw[sizeof(MPI_Status)];
  char buf[7] = "abcdef", got[7];
  int count = -1, i, topo;
  MPI_Comm cart;
  int dims[1] = {1}, periods[1] = {0};
  MPI_Init(&argc, &argv);
  printf("handle_size %zu\n", sizeof(MPI_Comm));
  printf("file_size %zu\n", sizeof(MPI_File));
  printf("status_size %zu\n", sizeof(MPI_Status));
  printf("status_source %zu\n", offsetof(MPI_Status, MPI_SOURCE));
  printf("status_tag %zu\n", offsetof(MPI_Status, MPI_TAG));
  printf("any_source %d\nproc_null %d\nroot %d\nany_tag %d\nundefined %d\n", MPI_ANY_SOURCE,
         MPI_PROC_NULL, MPI_ROOT, MPI_ANY_TAG, MPI_UNDEFINED);
  printf("in_place %lu\nstatus_ignore %lu\nstatuses_ignore %lu\n", H(MPI_IN_PLACE),
         H(MPI_STATUS_IGNORE), H(MPI_STATUSES_IGNORE));
  printf("appnum_key %d\ntopo_cart %d\ntopo_graph %d\nerr_other %d\n", (int)MPI_APPNUM, MPI_CART,
         MPI_GRAPH, MPI_ERR_OTHER);
  /* Predefined handles: MPICH's values, and for Open MPI whether the handle is
   * the address of the symbol abi.rs looks up. */
  printf("comm_world %lu\ncomm_self %lu\ncomm_null %lu\nrequest_null %lu\n", H(MPI_COMM_WORLD),
         H(MPI_COMM_SELF), H(MPI_COMM_NULL), H(MPI_REQUEST_NULL));
  printf("datatype_null %lu\nmessage_null %lu\nmessage_no_proc %lu\nwin_null %lu\nfile_null %lu\n",
         H(MPI_DATATYPE_NULL), H(MPI_MESSAGE_NULL), H(MPI_MESSAGE_NO_PROC), H(MPI_WIN_NULL),
         H(MPI_FILE_NULL));
  printf("ompi_symbols_match %d\n",
         dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world") == (void *)MPI_COMM_WORLD &&
             dlsym(RTLD_DEFAULT, "ompi_mpi_comm_self") == (void *)MPI_COMM_SELF &&
             dlsym(RTLD_DEFAULT, "ompi_mpi_comm_null") == (void *)MPI_COMM_NULL &&
             dlsym(RTLD_DEFAULT, "ompi_request_null") == (void *)MPI_REQUEST_NULL &&
             dlsym(RTLD_DEFAULT, "ompi_mpi_datatype_null") == (void *)MPI_DATATYPE_NULL &&
             dlsym(RTLD_DEFAULT, "ompi_message_null") == (void *)MPI_MESSAGE_NULL &&
             dlsym(RTLD_DEFAULT, "ompi_message_no_proc") == (void *)MPI_MESSAGE_NO_PROC &&
             dlsym(RTLD_DEFAULT, "ompi_mpi_win_null") == (void *)MPI_WIN_NULL &&
             dlsym(RTLD_DEFAULT, "ompi_mpi_file_null") == (void *)MPI_FILE_NULL);
  /* A status after receiving 7 bytes, tag 42, from self: its raw bytes and
   * what MPI_Get_count says. */
  MPI_Sendrecv(buf, 7, MPI_BYTE, 0, 42, got, 7, MPI_BYTE, 0, 42, MPI_COMM_SELF, &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  memcpy(raw, &st, sizeof st);
  printf("status_count %d\nstatus_raw", count);
  for (i = 0; i < (int)sizeof st; i++) printf(" %d", raw[i]);
  printf("\n");
  /* MPI_INT's size, for MPICH's size-in-handle shortcut. */
  printf("int_handle %lu\n", H(MPI_INT));
  MPI_Cart_create(MPI_COMM_SELF, 1, dims, periods, 0, &cart);
  MPI_Topo_test(cart, &topo);
  printf("cart_topo %d\n", topo);
  MPI_Finalize();
  return 0;
}
