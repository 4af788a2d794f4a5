//! Test builds only: the global allocator counts the heap that one part of a test holds, so a
//! probe can say how many bytes a live call costs the server without the noise of RSS.
//!
//! The in-memory tests run the server's endpoint and its client peers on one thread, so a
//! counter of everything allocated would mix the two. Instead, code run inside [`counted`]
//! marks each block it allocates (a header in front of the block says so), and a marked block
//! is subtracted when it is freed, wherever that happens: a transmit the endpoint hands out
//! and the test drops later still balances. What stays counted is what the server keeps.

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Room in front of each block for its mark; a multiple of every alignment `System` gives
/// without asking (16 on x86-64), so blocks stay aligned as asked.
const HEADER: usize = 16;

const MARKED: u8 = 1;

thread_local! {
    // `const` and no destructors: using them cannot allocate or fail during thread teardown.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    // Per thread, so tests running beside each other do not count each other's blocks. A
    // marked block freed on another thread is subtracted there; the in-memory tests that read
    // these run the endpoint and its peers on one thread.
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
    static LIVE_BLOCKS: Cell<isize> = const { Cell::new(0) };
    // Set while the probe's own bookkeeping allocates, so it does not record itself.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
    // Where each live marked block was made, while [`record_sites`] is on. This one has a
    // destructor: the allocator reaches it only through `try_with`, and only inside
    // `bookkeeping`, so the allocation that registers the destructor is not recorded.
    static SITES: RefCell<Option<HashMap<usize, (usize, Backtrace)>>> = const { RefCell::new(None) };
}

/// Starts (or stops and forgets) recording the call stack of every marked block this thread
/// makes: slow, for a few calls at a time.
pub fn record_sites(on: bool) {
    bookkeeping(|| SITES.with(|s| *s.borrow_mut() = on.then(HashMap::new)));
}

/// The live marked blocks by the first `depth` frames of their stacks that `owner` accepts (a
/// crate's, say), largest first: (frames, bytes, blocks).
pub fn sites(owner: impl Fn(&str) -> bool, depth: usize) -> Vec<(String, usize, usize)> {
    let blocks: Vec<(usize, String)> = bookkeeping(|| {
        SITES.with(|s| {
            s.borrow()
                .iter()
                .flat_map(|m| m.values())
                .map(|(size, bt)| (*size, bt.to_string()))
                .collect()
        })
    });
    let mut by: HashMap<String, (usize, usize)> = HashMap::new();
    for (size, bt) in blocks {
        let frames: Vec<&str> = bt
            .lines()
            .filter_map(|l| l.trim().split_once(": ").map(|(_, f)| f))
            .filter(|f| owner(f))
            .take(depth)
            .collect();
        let e = by.entry(frames.join(" < ")).or_default();
        e.0 += size;
        e.1 += 1;
    }
    let mut v: Vec<_> = by.into_iter().map(|(f, (b, n))| (f, b, n)).collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.1));
    v
}

fn bookkeeping<T>(f: impl FnOnce() -> T) -> T {
    let was = INSIDE.with(|c| c.replace(true));
    let r = f();
    INSIDE.with(|c| c.set(was));
    r
}

fn note(ptr: *mut u8, size: Option<usize>, moved_from: Option<*mut u8>) {
    if INSIDE.try_with(|c| c.get()).unwrap_or(true) {
        return;
    }
    bookkeeping(|| {
        let _ = SITES.try_with(|s| {
            let Ok(mut s) = s.try_borrow_mut() else {
                return;
            };
            let Some(map) = s.as_mut() else {
                return;
            };
            match (size, moved_from) {
                (Some(size), None) => {
                    map.insert(ptr as usize, (size, Backtrace::force_capture()));
                }
                (Some(size), Some(old)) => {
                    if let Some((_, bt)) = map.remove(&(old as usize)) {
                        map.insert(ptr as usize, (size, bt));
                    }
                }
                (None, _) => {
                    map.remove(&(ptr as usize));
                }
            }
        });
    });
}

