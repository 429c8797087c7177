// The Runs page's questions before it edits the store: a run's name, tags
// and notes; whether to delete runs (named, so that a selection gone wrong
// shows before it is too late) or a sweep with its trials; a sweep's new
// name. Each returns the answer; the page makes the edit.
#pragma once

#include <QString>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ui/pages/runs/run_table.h"

class QWidget;

namespace commtune::ui {

struct Annotation {
  QString name;
  QString tags;
  QString notes;
};

// Starts from `now`; nothing when the user cancels.
std::optional<Annotation> ask_annotation(QWidget* parent, std::int64_t run_id, const Annotation& now);
// `count` runs, those of them in the table listed.
bool confirm_delete_runs(QWidget* parent, std::size_t count, const std::vector<RunSummary>& listed);
bool confirm_delete_sweep(QWidget* parent, std::int64_t sweep_id);
// The box starts from `name`, the sweep's now; nothing when the user cancels.
std::optional<QString> ask_sweep_name(QWidget* parent, std::int64_t sweep_id, const QString& name);

}  // namespace commtune::ui
