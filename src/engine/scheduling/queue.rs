//! The scheduling queue: pods in bin-packing order, retried while the solve makes progress.
//! Mirrors upstream `scheduling/queue.go`.

use std::collections::VecDeque;

use crate::engine::pod::Pod;

/// Pod indices in scheduling order.
pub struct Queue {
    items: VecDeque<usize>,
    /// (generation, queue length) when each pod was last pushed back; seeing the same
    /// pair again means a full pass made no progress. A relaxation starts a new
    /// generation, which forgets every entry at once.
    last_len: Vec<(u32, usize)>,
    generation: u32,
}

impl Queue {
    /// Sorts by CPU then memory, descending (largest first packs best), then by creation
    /// time and uid for a stable order.
    pub fn new<'a>(mut pods: Vec<usize>, pod: impl Fn(usize) -> &'a Pod) -> Queue {
        pods.sort_by(|&a, &b| {
            let (pa, pb) = (pod(a), pod(b));
            pb.requests
                .cpu
                .cmp(&pa.requests.cpu)
                .then_with(|| pb.requests.memory.cmp(&pa.requests.memory))
                .then_with(|| pa.created.cmp(&pb.created))
                .then_with(|| pa.uid.cmp(&pb.uid))
        });
        let n = pods.iter().copied().max().map_or(0, |m| m + 1);
        Queue {
            items: pods.into(),
            last_len: vec![(0, usize::MAX); n],
            generation: 1,
        }
    }

    /// The next pod, or None once a whole pass made no progress.
    pub fn pop(&mut self) -> Option<usize> {
        let &next = self.items.front()?;
        if self.last_len[next] == (self.generation, self.items.len()) {
            return None;
        }
        self.items.pop_front()
    }

    /// Requeues a pod that did not fit. A relaxed pod resets staleness: it may fit now.
    pub fn push(&mut self, i: usize, relaxed: bool) {
        self.items.push_back(i);
        if relaxed {
            // Upstream clears every record and does not record the relaxed pod itself.
            self.generation += 1;
        } else {
            self.last_len[i] = (self.generation, self.items.len());
        }
    }
}
