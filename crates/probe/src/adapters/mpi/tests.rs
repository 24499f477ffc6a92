//! Counts read with the width of their binding (`int` or `MPI_Count`).

use super::{count, count_at, sum};

#[test]
fn large_counts_keep_their_high_bits_and_int_counts_do_not_read_them() {
    let big = (1usize << 32) + 16;
    assert_eq!(count(big, true), (1i64 << 32) + 16);
    assert_eq!(count(big, false), 16);
    // An `int` count's register may carry garbage above bit 31.
    assert_eq!(count(0xdead_beef_0000_0007, false), 7);
}

#[test]
fn count_arrays_are_read_with_the_width_of_their_variant() {
    let wide: [i64; 3] = [1 << 33, 5, -1];
    let narrow: [i32; 3] = [7, 5, -1];
    // SAFETY: both arrays have 3 entries.
    unsafe {
        assert_eq!(count_at(wide.as_ptr() as usize, 0, true), 1 << 33);
        assert_eq!(count_at(narrow.as_ptr() as usize, 1, false), 5);
        assert_eq!(sum(wide.as_ptr() as usize, 3, true), (1 << 33) + 5);
        assert_eq!(sum(narrow.as_ptr() as usize, 3, false), 12);
    }
}
