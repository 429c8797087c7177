// The process heap, for reading big stores: tens of millions of small
// blocks (the configuration trees of 10^5 runs) allocated and freed.
// - Where mimalloc is linked (cmake/CommtuneDependencies.cmake) it is the
//   process's malloc, and glibc's setting below touches a heap nothing uses.
// - Otherwise glibc's: it keeps freed small blocks in fast bins until a
//   large free consolidates them all at once, and freeing 10^5 trees over
//   and over consolidated them: without fast bins `compare --sweep` at 10^5
//   took 17.2 s instead of 20.3 s (bench/RESULTS.md, "Big sweeps", session
//   13). The per-thread cache still serves small blocks.
// No compile definition says which: the CLI's precompiled header is shared
// with the worker, which does not link mimalloc.
#pragma once

#include <malloc.h>

namespace commtune {

inline void tune_heap() { mallopt(M_MXFAST, 0); }

}  // namespace commtune
