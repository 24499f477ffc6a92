! The same MPI calls through each Fortran binding, chosen at compile time:
! -DBINDING=1 mpif.h, 2 `use mpi`, 3 `use mpi_f08`. Run on 4 ranks; every
! binding must record the same stream (bindings.expected).
program bindings
#if BINDING == 3
  use mpi_f08
  use, intrinsic :: iso_c_binding, only: c_ptr
#elif BINDING == 2
  use mpi
#endif
  implicit none
#if BINDING == 1
  include 'mpif.h'
#endif
#if BINDING == 3
  type(MPI_Status) :: st
  type(MPI_Request) :: rq(2)
  type(MPI_Comm) :: half
  type(MPI_File) :: fh
  type(MPI_Win) :: win
  type(c_ptr) :: base
#else
  integer :: st(MPI_STATUS_SIZE)
  integer :: rq(2)
  integer :: half
  integer :: fh
  integer :: win
  integer(kind=MPI_ADDRESS_KIND) :: base
#endif
  integer(kind=MPI_OFFSET_KIND) :: offset
  integer(kind=MPI_ADDRESS_KIND) :: wsize, disp
  character(len=512) :: dir
  integer :: rank, size, ierr, right, left, idx, outcount, indices(2)
  double precision :: d(16), e(16)
  integer :: ints(8)

  d = 1.0d0
  e = 0.0d0
  ints = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  right = mod(rank + 1, size)
  left = mod(rank + size - 1, size)

  ! Blocking ring of 5 doubles, tag 4; receive from ANY_SOURCE, status ignored.
  if (mod(rank, 2) == 0) then
    call MPI_Send(d, 5, MPI_DOUBLE_PRECISION, right, 4, MPI_COMM_WORLD, ierr)
    call MPI_Recv(e, 16, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(e, 16, MPI_DOUBLE_PRECISION, left, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
    call MPI_Send(d, 5, MPI_DOUBLE_PRECISION, right, 4, MPI_COMM_WORLD, ierr)
  end if

  ! Non-blocking exchange of 3 integers with both neighbours, Waitall.
  call MPI_Irecv(ints, 3, MPI_INTEGER, left, 6, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Isend(ints(4), 3, MPI_INTEGER, right, 6, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Waitall(2, rq, MPI_STATUSES_IGNORE, ierr)

  ! Receives from ANY_SOURCE completed by Waitany, then by Testsome (the send
  ! is waited for first, so the receive is the only request left).
  call MPI_Irecv(ints, 2, MPI_INTEGER, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Isend(ints(4), 2, MPI_INTEGER, right, 8, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Wait(rq(2), MPI_STATUS_IGNORE, ierr)
  call MPI_Waitany(2, rq, idx, st, ierr)
  call MPI_Irecv(ints, 1, MPI_INTEGER, MPI_ANY_SOURCE, 10, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Isend(ints(4), 1, MPI_INTEGER, left, 10, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), st, ierr)
  outcount = 0
  do while (outcount /= 1)
    call MPI_Testsome(2, rq, outcount, indices, MPI_STATUSES_IGNORE, ierr)
  end do

  ! Collectives: in-place allreduce of 4 doubles, bcast of 2 integers from 1.
  call MPI_Allreduce(MPI_IN_PLACE, d, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Bcast(ints, 2, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)

  ! Split into halves {0,1} and {2,3}; reduce on it to its rank 0.
  call MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, half, ierr)
  call MPI_Reduce(d, e, 3, MPI_DOUBLE_PRECISION, MPI_MAX, 0, half, ierr)
  call MPI_Barrier(half, ierr)
  call MPI_Comm_free(half, ierr)

  ! MPI-IO: each rank writes 3 integers at offset 12*rank of one file, then
  ! closes it. The name is blank-padded, its length passed hidden.
  call get_environment_variable("HARK_TEST_DIR", dir)
  call MPI_File_open(MPI_COMM_WORLD, trim(dir) // "/fortran.dat", &
                     MPI_MODE_CREATE + MPI_MODE_WRONLY, MPI_INFO_NULL, fh, ierr)
  offset = 12 * rank
  call MPI_File_write_at(fh, offset, ints, 3, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  call MPI_File_close(fh, ierr)

  ! One-sided: a window of 8 doubles (allocated: Open MPI 4.1 cannot create
  ! one over the program's memory without single-copy transfers, which the
  ! tests turn off); 2 doubles put into the right neighbour's between
  ! fences, then an atomic read of 2 doubles from rank 0's (Get_accumulate
  ! with MPI_NO_OP: the result buffer counts).
  wsize = 64
  call MPI_Win_allocate(wsize, 8, MPI_INFO_NULL, MPI_COMM_WORLD, base, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  disp = 2
  call MPI_Put(d, 2, MPI_DOUBLE_PRECISION, right, disp, 2, MPI_DOUBLE_PRECISION, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win, ierr)
  call MPI_Get_accumulate(d, 0, MPI_DOUBLE_PRECISION, d(9), 2, MPI_DOUBLE_PRECISION, &
                          0, disp, 2, MPI_DOUBLE_PRECISION, MPI_NO_OP, win, ierr)
  call MPI_Win_unlock(0, win, ierr)
  call MPI_Win_free(win, ierr)

  call MPI_Finalize(ierr)
end program bindings
