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

use std::ffi::{c_char, c_int};

use hark_wire::op::io;
use libc::FILE;

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
}

extern "C" fn fprintf_va(f: *mut FILE, fmt: *const c_char, ap: VaList) -> c_int {
    vfprintf_impl(io::FPRINTF, f, fmt, ap)
}

extern "C" fn printf_va(fmt: *const c_char, ap: VaList) -> c_int {
    vfprintf_impl(io::FPRINTF, stdout(), fmt, ap)
}

extern "C" fn fprintf_chk_va(f: *mut FILE, flag: c_int, fmt: *const c_char, ap: VaList) -> c_int {
    vfprintf_chk_impl(f, flag, fmt, ap)
}

extern "C" fn printf_chk_va(flag: c_int, fmt: *const c_char, ap: VaList) -> c_int {
    vfprintf_chk_impl(stdout(), flag, fmt, ap)
}

extern "C" fn dprintf_va(fd: c_int, fmt: *const c_char, ap: VaList) -> c_int {
    vdprintf_impl(fd, fmt, ap)
}

extern "C" fn fscanf_va(f: *mut FILE, fmt: *const c_char, ap: VaList) -> c_int {
    vfscanf_impl(f, fmt, ap)
}

extern "C" fn scanf_va(fmt: *const c_char, ap: VaList) -> c_int {
    vfscanf_impl(stdin(), fmt, ap)
}

fn stdin() -> *mut FILE {
    extern "C" {
        static mut stdin: *mut FILE;
    }
    // SAFETY: glibc's `stdin` is a valid, initialised global.
    unsafe { stdin }
}
