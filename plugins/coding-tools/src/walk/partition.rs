//! One walk split into parts that separate instances walk at once, each
//! opening only its own share of the tree.
//!
//! The tree is cut at a depth (the *split depth*): every directory at that
//! depth is one unit, and so is every file above it. Every part walks the
//! few levels above the split depth but walks into only its own
//! directories there. A unit belongs to the part picked by a hash of its
//! path, so parts agree on who owns what even if the tree changes while
//! they walk (a file created meanwhile is seen or missed, never searched
//! twice or by nobody). Units are also numbered in walk order, and each
//! file gets a key, `unit << 32 | n` where `n` counts the files inside the
//! unit, so sorting the parts' files by key gives the order of the whole
//! walk.
//!
//! The split depth is the first at which there are enough units to spread
//! subtrees of very different sizes evenly ([`UNITS_PER_PART`] per part);
//! the levels above it are listed again to find it, which costs a few
//! directory listings per level.

use std::io;

use super::{Flow, Found, Visit, walk};

/// Units per part the split aims for. A deeper split balances parts
/// better (subtrees differ widely in size), but every part lists every
/// directory above it, twice: over the crates.io source cache, 256 units
/// per part (a split one level deeper) made two shards 12% slower than 16.
const UNITS_PER_PART: usize = 16;

/// The split depth goes no deeper than this.
const MAX_SPLIT_DEPTH: usize = 8;

/// Part `index` of `count` of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub index: u32,
    pub count: u32,
}

impl Part {
    /// The whole walk in one part.
    pub const WHOLE: Part = Part { index: 0, count: 1 };

    /// Whether unit number `unit` belongs to this part (for a search
    /// made of numbered units, such as one file: unit 0).
    pub fn takes(&self, unit: u64) -> bool {
        unit % u64::from(self.count.max(1)) == u64::from(self.index)
    }

    /// Whether the unit at `path` belongs to this part: by a hash of the
    /// path (FNV-1a, the same in every instance).
    fn owns(&self, path: &str) -> bool {
        let hash = path.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        self.takes(hash)
    }
}

/// Visit the files of `part` of the walk of the directory `root` (a guest
/// path), in walk order, each with its key in the whole walk, until
/// `visit` says stop.
pub fn each_file_of(
    root: &str,
    part: Part,
    visit: impl FnMut(Found<'_>, u64) -> Flow,
) -> io::Result<()> {
    each_file_split(root, part, UNITS_PER_PART, visit)
}

/// [`each_file_of`], aiming for `units_per_part` units per part.
pub(super) fn each_file_split(
    root: &str,
    part: Part,
    units_per_part: usize,
    visit: impl FnMut(Found<'_>, u64) -> Flow,
) -> io::Result<()> {
    let split = if part.count <= 1 {
        0
    } else {
        split_depth(root, part.count as usize * units_per_part)?
    };
    if split == 0 && !part.takes(0) {
        // The root is the only unit, and it is another part's.
        return Ok(());
    }
    walk(
        root,
        &mut PartVisitor {
            part,
            split,
            units: if split == 0 { 1 } else { 0 },
            unit: 0,
            within: 0,
            visit,
        },
    )
}

/// The walk of one part.
struct PartVisitor<F> {
    part: Part,
    split: usize,
    /// Units numbered so far.
    units: u64,
    /// The unit directory being walked (when below the split depth).
    unit: u64,
    /// Files of `unit` visited so far.
    within: u64,
    visit: F,
}

impl<F> PartVisitor<F> {
    fn next_unit(&mut self) -> u64 {
        let unit = self.units;
        self.units += 1;
        unit
    }
}

/// The key of file `within` of unit `unit` (each kept to 32 bits: past
/// 4 billion units or files in one, order may be lost, never a file).
fn key(unit: u64, within: u64) -> u64 {
    unit.min(u64::from(u32::MAX)) << 32 | within.min(u64::from(u32::MAX))
}

impl<F: FnMut(Found<'_>, u64) -> Flow> Visit for PartVisitor<F> {
    fn file(&mut self, found: Found<'_>) -> Flow {
        if found.depth > self.split {
            let key = key(self.unit, self.within);
            self.within += 1;
            return (self.visit)(found, key);
        }
        let unit = self.next_unit();
        if self.part.owns(found.path) {
            (self.visit)(found, key(unit, 0))
        } else {
            Flow::Continue
        }
    }

    fn descend(&mut self, path: &str, depth: usize) -> bool {
        if depth != self.split {
            return true;
        }
        self.unit = self.next_unit();
        self.within = 0;
        self.part.owns(path)
    }
}

/// The shallowest depth (1 or more) with at least `target` units, or the
/// deepest worth trying.
fn split_depth(root: &str, target: usize) -> io::Result<usize> {
    for depth in 1..=MAX_SPLIT_DEPTH {
        let mut count = UnitCount {
            depth,
            files: 0,
            dirs: 0,
        };
        walk(root, &mut count)?;
        if count.files + count.dirs >= target || count.dirs == 0 {
            return Ok(depth);
        }
    }
    Ok(MAX_SPLIT_DEPTH)
}

/// Counts the units a split at `depth` would make, walking no deeper.
struct UnitCount {
    depth: usize,
    files: usize,
    dirs: usize,
}

impl Visit for UnitCount {
    fn file(&mut self, _found: Found<'_>) -> Flow {
        self.files += 1;
        Flow::Continue
    }

    fn descend(&mut self, _path: &str, depth: usize) -> bool {
        if depth < self.depth {
            return true;
        }
        self.dirs += 1;
        false
    }
}
