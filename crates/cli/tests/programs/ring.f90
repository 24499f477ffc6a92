! The Fortran twin of ring.c, through `use mpi`: per round each rank sends
! INTS integers to its right neighbour with MPI_SEND and receives from its
! left with MPI_RECV (even ranks send first, odd ranks receive first), then
! calls MPI_ALLREDUCE on one integer. ROUNDS = 50, INTS = 100: every rank
! makes exactly 50 calls of each and sends 50 * 100 * 4 bytes.
program ring
  use mpi
  implicit none
  integer, parameter :: rounds = 50, ints = 100
  integer :: ierr, rank, size, r, right, left, mine, total, checksum
  integer :: out(ints), in(ints)
  integer :: status(MPI_STATUS_SIZE)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  right = mod(rank + 1, size)
  left = mod(rank + size - 1, size)
  checksum = 0
  do r = 1, rounds
    out = rank + r
    if (mod(rank, 2) == 0) then
      call MPI_SEND(out, ints, MPI_INTEGER, right, r, MPI_COMM_WORLD, ierr)
      call MPI_RECV(in, ints, MPI_INTEGER, left, r, MPI_COMM_WORLD, status, ierr)
    else
      call MPI_RECV(in, ints, MPI_INTEGER, left, r, MPI_COMM_WORLD, status, ierr)
      call MPI_SEND(out, ints, MPI_INTEGER, right, r, MPI_COMM_WORLD, ierr)
    end if
    mine = in(1)
    call MPI_ALLREDUCE(mine, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    checksum = checksum + total
  end do
  if (rank == 0) print '(a,i0,a,i0)', 'fring: ranks ', size, ' checksum ', checksum
  call MPI_FINALIZE(ierr)
end program ring
