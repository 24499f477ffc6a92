! world_view.c through a Fortran binding, chosen at compile time:
! -DBINDING=1 mpif.h, 2 `use mpi`, 3 `use mpi_f08`. Prints the same line,
! starting with the binding's name.
program world_view_f
#if BINDING == 3
  use mpi_f08
#elif BINDING == 2
  use mpi
#endif
  implicit none
#if BINDING == 1
  include 'mpif.h'
#endif
#if BINDING == 3
  type(MPI_Comm) :: dup, inter
  type(MPI_Errhandler) :: eh
#else
  integer :: dup, inter, eh
#endif
  integer(kind=MPI_ADDRESS_KIND) :: attr
  logical :: flag
  integer :: rank, size, ierr, appnum, usize, lo, hi, same, dup_cmp, len
  integer :: right, left, mine, got, other, remote, rc, rounds, i, v, s, r
  integer :: all(64)
  logical :: alone, ring, returns, ok
  character(len=MPI_MAX_OBJECT_NAME) :: name
  character(len=8) :: binding

#if BINDING == 1
  binding = 'mpif.h'
#elif BINDING == 2
  binding = 'use_mpi'
#else
  binding = 'mpi_f08'
#endif
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  appnum = 0
  usize = -1
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, attr, flag, ierr)
  if (flag) appnum = int(attr)
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, attr, flag, ierr)
  if (flag) usize = int(attr)

  call MPI_Allreduce(appnum, lo, 1, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(appnum, hi, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  alone = lo == hi

  call MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, same, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_compare(MPI_COMM_WORLD, dup, dup_cmp, ierr)
  call MPI_Comm_get_name(MPI_COMM_WORLD, name, len, ierr)

  right = mod(rank + 1, size)
  left = mod(rank + size - 1, size)
  mine = appnum * 100 + rank
  got = -1
  call MPI_Sendrecv(mine, 1, MPI_INTEGER, right, 7, got, 1, MPI_INTEGER, left, 7, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  ring = got == appnum * 100 + left

  remote = -1
  if (mod(size, 2) == 0) then
    call MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, ieor(rank, 1), 9, inter, ierr)
    call MPI_Sendrecv(mine, 1, MPI_INTEGER, 0, 3, other, 1, MPI_INTEGER, 0, 3, inter, &
                      MPI_STATUS_IGNORE, ierr)
    remote = other
    call MPI_Comm_free(inter, ierr)
  end if

  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Send(mine, 1, MPI_INTEGER, size, 1, MPI_COMM_WORLD, rc)
  call MPI_Comm_get_errhandler(MPI_COMM_WORLD, eh, ierr)
  returns = rc /= MPI_SUCCESS .and. eh == MPI_ERRORS_RETURN
  call MPI_Errhandler_free(eh, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, ierr)

  if (alone) then
    rounds = 20 + 30 * appnum
  else
    rounds = 10
  end if
  ok = .true.
  do i = 0, rounds - 1
    v = i + rank
    if (.not. alone .or. mod(appnum, 2) == 0) then
      call MPI_Allreduce(v, s, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
      ok = ok .and. s == i * size + size * (size - 1) / 2
    else
      call MPI_Bcast(v, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
      ok = ok .and. v == i
      call MPI_Allgather(rank, 1, MPI_INTEGER, all, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
      do r = 0, min(size, 64) - 1
        ok = ok .and. all(r + 1) == r
      end do
      call MPI_Barrier(MPI_COMM_WORLD, ierr)
    end if
  end do
  call MPI_Comm_free(dup, ierr)
  write (*, '(A,A,I0,A,I0,A,I0,A,I0,A,I0,A,I0,A,I0,A,A,A,I0,A,I0,A,I0,A,I0)') trim(binding), &
    ' appnum=', appnum, ' size=', size, ' rank=', rank, ' alone=', merge(1, 0, alone), &
    ' universe=', usize, ' same=', merge(1, 0, same == MPI_IDENT), &
    ' dup=', merge(1, 0, dup_cmp == MPI_CONGRUENT), ' name=', name(1:len), &
    ' ring=', merge(1, 0, ring), ' remote=', remote, ' errors_return=', merge(1, 0, returns), &
    ' collectives=', merge(1, 0, ok)
  flush(6)
  call MPI_Finalize(ierr)
end program world_view_f
