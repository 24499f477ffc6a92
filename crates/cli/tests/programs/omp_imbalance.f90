! The Fortran twin of omp_imbalance.c (see there): rounds of serial work
! on the master (from the second round on), then a parallel region in
! which thread t works (t + 1) units, waits at a barrier, works
! (n - t) / 2 units more and meets the others at the region's end, then
! an MPI_Allreduce on the master (MPI_THREAD_FUNNELED). Each thread times
! its own work and barrier waits with system_clock (nanoseconds, gfortran's
! CLOCK_MONOTONIC) and the program prints, at the end:
!   thread <rank> <t> <work_ns> <barrier_ns>
! Usage: omp_imbalance_f <unit_ms> <rounds>
program omp_imbalance_f
  use mpi
  use omp_lib
  implicit none
  integer, parameter :: max_threads = 64
  integer(8) :: unit, work(0:max_threads-1), barrier(0:max_threads-1), done(0:max_threads-1)
  integer(8) :: b0, joined, mark
  integer :: rounds, r, t, n, threads, rank, provided, ierr
  character(len=32) :: arg
  double precision :: v, total

  call get_command_argument(1, arg)
  read (arg, *) unit
  unit = unit * 1000000_8
  call get_command_argument(2, arg)
  read (arg, *) rounds
  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  work = 0
  barrier = 0
  threads = 1
  ! The master's serial time counts whole, glue included (see the C one).
  mark = now()
  do r = 0, rounds - 1
    if (r > 0) b0 = spin(unit / 2)
    work(0) = work(0) + now() - mark
    !$omp parallel private(t, n, b0)
    t = omp_get_thread_num()
    n = omp_get_num_threads()
    if (t == 0) threads = n
    work(t) = work(t) + spin((t + 1) * unit)
    b0 = now()
    !$omp barrier
    barrier(t) = barrier(t) + now() - b0
    work(t) = work(t) + spin((n - t) * unit / 2)
    done(t) = now()
    !$omp end parallel
    joined = now()
    do t = 0, threads - 1
      barrier(t) = barrier(t) + joined - done(t)
    end do
    v = r
    work(0) = work(0) + now() - joined
    call MPI_Allreduce(v, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    mark = now()
  end do
  work(0) = work(0) + now() - mark
  call MPI_Finalize(ierr)
  do t = 0, threads - 1
    print '(a,i0,1x,i0,1x,i0,1x,i0)', 'thread ', rank, t, work(t), barrier(t)
  end do

contains

  integer(8) function now()
    integer(8) :: count
    call system_clock(count)
    now = count
  end function now

  ! Spins for ns nanoseconds of wall time; returns the time it took.
  integer(8) function spin(ns)
    integer(8), intent(in) :: ns
    integer(8) :: t0, t1
    integer :: i
    double precision, volatile :: x
    x = 1d0
    t0 = now()
    do
      do i = 1, 1000
        x = x * 1.0000001d0 + 1d-9
      end do
      t1 = now()
      if (t1 - t0 >= ns) exit
    end do
    spin = t1 - t0
  end function spin
end program omp_imbalance_f
