! MPI 4.0 from Fortran (`use mpi_f08`, MPICH 4.0) at np 2: a partitioned
! send (rank 0, 4 partitions of 256 doubles, each made ready with
! MPI_Pready) and receive (rank 1, which asks MPI_Parrived once), a
! persistent MPI_Allreduce_init and an MPI_Isendrecv, 5 times each.
program mpi4_f08
  use mpi_f08
  implicit none
  integer, parameter :: parts = 4, count = 256, reps = 5
  double precision :: sbuf(parts * count), rbuf(parts * count), x(8), y(8)
  double precision :: a(16), b(16)
  type(MPI_Request) :: req, coll, sr
  type(MPI_Status) :: st
  integer :: rank, size, peer, i, p
  logical :: flag
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  peer = 1 - rank
  sbuf = rank
  x = rank
  if (rank == 0) then
    call MPI_Psend_init(sbuf, parts, int(count, MPI_COUNT_KIND), MPI_DOUBLE_PRECISION, peer, 7, &
                        MPI_COMM_WORLD, MPI_INFO_NULL, req)
  else
    call MPI_Precv_init(rbuf, parts, int(count, MPI_COUNT_KIND), MPI_DOUBLE_PRECISION, peer, 7, &
                        MPI_COMM_WORLD, MPI_INFO_NULL, req)
  end if
  call MPI_Allreduce_init(x, y, 8, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, coll)
  do i = 1, reps
    call MPI_Start(req)
    if (rank == 0) then
      do p = 0, parts - 1
        call MPI_Pready(p, req)
      end do
    else
      call MPI_Parrived(req, 0, flag)
    end if
    call MPI_Wait(req, st)
    call MPI_Start(coll)
    call MPI_Wait(coll, st)
    call MPI_Isendrecv(a, 16, MPI_DOUBLE_PRECISION, peer, 3, b, 16, MPI_DOUBLE_PRECISION, peer, 3, &
                       MPI_COMM_WORLD, sr)
    call MPI_Wait(sr, st)
  end do
  call MPI_Request_free(req)
  call MPI_Request_free(coll)
  if (rank == 0) print '(a)', 'mpi4_f08: done'
  call MPI_Finalize()
end program mpi4_f08
