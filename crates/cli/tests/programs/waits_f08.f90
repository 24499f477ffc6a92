! waits.c through `use mpi_f08`, for six of its patterns: late_sender
! (MPI_Irecv + MPI_Wait), late_sender_wrong_order (MPI_Recv), wait_nxn
! (MPI_Alltoall), wait_barrier (MPI_Barrier), late_broadcast (MPI_Scatter)
! and early_reduce (MPI_Gather).
!
! usage: waits_f08 [reps=N] [stamps=PREFIX] [PATTERN=MS ...]
!
! The schedule is waits.c's: in repetition k (of REPS, default 4) one side
! sleeps MS milliseconds (usleep: no MPI) before its call. Point-to-point
! patterns pair rank 2i with 2i+1 (an odd last rank sits out) and the rank
! whose parity equals k's waits; in late_sender_wrong_order its partner sends
! tag 1 at once, sleeps, then sends tag 2, and the waiter polls MPI_Iprobe
! until tag 1 is there before receiving tag 2, then tag 1. In collectives
! the late rank (or root) is mod(k, size): the others wait, except in
! early_reduce where the non-roots sleep and the root waits. Before each
! repetition the ranks meet by polling MPI_Testall on a duplicate of
! MPI_COMM_WORLD, which is no wait state.
!
! With stamps=PREFIX each rank writes to PREFIX.RANK, for each call of a
! pattern it makes, `PATTERN K RANK NS`: CLOCK_MONOTONIC just before the call
! (waits.c says why).
program waits_f08
  use mpi_f08
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
  character(len=*), parameter :: names(patterns) = [character(len=23) :: &
    'late_sender', 'late_sender_wrong_order', 'wait_nxn', 'wait_barrier', &
    'late_broadcast', 'early_reduce']
  integer :: rank, nprocs, reps, ms(patterns), p, k, a, eq, late, partner, one, two
  type(MPI_Comm) :: meet_comm
  type(MPI_Request) :: req
  integer, allocatable :: xs(:), ys(:)
  character(len=4096) :: arg, path
  logical :: known, stamping = .false., there

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  call MPI_Comm_dup(MPI_COMM_WORLD, meet_comm)
  allocate (xs(nprocs), ys(nprocs))
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
      if (rank == 0) write (0, '(a,a)') 'waits_f08: unknown argument ', trim(arg)
      call MPI_Abort(MPI_COMM_WORLD, 2)
    end if
  end do

  xs = rank
  do p = 1, patterns
    if (ms(p) == 0) cycle
    do k = 0, reps - 1
      call meet()
      late = mod(k, nprocs)
      partner = ieor(rank, 1)
      one = k
      two = k
      select case (p)
      case (1) ! late_sender
        if (rank < nprocs / 2 * 2) then
          if (mod(rank, 2) == mod(k, 2)) then
            call stamp()
            call MPI_Irecv(one, 1, MPI_INTEGER, partner, tag, MPI_COMM_WORLD, req)
            call MPI_Wait(req, MPI_STATUS_IGNORE)
          else
            call nap(ms(p))
            call stamp()
            call MPI_Send(one, 1, MPI_INTEGER, partner, tag, MPI_COMM_WORLD)
          end if
        end if
      case (2) ! late_sender_wrong_order
        if (rank < nprocs / 2 * 2) then
          if (mod(rank, 2) == mod(k, 2)) then
            there = .false.
            do while (.not. there)
              call MPI_Iprobe(partner, 1, MPI_COMM_WORLD, there, MPI_STATUS_IGNORE)
              if (.not. there) call pause50()
            end do
            call stamp()
            call MPI_Recv(two, 1, MPI_INTEGER, partner, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
            call MPI_Recv(one, 1, MPI_INTEGER, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
          else
            call MPI_Send(one, 1, MPI_INTEGER, partner, 1, MPI_COMM_WORLD)
            call nap(ms(p))
            call stamp()
            call MPI_Send(two, 1, MPI_INTEGER, partner, 2, MPI_COMM_WORLD)
          end if
        end if
      case (3) ! wait_nxn
        if (rank == late) call nap(ms(p))
        call stamp()
        call MPI_Alltoall(xs, 1, MPI_INTEGER, ys, 1, MPI_INTEGER, MPI_COMM_WORLD)
      case (4) ! wait_barrier
        if (rank == late) call nap(ms(p))
        call stamp()
        call MPI_Barrier(MPI_COMM_WORLD)
      case (5) ! late_broadcast
        if (rank == late) call nap(ms(p))
        call stamp()
        call MPI_Scatter(xs, 1, MPI_INTEGER, ys, 1, MPI_INTEGER, late, MPI_COMM_WORLD)
      case (6) ! early_reduce
        if (rank /= late) call nap(ms(p))
        call stamp()
        call MPI_Gather(xs, 1, MPI_INTEGER, ys, 1, MPI_INTEGER, late, MPI_COMM_WORLD)
      end select
    end do
  end do
  call meet()
  if (stamping) close (stamps)
  call MPI_Comm_free(meet_comm)
  call MPI_Finalize()

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

  subroutine pause50()
    integer(c_int) :: rc
    rc = usleep(50_c_int)
  end subroutine pause50

  ! Tokens to rank 0 and back, completed by polling: no call blocks.
  subroutine meet()
    type(MPI_Request) :: reqs(2 * nprocs)
    integer :: tokens(nprocs), r
    tokens = 0
    if (rank == 0) then
      do r = 1, nprocs - 1
        call MPI_Irecv(tokens(r + 1), 1, MPI_INTEGER, r, 0, meet_comm, reqs(r))
      end do
      call poll(reqs(:nprocs - 1))
      do r = 1, nprocs - 1
        call MPI_Isend(tokens(1), 1, MPI_INTEGER, r, 0, meet_comm, reqs(r))
      end do
      call poll(reqs(:nprocs - 1))
    else
      call MPI_Isend(tokens(1), 1, MPI_INTEGER, 0, 0, meet_comm, reqs(1))
      call MPI_Irecv(tokens(2), 1, MPI_INTEGER, 0, 0, meet_comm, reqs(2))
      call poll(reqs(:2))
    end if
  end subroutine meet

  subroutine poll(reqs)
    type(MPI_Request), intent(inout) :: reqs(:)
    logical :: done
    do
      call MPI_Testall(size(reqs), reqs, done, MPI_STATUSES_IGNORE)
      if (done) exit
      call pause50()
    end do
  end subroutine poll
end program waits_f08
