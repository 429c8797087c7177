#include "ui/plot/trial_list.h"

#include <QHeaderView>
#include <QMenu>
#include <QPainter>
#include <QPixmap>
#include <algorithm>

#include "ui/forms/param_field.h"

namespace commtune::ui {

namespace {

// The groups' rows in the list's narrow width: the words that tell them
// apart (those every group shares are left to the tooltip), under the
// columns' short names: "start iter=2 (2 seeds)". Whole, the labels were
// cut alike for every start iteration ("matrix_approximation_rank=1 start_po…").
std::vector<QString> short_group_labels(const std::vector<SeedGroup>& groups) {
  std::vector<QStringList> words;
  for (const auto& group : groups) words.push_back(QString::fromStdString(group.key).split(' ', Qt::SkipEmptyParts));
  std::vector<QString> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    QStringList kept;
    for (const auto& word : words[g]) {
      const bool shared = groups.size() > 1 && std::all_of(words.begin(), words.end(), [&](const QStringList& w) {
                            return w.contains(word);
                          });
      const auto eq = word.indexOf('=');
      if (!shared) kept << (eq > 0 ? short_param_name(word.left(eq)) + word.mid(eq) : word);
    }
    SeedGroup shown = groups[g];
    if (!kept.isEmpty()) shown.key = kept.join(' ').toStdString();
    out.push_back(QString::fromStdString(group_label(shown)));
  }
  return out;
}

constexpr int kRunRole = Qt::UserRole;
constexpr int kSortRole = Qt::UserRole + 1;
constexpr int kOtherTextRole = Qt::UserRole + 2;  // the label's words that are not parameter=value
constexpr int kGroupRole = Qt::UserRole + 3;      // a group's row: its runs

std::vector<std::int64_t> runs_of(const QTreeWidgetItem* item) {
  const auto group = item->data(0, kGroupRole).toList();
  if (group.isEmpty()) return {item->data(0, kRunRole).toLongLong()};
  std::vector<std::int64_t> out;
  for (const auto& id : group) out.push_back(id.toLongLong());
  return out;
}

// Sorts numbers as numbers (rank 16 after rank 2).
class TrialItem final : public QTreeWidgetItem {
 public:
  using QTreeWidgetItem::QTreeWidgetItem;
  bool operator<(const QTreeWidgetItem& other) const override {
    const int c = treeWidget() ? treeWidget()->sortColumn() : 0;
    const auto a = data(c, kSortRole), b = other.data(c, kSortRole);
    if (a.typeId() == QMetaType::Double && b.typeId() == QMetaType::Double) return a.toDouble() < b.toDouble();
    return text(c) < other.text(c);
  }
};

QIcon swatch(const QColor& colour) {
  QPixmap pixmap(14, 14);
  pixmap.fill(Qt::transparent);
  QPainter painter(&pixmap);
  painter.fillRect(QRect(1, 5, 12, 4), colour);
  return QIcon(pixmap);
}

}  // namespace

TrialList::TrialList(QWidget* parent) : QTreeWidget(parent) {
  setObjectName("plots:runs");
  setMouseTracking(true);
  setMinimumWidth(150);
  setRootIsDecorated(false);
  setUniformRowHeights(true);
  setSortingEnabled(true);
  sortByColumn(0, Qt::AscendingOrder);
  setHeaderLabels({"run"});
  header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  setContextMenuPolicy(Qt::CustomContextMenu);
  setToolTip("Check to show a run, double-click to show it alone (again: all), hover to pick it out");
  auto run_of = [](const QTreeWidgetItem* item) { return item->data(0, kRunRole).toLongLong(); };
  connect(this, &QTreeWidget::itemChanged, this, [this](QTreeWidgetItem* item) {
    const bool checked = item->checkState(0) == Qt::Checked;
    for (const auto id : runs_of(item)) Q_EMIT run_checked(id, checked);  // a group's: each of its runs
  });
  connect(this, &QTreeWidget::itemDoubleClicked, this,
          [this](QTreeWidgetItem* item) { Q_EMIT solo_requested(runs_of(item)); });
  connect(this, &QTreeWidget::itemEntered, this,
          [this, run_of](QTreeWidgetItem* item) { Q_EMIT hovered(run_of(item)); });
  connect(this, &QTreeWidget::viewportEntered, this, [this] { Q_EMIT hovered(-1); });
  connect(this, &QWidget::customContextMenuRequested, this, [this, run_of](const QPoint& at) {
    QMenu menu(this);
    if (auto* item = itemAt(at)) {
      const auto ids = runs_of(item);
      menu.addAction(ids.size() > 1 ? "Show only these runs" : "Show only this run", this,
                     [this, ids] { Q_EMIT solo_requested(ids); });
    }
    menu.addAction("Show all runs", this, [this] { Q_EMIT show_all_requested(); });
    menu.addAction("Hide all runs", this, [this] { Q_EMIT hide_all_requested(); });
    menu.exec(viewport()->mapToGlobal(at));
  });
}

