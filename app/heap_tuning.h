// The process heap, tuned for reading big stores. glibc keeps freed small
// blocks in fast bins until a large free consolidates them all at once;
// freeing the configuration trees of 10^5 runs (tens of nodes each) then
// spent a sixth of `compare --sweep`'s time consolidating (bench/RESULTS.md,
// "Big sweeps"). Without fast bins the per-thread cache still serves small
// blocks.
#pragma once

#include <malloc.h>

namespace commtune {

inline void tune_heap() { mallopt(M_MXFAST, 0); }

}  // namespace commtune
