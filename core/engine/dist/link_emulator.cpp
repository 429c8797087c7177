#include "core/engine/dist/link_emulator.h"

namespace commtune {

LinkEmulator::LinkEmulator(net::Cluster cluster) : cluster_(std::move(cluster)) {
  thread_ = std::thread([this] { release_loop(); });
}

LinkEmulator::~LinkEmulator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

LinkEmulator::Future LinkEmulator::delay(const Future& real, net::Collective kind, double bytes) {
  clock::time_point due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto start = std::max(clock::now(), link_free_);
    due = start + std::chrono::duration_cast<clock::duration>(
                      std::chrono::duration<double>(net::collective_time(kind, bytes, cluster_)));
    link_free_ = due;
  }
  auto out = c10::make_intrusive<c10::ivalue::Future>(real->elementType());
  real->addCallback([this, out, due](c10::ivalue::Future& done) {
    if (done.hasError()) {
      out->setError(done.exception_ptr());
      return;
    }
    if (clock::now() >= due) {
      out->markCompleted(done.value());
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_.push({due, out, done.value()});
    }
    wake_.notify_all();
  });
  return out;
}

void LinkEmulator::release_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (held_.empty()) {
      if (stopping_) return;
      wake_.wait(lock);
      continue;
    }
    const auto due = held_.top().due;
    if (!stopping_ && clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;
    }
    auto held = held_.top();
    held_.pop();
    lock.unlock();
    held.out->markCompleted(std::move(held.value));  // runs the hook's continuations, on this thread
    lock.lock();
  }
}

}  // namespace commtune
