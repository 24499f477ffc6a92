"""Each rank runs a multiprocessing pool of two workers, forked (or started
by `spawn` when given `spawn`: a new `python3` that inherits the rank's
variables); each of its four tasks writes 100 bytes to a file. With mpi4py
(when given `mpi`) the ranks also exchange a message. The workers are
child processes of their rank, not ranks."""
import multiprocessing
import os
import sys


def task(i):
    with open(f"task-{os.getppid()}-{i}.out", "wb", buffering=0) as f:
        f.write(b"y" * 100)
    return i


if __name__ == "__main__":
    rank = None
    if "mpi" in sys.argv[1:]:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank = comm.Get_rank()
    method = "spawn" if "spawn" in sys.argv[1:] else "fork"
    pool = multiprocessing.get_context(method).Pool(2)
    assert sorted(pool.map(task, range(4))) == [0, 1, 2, 3]
    pool.close()
    pool.join()
    if rank is not None:
        if rank == 0:
            comm.send(b"done", dest=1, tag=9)
        elif rank == 1:
            comm.recv(source=0, tag=9)
    print("ok")
