! The Fortran twin of waits.c through `use mpi`, for six of its patterns:
! late_sender (MPI_RECV), late_receiver (MPI_SSEND), wait_nxn
! (MPI_ALLREDUCE), wait_barrier (MPI_BARRIER), late_broadcast (MPI_BCAST) and
! early_reduce (MPI_REDUCE).
!
! usage: waits [reps=N] [stamps=PREFIX] [PATTERN=MS ...]
!
! The schedule is waits.c's: in repetition k (of REPS, default 4) one side
! sleeps MS milliseconds (usleep: no MPI) before its call. Point-to-point
! patterns pair rank 2i with 2i+1 (an odd last rank sits out) and the rank
! whose parity equals k's waits; in collectives the late rank (or root) is
! mod(k, size): the others wait, except in early_reduce where the non-roots
! sleep and the root waits. Before each repetition the ranks meet by polling
! MPI_TESTALL on a duplicate of MPI_COMM_WORLD, which is no wait state.
!
! With stamps=PREFIX each rank writes to PREFIX.RANK, for each call of a
! pattern it makes, `PATTERN K RANK NS`: CLOCK_MONOTONIC just before the call
! (waits.c says why).
program waits
  use mpi
  use iso_c_binding, only: c_int, c_long
  implicit none
  type, bind(c) :: timespec
    integer(c_long) :: sec, nsec
  end type timespec
  interface
    integer(c_int) function usleep(us) bind(c, name='usleep')
      import :: c_int
      integer(c_int), value :: us
    end function usleep
    integer(c_int) function clock_gettime(clock, t) bind(c, name='clock_gettime')
      import :: c_int, timespec
      integer(c_int), value :: clock
      type(timespec) :: t
    end function clock_gettime
  end interface
  integer(c_int), parameter :: clock_monotonic = 1
  integer, parameter :: stamps = 10
  integer, parameter :: patterns = 6, tag = 7
  character(len=*), parameter :: names(patterns) = [character(len=14) :: &
    'late_sender', 'late_receiver', 'wait_nxn', 'wait_barrier', &
    'late_broadcast', 'early_reduce']
  integer :: ierr, rank, nprocs, meet_comm, reps, ms(patterns), p, k, a, eq, late, partner
  integer :: status(MPI_STATUS_SIZE)
  integer :: buf(1024)
  double precision :: x, y
  character(len=4096) :: arg, path
  logical :: known, stamping = .false.

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, meet_comm, ierr)
  reps = 4
  ms = 0
  do a = 1, command_argument_count()
    call get_command_argument(a, arg)
    eq = index(arg, '=')
    known = .false.
    if (eq > 1) then
      if (arg(:eq - 1) == 'reps') then
        read (arg(eq + 1:), *) reps
        known = .true.
      end if
      if (arg(:eq - 1) == 'stamps') then
        write (path, '(a,a,i0)') trim(arg(eq + 1:)), '.', rank
        open (stamps, file=trim(path), status='replace', action='write')
        stamping = .true.
        known = .true.
      end if
      do p = 1, patterns
        if (arg(:eq - 1) == trim(names(p))) then
          read (arg(eq + 1:), *) ms(p)
          known = .true.
        end if
      end do
    end if
    if (.not. known) then
      if (rank == 0) write (0, '(a,a)') 'waits: unknown argument ', trim(arg)
      call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
    end if
  end do

  buf = rank
  x = rank
  do p = 1, patterns
    if (ms(p) == 0) cycle
    do k = 0, reps - 1
      call meet()
      late = mod(k, nprocs)
      partner = ieor(rank, 1)
      select case (p)
      case (1) ! late_sender
        if (rank < nprocs / 2 * 2) then
          if (mod(rank, 2) == mod(k, 2)) then
            call stamp()
            call MPI_RECV(buf, 1, MPI_INTEGER, partner, tag, MPI_COMM_WORLD, status, ierr)
          else
            call nap(ms(p))
            call stamp()
            call MPI_SEND(buf, 1, MPI_INTEGER, partner, tag, MPI_COMM_WORLD, ierr)
          end if
        end if
      case (2) ! late_receiver
        if (rank < nprocs / 2 * 2) then
          if (mod(rank, 2) == mod(k, 2)) then
            call stamp()
            call MPI_SSEND(buf, 1024, MPI_INTEGER, partner, tag, MPI_COMM_WORLD, ierr)
          else
            call nap(ms(p))
            call stamp()
            call MPI_RECV(buf, 1024, MPI_INTEGER, partner, tag, MPI_COMM_WORLD, status, ierr)
          end if
        end if
      case (3) ! wait_nxn
        if (rank == late) call nap(ms(p))
        call stamp()
        call MPI_ALLREDUCE(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
      case (4) ! wait_barrier
        if (rank == late) call nap(ms(p))
        call stamp()
        call MPI_BARRIER(MPI_COMM_WORLD, ierr)
      case (5) ! late_broadcast
        if (rank == late) call nap(ms(p))
        call stamp()
        call MPI_BCAST(buf, 4, MPI_INTEGER, late, MPI_COMM_WORLD, ierr)
      case (6) ! early_reduce
        if (rank /= late) call nap(ms(p))
        call stamp()
        call MPI_REDUCE(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, late, MPI_COMM_WORLD, ierr)
      end select
    end do
  end do
  call meet()
  if (stamping) close (stamps)
  call MPI_COMM_FREE(meet_comm, ierr)
  call MPI_FINALIZE(ierr)

contains

  ! Notes the moment just before this rank's call of pattern p, repetition k.
  subroutine stamp()
    type(timespec) :: t
    integer(c_int) :: rc
    rc = clock_gettime(clock_monotonic, t)
    if (stamping) write (stamps, '(a,1x,i0,1x,i0,1x,i0)') trim(names(p)), k, rank, &
      t%sec * 1000000000_c_long + t%nsec
  end subroutine stamp

  subroutine nap(milliseconds)
    integer, intent(in) :: milliseconds
    integer(c_int) :: rc
    rc = usleep(int(milliseconds * 1000, c_int))
  end subroutine nap

  ! Tokens to rank 0 and back, completed by polling: no call blocks.
  subroutine meet()
    integer :: reqs(2 * nprocs), tokens(nprocs), r
    tokens = 0
    if (rank == 0) then
      do r = 1, nprocs - 1
        call MPI_IRECV(tokens(r + 1), 1, MPI_INTEGER, r, 0, meet_comm, reqs(r), ierr)
      end do
      call poll(reqs(:nprocs - 1))
      do r = 1, nprocs - 1
        call MPI_ISEND(tokens(1), 1, MPI_INTEGER, r, 0, meet_comm, reqs(r), ierr)
      end do
      call poll(reqs(:nprocs - 1))
    else
      call MPI_ISEND(tokens(1), 1, MPI_INTEGER, 0, 0, meet_comm, reqs(1), ierr)
      call MPI_IRECV(tokens(2), 1, MPI_INTEGER, 0, 0, meet_comm, reqs(2), ierr)
      call poll(reqs(:2))
    end if
  end subroutine meet

  subroutine poll(reqs)
    integer, intent(inout) :: reqs(:)
    logical :: done
    integer(c_int) :: rc
    do
      call MPI_TESTALL(size(reqs), reqs, done, MPI_STATUSES_IGNORE, ierr)
      if (done) exit
      rc = usleep(50_c_int)
    end do
  end subroutine poll
end program waits
