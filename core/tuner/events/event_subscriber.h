// What receives a run's events as the launcher (or an event-file reader)
// decodes them: the run's summary, its recorder into the store, the live
// views. Data flows one way, worker -> launcher -> subscribers.
#pragma once

#include "core/tuner/events/event_codec.h"

namespace commtune {

class EventSubscriber {
 public:
  virtual ~EventSubscriber() = default;
  // Called on the launcher's thread, in arrival order per rank.
  virtual void on_event(const events::Event& event) = 0;
};

}  // namespace commtune
