! hark.f90 — Hark's user API for Fortran.
!
! Compile this module with your program (gfortran -c hark.f90), then
!   use hark
!   call hark_region_begin("solve") ... call hark_region_end("solve")
!   call hark_mark("step", it)
!   call hark_counter("cells", ncells)
!   call hark_pause() / call hark_resume()
!   if (hark_active()) ...
! The procedures live in the probe (libhark.so, preloaded by `hark run`).
! The module finds them at run time with dlsym, so a program built with it
! links and runs without the probe too: every call is then a no-op.
! Names are passed with their length; trailing blanks are ignored.
module hark
  use, intrinsic :: iso_c_binding
  implicit none
  private
  public :: hark_region_begin, hark_region_end, hark_mark, hark_counter, &
            hark_pause, hark_resume, hark_active

  abstract interface
    subroutine name_fn(name, len) bind(c)
      import :: c_char, c_size_t
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_size_t), value :: len
    end subroutine
    subroutine value_fn(name, len, v) bind(c)
      import :: c_char, c_size_t, c_int64_t
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_size_t), value :: len
      integer(c_int64_t), value :: v
    end subroutine
    subroutine void_fn() bind(c)
    end subroutine
    function int_fn() bind(c) result(r)
      import :: c_int
      integer(c_int) :: r
    end function
  end interface

  interface
    function dlsym(handle, symbol) bind(c, name="dlsym") result(p)
      import :: c_ptr, c_char, c_funptr
      type(c_ptr), value :: handle
      character(kind=c_char), dimension(*), intent(in) :: symbol
      type(c_funptr) :: p
    end function
  end interface

  logical, save :: resolved = .false.
  type(c_funptr), save :: p_begin, p_end, p_mark, p_counter, p_pause, p_resume, p_active

contains

  subroutine resolve()
    ! RTLD_DEFAULT is the null handle on glibc: search the global scope.
    if (resolved) return
    p_begin = dlsym(c_null_ptr, "hark_region_begin_n" // c_null_char)
    p_end = dlsym(c_null_ptr, "hark_region_end_n" // c_null_char)
    p_mark = dlsym(c_null_ptr, "hark_mark_n" // c_null_char)
    p_counter = dlsym(c_null_ptr, "hark_counter_n" // c_null_char)
    p_pause = dlsym(c_null_ptr, "hark_pause" // c_null_char)
    p_resume = dlsym(c_null_ptr, "hark_resume" // c_null_char)
    p_active = dlsym(c_null_ptr, "hark_active" // c_null_char)
    resolved = .true.
  end subroutine

  subroutine call_name(p, name)
    type(c_funptr), intent(in) :: p
    character(len=*), intent(in) :: name
    procedure(name_fn), pointer :: f
    if (.not. c_associated(p)) return
    call c_f_procpointer(p, f)
    call f(name, int(len(name), c_size_t))
  end subroutine

  subroutine call_value(p, name, v)
    type(c_funptr), intent(in) :: p
    character(len=*), intent(in) :: name
    integer, intent(in) :: v
    procedure(value_fn), pointer :: f
    if (.not. c_associated(p)) return
    call c_f_procpointer(p, f)
    call f(name, int(len(name), c_size_t), int(v, c_int64_t))
  end subroutine

  !> Enters the region `name`.
  subroutine hark_region_begin(name)
    character(len=*), intent(in) :: name
    call resolve()
    call call_name(p_begin, name)
  end subroutine

  !> Leaves the region `name`.
  subroutine hark_region_end(name)
    character(len=*), intent(in) :: name
    call resolve()
    call call_name(p_end, name)
  end subroutine

  !> Marks iteration `it` of `name`.
  subroutine hark_mark(name, it)
    character(len=*), intent(in) :: name
    integer, intent(in) :: it
    call resolve()
    call call_value(p_mark, name, it)
  end subroutine

  !> Records `v` for the counter `name`.
  subroutine hark_counter(name, v)
    character(len=*), intent(in) :: name
    integer, intent(in) :: v
    call resolve()
    call call_value(p_counter, name, v)
  end subroutine

  !> Pauses recording of this process.
  subroutine hark_pause()
    procedure(void_fn), pointer :: f
    call resolve()
    if (.not. c_associated(p_pause)) return
    call c_f_procpointer(p_pause, f)
    call f()
  end subroutine

  !> Resumes recording of this process.
  subroutine hark_resume()
    procedure(void_fn), pointer :: f
    call resolve()
    if (.not. c_associated(p_resume)) return
    call c_f_procpointer(p_resume, f)
    call f()
  end subroutine

  !> True while this process is being recorded.
  logical function hark_active()
    procedure(int_fn), pointer :: f
    call resolve()
    hark_active = .false.
    if (.not. c_associated(p_active)) return
    call c_f_procpointer(p_active, f)
    hark_active = f() /= 0
  end function

end module hark
