! A conjugate-gradient kernel in the style of the NAS Parallel Benchmarks'
! CG (Fortran, MPI through `use mpi`): a 1-D Laplacian split in blocks over
! the ranks, each iteration a halo exchange (MPI_Irecv, MPI_Isend,
! MPI_Waitall) in one subroutine, two dot products (MPI_Allreduce) in
! another, the residual norm in a third. Several call sites of the same
! MPI functions on different lines, as real codes have them.
!
!   cg_style N ITERATIONS      (N points per rank)
module cg_comm
  use mpi
  implicit none
contains
  subroutine exchange(x, n, rank, size)
    integer, intent(in) :: n, rank, size
    double precision, intent(inout) :: x(0:n+1)
    integer :: req(4), nreq, ierr
    nreq = 0
    if (rank > 0) then
      nreq = nreq + 1
      call MPI_Irecv(x(0), 1, MPI_DOUBLE_PRECISION, rank - 1, 1, MPI_COMM_WORLD, req(nreq), ierr)
      nreq = nreq + 1
      call MPI_Isend(x(1), 1, MPI_DOUBLE_PRECISION, rank - 1, 2, MPI_COMM_WORLD, req(nreq), ierr)
    end if
    if (rank < size - 1) then
      nreq = nreq + 1
      call MPI_Irecv(x(n+1), 1, MPI_DOUBLE_PRECISION, rank + 1, 2, MPI_COMM_WORLD, req(nreq), ierr)
      nreq = nreq + 1
      call MPI_Isend(x(n), 1, MPI_DOUBLE_PRECISION, rank + 1, 1, MPI_COMM_WORLD, req(nreq), ierr)
    end if
    call MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE, ierr)
  end subroutine exchange

  double precision function dot(a, b, n)
    integer, intent(in) :: n
    double precision, intent(in) :: a(0:n+1), b(0:n+1)
    double precision :: local
    integer :: ierr
    local = sum(a(1:n) * b(1:n))
    call MPI_Allreduce(local, dot, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end function dot

  double precision function norm(a, n)
    integer, intent(in) :: n
    double precision, intent(in) :: a(0:n+1)
    double precision :: local
    integer :: ierr
    local = sum(a(1:n) ** 2)
    call MPI_Allreduce(local, norm, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    norm = sqrt(norm)
  end function norm
end module cg_comm

program cg_style
  use mpi
  use cg_comm
  implicit none
  integer :: n, iters, it, rank, size, ierr, i
  character(len=32) :: arg
  double precision, allocatable :: x(:), r(:), p(:), q(:)
  double precision :: rho, rho_old, alpha, beta, res

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  call get_command_argument(1, arg)
  read (arg, *) n
  call get_command_argument(2, arg)
  read (arg, *) iters
  allocate (x(0:n+1), r(0:n+1), p(0:n+1), q(0:n+1))
  x = 0; q = 0
  r = 1; r(0) = 0; r(n+1) = 0
  p = r
  rho = dot(r, r, n)
  do it = 1, iters
    call exchange(p, n, rank, size)
    do i = 1, n
      q(i) = 2 * p(i) - p(i-1) - p(i+1)
    end do
    alpha = rho / dot(p, q, n)
    x(1:n) = x(1:n) + alpha * p(1:n)
    r(1:n) = r(1:n) - alpha * q(1:n)
    rho_old = rho
    rho = dot(r, r, n)
    beta = rho / rho_old
    p(1:n) = r(1:n) + beta * p(1:n)
  end do
  res = norm(r, n)
  if (rank == 0) print '(a, i0, a, es10.3)', 'cg_style: ', iters, ' iterations, residual ', res
  call MPI_Finalize(ierr)
end program cg_style
