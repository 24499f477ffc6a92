! The user API from Fortran.
program user_api
  use hark
  implicit none
  integer :: i
  if (.not. hark_active()) stop 1
  do i = 0, 2
    call hark_mark("step", i)
    call hark_region_begin("outer   ")
    call hark_counter("cells", 100 * i)
    call hark_region_end("outer")
  end do
end program
