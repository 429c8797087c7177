// The process heap, for reading big stores: tens of millions of small
// blocks (the configuration trees of 10^5 runs) allocated and freed.
// - With mimalloc linked (cmake/CommtuneDependencies.cmake) it is the
//   process's malloc and needs nothing here.
// - Otherwise glibc's: it keeps freed small blocks in fast bins until a
//   large free consolidates them all at once, and freeing 10^5 trees over
//   and over consolidated them: without fast bins `compare --sweep` at 10^5
//   took 17.2 s instead of 20.3 s (bench/RESULTS.md, "Big sweeps", session
//   13). The per-thread cache still serves small blocks.
#pragma once

#include <malloc.h>

namespace commtune {

inline void tune_heap() {
#ifndef COMMTUNE_WITH_MIMALLOC
  mallopt(M_MXFAST, 0);
#endif
}

}  // namespace commtune