void TrialList::add_run(std::int64_t run_id, const QString& label,
                        const std::vector<std::pair<QString, QString>>& values) {
  QSignalBlocker block(this);
  // "2 matrix_approximation_rank=1 lr=0.05": a column per parameter, the
  // rest as the trial's text; the values given, when there are (a renamed
  // run's label has none), instead of the label's.
  QStringList other;
  std::vector<std::pair<QString, QString>> columns = values;
  for (const auto& word : label.split(' ', Qt::SkipEmptyParts)) {
    const auto eq = word.indexOf('=');
    if (word == QString::number(run_id)) continue;
    if (eq <= 0)
      other << word;
    else if (values.empty())
      columns.emplace_back(word.left(eq), word.mid(eq + 1));
  }
  // The header first: a new column moves the other rows' text, not this one's.
  for (const auto& column : columns)
    if (!keys_.contains(column.first)) {
      keys_ << column.first;
      update_header();
    }
  auto* item = new TrialItem(this);
  items_[run_id] = item;
  item->setData(0, kRunRole, QVariant::fromValue<qlonglong>(run_id));
  item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable);
  item->setCheckState(0, Qt::Checked);
  item->setText(0, QString::number(run_id));
  item->setData(0, kSortRole, static_cast<double>(run_id));
  for (const auto& [key, value] : columns) {
    const int column = static_cast<int>(keys_.indexOf(key)) + 1;
    item->setText(column, value);
    item->setData(column, kSortRole, sort_key(value));
  }
  const QString other_text = other.join(' ');
  item->setData(0, kOtherTextRole, other_text);
  bool has_values = false;
  for (int c = 1; c <= static_cast<int>(keys_.size()); ++c) has_values = has_values || !item->text(c).isEmpty();
  if (has_values) {
    item->setText(static_cast<int>(keys_.size()) + 1, other_text);
  } else {  // the allreduce baseline: its label across the row
    item->setText(0, QString("%1 %2").arg(run_id).arg(other_text));
    item->setFirstColumnSpanned(true);
  }
  for (int c = 0; c < columnCount(); ++c) item->setToolTip(c, label);
}

void TrialList::set_checked(std::int64_t run_id, bool checked) {
  if (const auto it = items_.find(run_id); it != items_.end())
    it->second->setCheckState(0, checked ? Qt::Checked : Qt::Unchecked);
  if (auto* group = group_item_of(run_id)) sync_group_check(group);
}

void TrialList::set_colour(std::int64_t run_id, const QColor& colour) {
  if (const auto it = items_.find(run_id); it != items_.end()) it->second->setIcon(0, swatch(colour));
  if (auto* group = group_item_of(run_id); group && runs_of(group).front() == run_id) group->setIcon(0, swatch(colour));
}

QTreeWidgetItem* TrialList::group_item_of(std::int64_t run_id) const {
  for (auto* group : group_items_) {
    const auto ids = runs_of(group);
    if (std::find(ids.begin(), ids.end(), run_id) != ids.end()) return group;
  }
  return nullptr;
}

// A group's box is checked while any of its runs is; setting it here says nothing to its runs.
void TrialList::sync_group_check(QTreeWidgetItem* group) {
  bool any = false;
  for (const auto id : runs_of(group))
    if (const auto it = items_.find(id); it != items_.end()) any = any || it->second->checkState(0) == Qt::Checked;
  QSignalBlocker block(this);
  group->setCheckState(0, any ? Qt::Checked : Qt::Unchecked);
}

void TrialList::set_groups(const std::vector<SeedGroup>& groups) {
  {
    QSignalBlocker block(this);
    for (auto* item : group_items_) delete item;
    group_items_.clear();
    for (auto& [id, item] : items_) item->setHidden(false);
  }
  const auto labels = short_group_labels(groups);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    QVariantList ids;
    for (const auto id : group.runs) ids << QVariant::fromValue<qlonglong>(id);
    QTreeWidgetItem* item = nullptr;
    {
      QSignalBlocker block(this);
      item = new TrialItem(this);
      item->setData(0, kRunRole, ids.front());
      item->setData(0, kGroupRole, ids);
      item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable);
      item->setText(0, labels[g]);
      item->setData(0, kSortRole, static_cast<double>(group.runs.front()));
      item->setFirstColumnSpanned(true);
      QStringList members;
      for (const auto id : group.runs)
        if (const auto it = items_.find(id); it != items_.end()) {
          members << it->second->toolTip(0);
          if (id == group.runs.front()) item->setIcon(0, it->second->icon(0));
          it->second->setHidden(true);
        }
      for (int c = 0; c < columnCount(); ++c) item->setToolTip(c, members.join('\n'));
      group_items_.push_back(item);
    }
    sync_group_check(item);
  }
}

void TrialList::forget() {
  clear();
  items_.clear();
  group_items_.clear();
  keys_.clear();
  update_header();
}

void TrialList::leaveEvent(QEvent* event) {
  Q_EMIT hovered(-1);
  QTreeWidget::leaveEvent(event);
}

void TrialList::update_header() {
  QStringList headers{"run"};
  for (const auto& key : keys_) headers << short_param_name(key);
  headers << "trial";
  const int old_columns = columnCount();
  setColumnCount(static_cast<int>(headers.size()));
  setHeaderLabels(headers);
  for (int c = 1; c <= static_cast<int>(keys_.size()); ++c) headerItem()->setToolTip(c, keys_[c - 1]);
  // The free text moves right when a parameter column is added before it.
  if (old_columns != columnCount())
    for (int i = 0; i < topLevelItemCount(); ++i) {
      auto* item = topLevelItem(i);
      item->setText(old_columns - 1, {});
      item->setText(columnCount() - 1, item->data(0, kOtherTextRole).toString());
    }
}

}  // namespace commtune::ui