fn add(bytes: isize, blocks: isize) {
    let _ = LIVE_BYTES.try_with(|c| c.set(c.get() + bytes));
    let _ = LIVE_BLOCKS.try_with(|c| c.set(c.get() + blocks));
}

/// What marked blocks this thread made and freed come to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    pub bytes: isize,
    pub blocks: isize,
}

pub fn held() -> Held {
    Held {
        bytes: LIVE_BYTES.with(Cell::get),
        blocks: LIVE_BLOCKS.with(Cell::get),
    }
}

/// Runs `f` with this thread's allocations marked.
pub fn counted<T>(f: impl FnOnce() -> T) -> T {
    let was = COUNTING.with(|c| c.replace(true));
    let r = f();
    COUNTING.with(|c| c.set(was));
    r
}

struct Marking;

fn header(layout: &Layout) -> usize {
    HEADER.max(layout.align())
}

fn outer(layout: &Layout) -> Layout {
    // Cannot fail for a layout that was valid: the size grows by at most its own alignment.
    Layout::from_size_align(layout.size() + header(layout), layout.align().max(HEADER))
        .expect("layout with header")
}

// SAFETY: every block handed out is `header(layout)` bytes into one `System` gave for
// `outer(layout)`, aligned to `layout.align()` (the header is a multiple of it), and every path
// that frees or resizes a block steps back by the same header, computed from the same layout
// the caller must pass back (GlobalAlloc's contract). The mark is one byte in the header,
// written before the block is handed out and read only while the block is live.
unsafe impl GlobalAlloc for Marking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let h = header(&layout);
        // SAFETY: `outer` has a non-zero size (the header).
        let base = unsafe { System.alloc(outer(&layout)) };
        if base.is_null() {
            return base;
        }
        // The probe's own records are not what it measures.
        let marked = COUNTING.try_with(|c| c.get()).unwrap_or(false)
            && !INSIDE.try_with(|c| c.get()).unwrap_or(true);
        // SAFETY: `base` has room for the header, whose first byte holds the mark.
        unsafe { *base = u8::from(marked) };
        // SAFETY: within the block `System` gave.
        let ptr = unsafe { base.add(h) };
        if marked {
            add(layout.size() as isize, 1);
            note(ptr, Some(layout.size()), None);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above with this layout.
        let base = unsafe { ptr.sub(header(&layout)) };
        // SAFETY: the mark written when the block was made.
        if unsafe { *base } == MARKED {
            add(-(layout.size() as isize), -1);
            note(ptr, None, None);
        }
        // SAFETY: `base` is what `System` gave for `outer(&layout)`.
        unsafe { System.dealloc(base, outer(&layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let h = header(&layout);
        // SAFETY: as in `dealloc`.
        let base = unsafe { ptr.sub(h) };
        // SAFETY: the new size plus the same header keeps the same alignment.
        let new_base = unsafe { System.realloc(base, outer(&layout), new_size + h) };
        if new_base.is_null() {
            return new_base;
        }
        // SAFETY: within the new block.
        let new_ptr = unsafe { new_base.add(h) };
        // A block keeps the mark it was made with: it belongs to whoever allocated it.
        // SAFETY: `realloc` kept the header's bytes.
        if unsafe { *new_base } == MARKED {
            add(new_size as isize - layout.size() as isize, 0);
            note(new_ptr, Some(new_size), Some(ptr));
        }
        new_ptr
    }
}

#[global_allocator]
static MARKING: Marking = Marking;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_counted_scope_keeps_is_counted_until_freed_anywhere() {
        let before = held();
        let kept = counted(|| {
            let mut v: Vec<u8> = Vec::with_capacity(100);
            v.extend_from_slice(&[1; 100]);
            let dropped = vec![0u8; 1000];
            drop(dropped);
            v.reserve_exact(200);
            v
        });
        let after = held();
        assert_eq!(after.bytes - before.bytes, kept.capacity() as isize);
        assert_eq!(after.blocks - before.blocks, 1);
        let outside = vec![0u8; 5000];
        assert_eq!(
            held(),
            after,
            "an allocation outside the scope is not counted"
        );
        drop(kept);
        drop(outside);
        assert_eq!(held(), before);
    }
}
