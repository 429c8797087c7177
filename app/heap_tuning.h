// The process heap, tuned for reading big stores. glibc keeps freed small
// blocks in fast bins until a large free consolidates them all at once;
// freeing the configuration trees of 10^5 runs (tens of nodes each) over
// and over consolidated them: without fast bins `compare --sweep` at 10^5
// took 17.2 s instead of 20.3 s (bench/RESULTS.md, "Big sweeps", session
// 13). The per-thread cache still serves small blocks.
#pragma once

#include <malloc.h>

namespace commtune {

inline void tune_heap() { mallopt(M_MXFAST, 0); }

}  // namespace commtune
