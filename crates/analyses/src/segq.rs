//! A first-in first-out queue in fixed-size segments.
//!
//! The matcher's queues hold a backlog that rises and falls with how far
//! one stream's analysis runs ahead of another's. A `VecDeque` keeps the
//! capacity of the largest backlog it held, in powers of two, and copies
//! the whole backlog each time it doubles: its memory follows the worst
//! moment of the run, so a longer run holds more for the same bound. Here
//! memory follows the backlog itself, within one segment at each end, and
//! nothing is ever copied.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::VecDeque;

/// Items per segment: 512 operations of 56 bytes are 28 KiB, below the
/// allocator's mmap threshold, so segments are reused from its heap.
pub(crate) const SEGMENT: usize = 512;

/// A FIFO queue of `T` in segments of [`SEGMENT`] items.
#[derive(Clone, Debug)]
pub(crate) struct SegQueue<T> {
    /// Full segments, then the one being filled; each holds at most
    /// `SEGMENT` items and none is empty.
    segs: VecDeque<Vec<T>>,
    /// Items of the first segment already taken.
    head: usize,
    len: usize,
}

impl<T> Default for SegQueue<T> {
    fn default() -> Self {
        SegQueue {
            segs: VecDeque::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T: Copy> SegQueue<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push_back(&mut self, item: T) {
        match self.segs.back_mut() {
            Some(seg) if seg.len() < SEGMENT => seg.push(item),
            _ => {
                let mut seg = Vec::with_capacity(SEGMENT);
                seg.push(item);
                self.segs.push_back(seg);
            }
        }
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let seg = self.segs.front()?;
        let item = seg[self.head];
        self.head += 1;
        self.len -= 1;
        if self.head == seg.len() {
            self.segs.pop_front();
            self.head = 0;
        }
        Some(item)
    }

    pub fn front(&self) -> Option<&T> {
        self.segs.front().map(|seg| &seg[self.head])
    }

    /// The `k`-th item from the front.
    pub fn get(&self, k: usize) -> Option<&T> {
        if k >= self.len {
            return None;
        }
        let k = k + self.head;
        // Every segment but the last is full.
        self.segs.get(k / SEGMENT).map(|seg| &seg[k % SEGMENT])
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let head = self.head;
        self.segs
            .iter()
            .enumerate()
            .flat_map(move |(i, seg)| &seg[if i == 0 { head } else { 0 }..])
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        let head = self.head;
        self.segs
            .iter_mut()
            .enumerate()
            .flat_map(move |(i, seg)| &mut seg[if i == 0 { head } else { 0 }..])
    }

    /// Items the segments have room for: what the queue holds in memory.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.segs.len() * SEGMENT
    }
}

impl<T: Copy> Extend<T> for SegQueue<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for item in items {
            self.push_back(item);
        }
    }
}

impl<T: Copy> IntoIterator for SegQueue<T> {
    type Item = T;
    type IntoIter =
        std::iter::Skip<std::iter::Flatten<std::collections::vec_deque::IntoIter<Vec<T>>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.segs.into_iter().flatten().skip(self.head)
    }
}

/// Serialised as a sequence, as a `VecDeque` is: partials keep their form.
impl<T: Copy + Serialize> Serialize for SegQueue<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        // The length first: postcard cannot take a sequence without it.
        let mut seq = s.serialize_seq(Some(self.len))?;
        for item in self.iter() {
            seq.serialize_element(item)?;
        }
        seq.end()
    }
}

impl<'de, T: Copy + Deserialize<'de>> Deserialize<'de> for SegQueue<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<T>::deserialize(d)?;
        let mut q = SegQueue::default();
        q.extend(items);
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_a_fifo_across_segments() {
        let (mut q, mut model) = (SegQueue::default(), VecDeque::new());
        // Pushes and pops in uneven runs, so that the head wanders
        // through segments and the queue empties and refills.
        let mut next = 0u32;
        for round in 0..40usize {
            for _ in 0..(round * 97) % 1300 {
                q.push_back(next);
                model.push_back(next);
                next += 1;
            }
            for _ in 0..(round * 61) % 1100 {
                assert_eq!(q.pop_front(), model.pop_front());
            }
            assert_eq!(q.len(), model.len());
            assert_eq!(q.front(), model.front());
            for k in [
                0,
                1,
                SEGMENT - 1,
                SEGMENT,
                model.len().saturating_sub(1),
                model.len(),
            ] {
                assert_eq!(q.get(k), model.get(k), "item {k} of {}", model.len());
            }
            assert!(q.iter().eq(model.iter()));
        }
        assert!(q.clone().into_iter().eq(model.iter().copied()));
        q.iter_mut().for_each(|x| *x += 1);
        assert!(q.iter().copied().eq(model.iter().map(|x| x + 1)));
    }

    #[test]
    fn memory_follows_the_backlog() {
        let mut q = SegQueue::default();
        q.extend(0..100_000u64);
        while q.len() > 10 {
            q.pop_front();
        }
        // A VecDeque would still hold 131,072.
        assert!(q.capacity() <= 2 * SEGMENT, "{}", q.capacity());
        while q.pop_front().is_some() {}
        assert_eq!(q.capacity(), 0);
    }

    #[test]
    fn it_serialises_as_a_vecdeque_does() {
        let mut q = SegQueue::default();
        q.extend(0..1500u32);
        for _ in 0..700 {
            q.pop_front();
        }
        let model: VecDeque<u32> = (700..1500).collect();
        let bytes = postcard::to_allocvec(&q).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&model).unwrap());
        let back: SegQueue<u32> = postcard::from_bytes(&bytes).unwrap();
        assert!(back.iter().eq(model.iter()));
    }
}
