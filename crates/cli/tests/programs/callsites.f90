! callsites.c in Fortran (`use mpi`): two MPI_SEND call sites on different
! lines, each waiting a known time (Late Receiver: rank 1 sleeps A_MS, then
! B_MS, before its receives). The test reads the lines from the markers.
program callsites
  use mpi
  use iso_c_binding, only: c_int
  implicit none
  interface
    integer(c_int) function usleep(us) bind(c, name='usleep')
      import :: c_int
      integer(c_int), value :: us
    end function usleep
  end interface
  integer, parameter :: big = 4 * 1024 * 1024, reps = 3
  integer, parameter :: a_ms = 100, b_ms = 250
  character, allocatable :: buf(:)
  integer :: rank, ierr, k
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  allocate(buf(big))
  buf = 'x'
  do k = 1, reps
    if (rank == 0) then
      call send_a(buf)
      call send_b(buf)
    else if (rank == 1) then
      call sleep_ms(a_ms)
      call MPI_Recv(buf, big, MPI_CHARACTER, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr) ! RECV_A
      call sleep_ms(b_ms)
      call MPI_Recv(buf, big, MPI_CHARACTER, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr) ! RECV_B
    end if
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end do
  call MPI_Finalize(ierr)
contains
  subroutine send_a(b)
    character :: b(:)
    integer :: e
    call MPI_Send(b, big, MPI_CHARACTER, 1, 1, MPI_COMM_WORLD, e) ! SEND_A
  end subroutine send_a
  subroutine send_b(b)
    character :: b(:)
    integer :: e
    call MPI_Send(b, big, MPI_CHARACTER, 1, 2, MPI_COMM_WORLD, e) ! SEND_B
  end subroutine send_b
  subroutine sleep_ms(ms)
    integer, intent(in) :: ms
    integer(c_int) :: rc
    rc = usleep(int(ms * 1000, c_int))
  end subroutine sleep_ms
end program callsites
