//! The variadic stdio entry points (`fprintf`, `printf`, their fortified
//! forms, `dprintf`, `fscanf`, `scanf`).
//!
//! Stable Rust cannot define a C-variadic function, but it can define a
//! naked one. Each entry point here builds, in assembly, exactly the
//! `va_list` a C compiler's prologue would (the x86-64 System V register
//! save area: the six integer argument registers, then the eight vector
//! registers if `al` says any were used; `gp_offset` past the named
//! arguments, `fp_offset` 48, `overflow_arg_area` at the caller's stack
//! arguments), then calls a Rust function with the named arguments and a
//! pointer to that `va_list`, which times the real `v*` function. Only
//! x86-64 gets these; elsewhere the `v*` wrappers still record.
//!
//! `execl`, `execle` and `execlp` have no `v*` form taking a `va_list`:
//! their Rust side reads the arguments from it into an `argv` and calls
//! the probe's own `execv`, `execve` or `execvp` (which close the stream
//! before the exec), as glibc's versions call `execve` internally.
//!
//! Each entry point stores its caller's return address as a call-site shim
//! does; the Rust side takes it ([`IoCall`]) first thing.

use std::ffi::{c_char, c_int};

use hark_wire::op::io;
use libc::FILE;

use crate::core::callsite::IoCall;

use super::stdio::{stdout, vdprintf_impl, vfprintf_chk_impl, vfprintf_impl, vfscanf_impl, VaList};

/// Defines the exported variadic `$name` with `$named` fixed integer or
/// pointer arguments, passing them and the `va_list` (in register `$ap`,
/// the next argument register) to `$target`.
macro_rules! variadic {
    ($($name:ident($named:literal, $ap:literal) => $target:path;)*) => {$(
        /// Variadic wrapper; see the module documentation.
        ///
        /// # Safety
        /// As the C function.
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                // The caller's return address for its call site, as
                // `callsite_shim!` stores it (r10 and r11 carry nothing).
                "mov r11, qword ptr [rsp]",
                "mov r10, qword ptr [rip + hark_probe_ret@GOTTPOFF]",
                "mov qword ptr fs:[r10], r11",
                "push rbp",
                "mov rbp, rsp",
                // 176 bytes of register save area, 24 of va_list, 8 of
                // padding: rsp stays 16-byte aligned.
                "sub rsp, 208",
                "mov [rsp], rdi",
                "mov [rsp + 8], rsi",
                "mov [rsp + 16], rdx",
                "mov [rsp + 24], rcx",
                "mov [rsp + 32], r8",
                "mov [rsp + 40], r9",
                "test al, al",
                "je 2f",
                "movaps [rsp + 48], xmm0",
                "movaps [rsp + 64], xmm1",
                "movaps [rsp + 80], xmm2",
                "movaps [rsp + 96], xmm3",
                "movaps [rsp + 112], xmm4",
                "movaps [rsp + 128], xmm5",
                "movaps [rsp + 144], xmm6",
                "movaps [rsp + 160], xmm7",
                "2:",
                "mov dword ptr [rsp + 176], {gp}",
                "mov dword ptr [rsp + 180], 48",
                "lea rax, [rbp + 16]",
                "mov [rsp + 184], rax",
                "mov [rsp + 192], rsp",
                concat!("lea ", $ap, ", [rsp + 176]"),
                "call {target}",
                "leave",
                "ret",
                gp = const $named * 8,
                target = sym $target,
            )
        }
    )*};
}

variadic! {
    fprintf(2, "rdx") => fprintf_va;
    printf(1, "rsi") => printf_va;
    __fprintf_chk(3, "rcx") => fprintf_chk_va;
    __printf_chk(2, "rdx") => printf_chk_va;
    dprintf(2, "rdx") => dprintf_va;
    fscanf(2, "rdx") => fscanf_va;
    __isoc99_fscanf(2, "rdx") => fscanf_va;
    scanf(1, "rsi") => scanf_va;
    __isoc99_scanf(1, "rsi") => scanf_va;
    execl(2, "rdx") => execl_va;
    execle(2, "rdx") => execle_va;
    execlp(2, "rdx") => execlp_va;
}

type Argv = *const *const c_char;

extern "C" fn execl_va(path: *const c_char, arg0: *const c_char, ap: VaList) -> c_int {
    // No I/O event: the address is only taken, not to stay behind.
    drop(IoCall::begin());
    // SAFETY: `ap` is the va_list of the caller's arguments after `arg0`.
    unsafe { with_argv(arg0, ap, false, |argv, _| super::exec::execv(path, argv)) }
}

extern "C" fn execle_va(path: *const c_char, arg0: *const c_char, ap: VaList) -> c_int {
    // No I/O event: the address is only taken, not to stay behind.
    drop(IoCall::begin());
    // SAFETY: as above; `execle`'s environment follows the NULL.
    unsafe {
        with_argv(arg0, ap, true, |argv, envp| {
            super::exec::execve(path, argv, envp)
        })
    }
}

