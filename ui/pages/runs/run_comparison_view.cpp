#include "ui/pages/runs/run_comparison_view.h"

#include <QHeaderView>
#include <QStringList>
#include <QTableWidget>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tuner/store/run_query.h"

namespace commtune::ui {

RunComparisonView::RunComparisonView(QTableWidget* diff, QTableWidget* metrics) : diff_(diff), metrics_(metrics) {
  diff_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  metrics_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  metrics_->verticalHeader()->setVisible(false);
  metrics_->setToolTip(
      "As commtune-cli compare: tail loss is the mean over ranks and the last 10% of steps, "
      "ms/step the median over the steady second half, vs base the loss change against allreduce");
}

void RunComparisonView::clear() {
  diff_->clear();
  metrics_->clear();
}

void RunComparisonView::draw(const RunComparison& comparison, bool only_differences) {
  draw_diff(comparison, only_differences);
  draw_metrics(comparison);
}

void RunComparisonView::draw_diff(const RunComparison& comparison, bool only_differences) {
  const auto& runs = comparison.runs;
  const std::set<std::string> differing(comparison.differing.begin(), comparison.differing.end());
  std::set<std::string> names;
  std::vector<std::map<std::string, nlohmann::json>> params;  // every parameter of each run
  for (const auto& r : runs) {
    const auto own = run_params(r.run);
    for (const auto& [name, value] : own) names.insert(name);
    params.emplace_back(own.begin(), own.end());
  }
  std::vector<std::pair<std::string, bool>> rows;  // name, differs
  for (const auto& name : names) {
    const bool differs = differing.count(name) > 0;
    if (only_differences && runs.size() > 1 && !differs) continue;
    rows.emplace_back(name, differs);
  }
  // Swept differences first, then the rest.
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  QStringList headers{"parameter"};
  for (const auto& r : runs) headers << QString("run %1").arg(r.run.id);
  diff_->setColumnCount(static_cast<int>(headers.size()));
  diff_->setHorizontalHeaderLabels(headers);
  diff_->setRowCount(static_cast<int>(rows.size()));
  for (int row = 0; row < static_cast<int>(rows.size()); ++row) {
    const auto& [name, differs] = rows[static_cast<std::size_t>(row)];
    diff_->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(name)));
    for (std::size_t c = 0; c < runs.size(); ++c) {
      const auto it = params[c].find(name);
      auto* item =
          new QTableWidgetItem(it == params[c].end() ? QString("–") : QString::fromStdString(param_text(it->second)));
      QFont font = item->font();
      font.setBold(differs);
      item->setFont(font);
      diff_->setItem(row, static_cast<int>(c) + 1, item);
    }
  }
  diff_->resizeColumnsToContents();
}

void RunComparisonView::draw_metrics(const RunComparison& comparison) {
  const auto& runs = comparison.runs;
  metrics_->setColumnCount(8);
  metrics_->setHorizontalHeaderLabels(
      {"run", "label", "steps", "tail loss", "vs base", "ms/step", "MB/step", "compr."});
  metrics_->setRowCount(static_cast<int>(runs.size()));
  auto text = [](const std::optional<double>& v, int precision, const QString& suffix = {}) {
    return v ? QString::number(*v, 'f', precision) + suffix : QString("–");
  };
  for (int row = 0; row < static_cast<int>(runs.size()); ++row) {
    const auto& r = runs[static_cast<std::size_t>(row)];
    const auto& change = r.loss_change;
    const QStringList cells{
        QString::number(r.run.id) + (r.is_baseline ? "*" : ""),
        QString::fromStdString(r.label),
        QString::number(r.digest.steps),
        r.digest.loss && !std::isfinite(*r.digest.loss) ? QString::number(*r.digest.loss) : text(r.digest.loss, 5),
        change ? QString("%1%2%").arg(*change >= 0 ? "+" : "").arg(100 * *change, 0, 'f', 2) : QString("–"),
        text(r.digest.step_ms, 2),
        text(r.digest.wire_mb, 3),
        text(r.digest.compression_ratio, 1, "x")};
    for (int c = 0; c < cells.size(); ++c) metrics_->setItem(row, c, new QTableWidgetItem(cells[c]));
    if (!r.no_loss_change.empty())  // why vs base is "–", as compare prints it
      metrics_->item(row, 4)->setToolTip(QString::fromStdString("no change against a baseline: " + r.no_loss_change));
  }
  metrics_->resizeColumnsToContents();
}

}  // namespace commtune::ui
