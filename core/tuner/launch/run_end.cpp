#include "core/tuner/launch/run_end.h"

#include "core/tuner/netmodel/run_samples.h"
#include "core/tuner/store/run_metrics.h"

namespace commtune {

void finish_run_with_digest(db::Store& store, std::int64_t run_id, db::RunEnd end) {
  try {
    end.digest = digest_json(digest_curve(store.curve(run_id)));
  } catch (const std::exception&) {  // the end matters more: without a digest the steps answer
    end.digest = nullptr;
  }
  // Where it ran, beside what it measured: a comparison of 10^5 runs reads
  // their links with the digests instead of from their start events.
  try {
    if (auto link = store.last_event_member(run_id, "run_start", "link_probe");
        link.is_object() && end.digest.is_object())
      end.digest["link_probe"] = std::move(link);
  } catch (const std::exception&) {  // an unreadable start event: its link stays unknown, as before
  }
  // Predicting from 10^5 runs reads their profiles instead of 25 million step rows.
  try {
    if (const auto run = store.run(run_id)) end.samples = RunSamples::from_store(store, *run).encode();
  } catch (const std::exception&) {  // too few steps, no statistics: the steps say so when read
    end.samples.clear();
  }
  store.finish_run(run_id, end);
}

}  // namespace commtune