extern "C" fn execlp_va(file: *const c_char, arg0: *const c_char, ap: VaList) -> c_int {
    // No I/O event: the address is only taken, not to stay behind.
    drop(IoCall::begin());
    // SAFETY: as above.
    unsafe { with_argv(arg0, ap, false, |argv, _| super::exec::execvp(file, argv)) }
}

/// The x86-64 System V `va_list` the entry points build.
#[repr(C)]
struct RawVaList {
    gp_offset: u32,
    fp_offset: u32,
    overflow_arg_area: *const usize,
    reg_save_area: *const u8,
}

/// The next pointer argument of `ap`.
///
/// # Safety
/// `ap` is a live va_list with at least one more integer argument.
unsafe fn next_ptr(ap: *mut RawVaList) -> *const c_char {
    // SAFETY: per the caller; integer arguments are in the register save
    // area until `gp_offset` reaches 48, then on the caller's stack.
    unsafe {
        let a = &mut *ap;
        if a.gp_offset < 48 {
            let p = a.reg_save_area.add(a.gp_offset as usize) as *const *const c_char;
            a.gp_offset += 8;
            p.read()
        } else {
            let p = a.overflow_arg_area as *const *const c_char;
            a.overflow_arg_area = a.overflow_arg_area.add(1);
            p.read()
        }
    }
}

/// Arguments `execl` and friends accept at most (beyond, `E2BIG`): the
/// list must end with a NULL, and a missing one must not loop forever.
const MAX_ARGS: usize = 1 << 20;

/// Reads `arg0` and the arguments that follow up to and including the NULL
/// into an `argv`, and with `with_envp` the pointer after the NULL
/// (`execle`'s environment), and calls `exec` with them. The `argv` lives
/// on the stack unless it is long: the caller may be a `vfork` child, which
/// should not touch the heap.
///
/// # Safety
/// `ap` is the va_list of a NULL-terminated list of `char *` after `arg0`,
/// followed by one more pointer if `with_envp`.
unsafe fn with_argv(
    arg0: *const c_char,
    ap: VaList,
    with_envp: bool,
    exec: impl FnOnce(Argv, Argv) -> c_int,
) -> c_int {
    let ap = ap as *mut RawVaList;
    let mut small = [std::ptr::null::<c_char>(); 64];
    let mut large = Vec::new();
    let mut n = 0;
    let mut arg = arg0;
    loop {
        if n < small.len() {
            small[n] = arg;
        } else {
            if large.is_empty() {
                large.extend_from_slice(&small);
            }
            large.push(arg);
        }
        n += 1;
        if arg.is_null() {
            break;
        }
        if n == MAX_ARGS {
            super::set_errno(libc::E2BIG);
            return -1;
        }
        // SAFETY: per the caller, the list goes on until its NULL.
        arg = unsafe { next_ptr(ap) };
    }
    let argv = if large.is_empty() {
        small.as_ptr()
    } else {
        large.as_ptr()
    };
    let envp = if with_envp {
        // SAFETY: `execle`'s environment pointer follows the NULL.
        unsafe { next_ptr(ap) as Argv }
    } else {
        std::ptr::null()
    };
    exec(argv, envp)
}

extern "C" fn fprintf_va(f: *mut FILE, fmt: *const c_char, ap: VaList) -> c_int {
    let _site = IoCall::begin();
    vfprintf_impl(io::FPRINTF, f, fmt, ap)
}

extern "C" fn printf_va(fmt: *const c_char, ap: VaList) -> c_int {
    let _site = IoCall::begin();
    vfprintf_impl(io::FPRINTF, stdout(), fmt, ap)
}

extern "C" fn fprintf_chk_va(f: *mut FILE, flag: c_int, fmt: *const c_char, ap: VaList) -> c_int {
    let _site = IoCall::begin();
    vfprintf_chk_impl(f, flag, fmt, ap)
}

extern "C" fn printf_chk_va(flag: c_int, fmt: *const c_char, ap: VaList) -> c_int {
    let _site = IoCall::begin();
    vfprintf_chk_impl(stdout(), flag, fmt, ap)
}

extern "C" fn dprintf_va(fd: c_int, fmt: *const c_char, ap: VaList) -> c_int {
    let _site = IoCall::begin();
    vdprintf_impl(fd, fmt, ap)
}

extern "C" fn fscanf_va(f: *mut FILE, fmt: *const c_char, ap: VaList) -> c_int {
    let _site = IoCall::begin();
    vfscanf_impl(f, fmt, ap)
}

extern "C" fn scanf_va(fmt: *const c_char, ap: VaList) -> c_int {
    let _site = IoCall::begin();
    vfscanf_impl(stdin(), fmt, ap)
}

fn stdin() -> *mut FILE {
    extern "C" {
        static mut stdin: *mut FILE;
    }
    // SAFETY: glibc's `stdin` is a valid, initialised global.
    unsafe { stdin }
}
