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

/// Items per segment: 512 operations of 56 bytes are 28 KiB, below the
/// allocator's mmap threshold, so segments are reused from its heap.
pub(crate) const SEGMENT: usize = 512;

/// A FIFO queue of `T` in segments of [`SEGMENT`] items.
#[derive(Clone, Debug)]
pub(crate) struct SegQueue<T> {
    /// The segments: those before `first` taken and freed, then full ones,
    /// then the one being filled; none of `first..` is empty. (A `Vec` and
    /// an index, not a `VecDeque`: the ends are found without its wrapping
    /// arithmetic, which cost as much as the rest of a push or pop.)
    segs: Vec<Vec<T>>,
    first: usize,
    /// Items of the first segment already taken.
    head: usize,
    len: usize,
}

impl<T> Default for SegQueue<T> {
    fn default() -> Self {
        SegQueue {
            segs: Vec::new(),
            first: 0,
            head: 0,
            len: 0,
        }
    }
}

/// Taken segments a queue keeps places for before it moves the others to
/// the front of its vector.
const TAKEN: usize = 32;

impl<T: Copy> SegQueue<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment being filled, made if the last is full (or there is
    /// none).
    #[inline]
    fn filling(&mut self) -> &mut Vec<T> {
        if self.segs.last().is_none_or(|seg| seg.len() == SEGMENT) {
            self.segs.push(Vec::with_capacity(SEGMENT));
        }
        self.segs.last_mut().expect("made above")
    }

    pub fn push_back(&mut self, item: T) {
        self.filling().push(item);
        self.len += 1;
    }

    /// Pushes `f` of each of `items`, in order: a segment's worth at a
    /// time.
    pub fn extend_map<S>(&mut self, mut items: &[S], f: impl Fn(&S) -> T) {
        while !items.is_empty() {
            let seg = self.filling();
            let (now, later) = items.split_at((SEGMENT - seg.len()).min(items.len()));
            seg.extend(now.iter().map(&f));
            self.len += now.len();
            items = later;
        }
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        let seg = self.segs.get(self.first)?;
        let item = seg[self.head];
        self.head += 1;
        self.len -= 1;
        if self.head == seg.len() {
            self.next_segment();
        }
        Some(item)
    }

    /// The first segment is all taken: frees it.
    #[inline(never)]
    fn next_segment(&mut self) {
        self.head = 0;
        if self.len == 0 {
            self.segs.clear();
            self.first = 0;
            return;
        }
        self.segs[self.first] = Vec::new();
        self.first += 1;
        if self.first >= TAKEN && 2 * self.first >= self.segs.len() {
            self.segs.drain(..self.first);
            self.first = 0;
        }
    }

    pub fn front(&self) -> Option<&T> {
        self.segs.get(self.first).map(|seg| &seg[self.head])
    }

    /// The `k`-th item from the front.
    pub fn get(&self, k: usize) -> Option<&T> {
        if k >= self.len {
            return None;
        }
        let k = k + self.head;
        // Every segment but the last is full.
        self.segs
            .get(self.first + k / SEGMENT)
            .map(|seg| &seg[k % SEGMENT])
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let head = self.head;
        self.segs[self.first..]
            .iter()
            .enumerate()
            .flat_map(move |(i, seg)| &seg[if i == 0 { head } else { 0 }..])
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        let head = self.head;
        self.segs[self.first..]
            .iter_mut()
            .enumerate()
            .flat_map(move |(i, seg)| &mut seg[if i == 0 { head } else { 0 }..])
    }

    /// Items the segments have room for: what the queue holds in memory.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.segs.iter().map(|seg| seg.capacity()).sum()
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
        std::iter::Skip<std::iter::Flatten<std::iter::Skip<std::vec::IntoIter<Vec<T>>>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.segs
            .into_iter()
            .skip(self.first)
            .flatten()
            .skip(self.head)
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
    use std::collections::VecDeque;

    #[test]
    fn it_is_a_fifo_across_segments() {
        let (mut q, mut model) = (SegQueue::default(), VecDeque::new());
        // Pushes and pops in uneven runs, so that the head wanders
        // through segments and the queue empties and refills.
        let mut next = 0u32;
        for round in 0..40usize {
            let n = (round * 97) % 1300;
            if round % 2 == 0 {
                for _ in 0..n {
                    q.push_back(next);
                    model.push_back(next);
                    next += 1;
                }
            } else {
                let items: Vec<u32> = (next..next + n as u32).collect();
                q.extend_map(&items, |x| *x);
                model.extend(&items);
                next += n as u32;
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
    fn a_long_queue_drained_slowly_stays_in_order() {
        // Enough segments taken from the front that the rest move down.
        let (mut q, mut model) = (SegQueue::default(), VecDeque::new());
        let items: Vec<u64> = (0..(3 * TAKEN * SEGMENT) as u64).collect();
        q.extend_map(&items, |x| *x);
        model.extend(&items);
        let mut k = 0u64;
        while !model.is_empty() {
            for _ in 0..SEGMENT / 2 + 3 {
                assert_eq!(q.pop_front(), model.pop_front());
            }
            q.push_back(1 << 40 | k);
            model.push_back(1 << 40 | k);
            k += 1;
            assert_eq!((q.len(), q.front()), (model.len(), model.front()));
            assert_eq!(q.get(SEGMENT + 1), model.get(SEGMENT + 1));
            if model.len() < SEGMENT {
                break;
            }
        }
        assert!(q.iter().eq(model.iter()));
        assert!(q.segs.len() - q.first <= 2 && q.first < TAKEN);
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
