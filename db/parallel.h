// Work spread over every core, for the readers of big stores: a sweep of
// 10^5 trials is 10^5 configurations to parse and check (the store) and
// 10^5 rows to format (the CLI's JSON). Here, the lowest layer, so that
// both share one implementation.
#pragma once

#include <cstddef>
#include <functional>

namespace commtune::db {

// `produce(i)` for each i in [0, count), in order, on this thread, while
// `process(i)` runs on every core for each i already produced (in chunks:
// no two threads hold the same i). Returns once every i is processed; an
// exception from either side stops the others and is raised here after
// every thread has stopped. Runs on this thread alone when no other thread
// can be started.
void produce_and_process(std::size_t count, const std::function<void(std::size_t)>& produce,
                         const std::function<void(std::size_t)>& process, std::size_t chunk = 256);

// `process(i)` for each i in [0, count) on every core, `chunk` at a time
// (1 for a few long pieces of work).
void parallel_for(std::size_t count, const std::function<void(std::size_t)>& process, std::size_t chunk = 256);

}  // namespace commtune::db
