// How a run's end is stored: beside its status, what every later reader
// needs of its steps, computed once from them while they are at hand.
#pragma once

#include <cstdint>

#include "db/store.h"

namespace commtune {

// Ends a run in the store with its digest (core/tuner/store/run_metrics.h)
// computed from the steps it holds, the link its last launch probed (the
// start event's link_probe) and its steady steps' profile (RunSamples,
// what predictions read). Call it where the run's last rows are committed:
// the writer's thread. Whatever cannot be computed is left out; the end is
// stored regardless.
void finish_run_with_digest(db::Store& store, std::int64_t run_id, db::RunEnd end);

}  // namespace commtune
