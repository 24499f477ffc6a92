# mpi4py opens its extension (and through it the MPI library) with
# RTLD_LOCAL: the probe must still find PMPI_* and record. Run on 2 ranks.
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
buf = bytearray(16)
if rank == 0:
    comm.Send([buf, MPI.BYTE], dest=1, tag=3)
else:
    comm.Recv([buf, MPI.BYTE], source=0, tag=3)
comm.Barrier()
print("rank", rank, "ok", flush=True)
