#include "ui/pages/runs/run_dialogs.h"

#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QInputDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QStringList>

namespace commtune::ui {

std::optional<Annotation> ask_annotation(QWidget* parent, std::int64_t run_id, const Annotation& now) {
  QDialog dialog(parent);
  dialog.setWindowTitle(QString("Run %1").arg(run_id));
  auto* name_edit = new QLineEdit(now.name, &dialog);
  auto* tags_edit = new QLineEdit(now.tags, &dialog);
  tags_edit->setPlaceholderText("comma-separated: baseline, best, to-rerun");
  auto* notes_edit = new QPlainTextEdit(now.notes, &dialog);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, &dialog);
  QObject::connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  QObject::connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  auto* form = new QFormLayout(&dialog);
  form->addRow("Name", name_edit);
  form->addRow("Tags", tags_edit);
  form->addRow("Notes", notes_edit);
  form->addRow(buttons);
  if (dialog.exec() != QDialog::Accepted) return std::nullopt;
  return Annotation{name_edit->text(), tags_edit->text(), notes_edit->toPlainText()};
}

bool confirm_delete_runs(QWidget* parent, std::size_t count, const std::vector<RunSummary>& listed) {
  // Which runs, by id, name and hook, so that a selection gone wrong shows before it is too late.
  QStringList lines;
  for (const auto& run : listed)
    lines << QString("run %1%2 (%3, %4)")
                 .arg(run.id)
                 .arg(run.name.isEmpty() ? QString() : " '" + run.name + "'")
                 .arg(run.hook, run.status);
  constexpr int kListed = 12;
  const auto more = lines.size() > kListed ? QString("\n… and %1 more").arg(lines.size() - kListed) : QString();
  if (lines.size() > kListed) lines = lines.mid(0, kListed);
  QMessageBox question(QMessageBox::Question, "Delete runs",
                       QString("Delete %1 run(s) with all their metrics, statistics and events? This cannot be "
                               "undone.\n\n%2%3")
                           .arg(count)
                           .arg(lines.join("\n"), more),
                       QMessageBox::Yes | QMessageBox::No, parent);
  question.setTextFormat(Qt::PlainText);  // run names are the user's: never read as HTML
  return question.exec() == QMessageBox::Yes;
}

bool confirm_delete_sweep(QWidget* parent, std::int64_t sweep_id) {
  return QMessageBox::question(
             parent, "Delete sweep",
             QString("Delete sweep %1 with every trial and their metrics? This cannot be undone.").arg(sweep_id)) ==
         QMessageBox::Yes;
}

std::optional<QString> ask_sweep_name(QWidget* parent, std::int64_t sweep_id, const QString& name) {
  bool ok = false;
  const auto answer = QInputDialog::getText(parent, "Rename sweep", QString("Name of sweep %1").arg(sweep_id),
                                            QLineEdit::Normal, name, &ok);
  if (!ok) return std::nullopt;
  return answer;
}

}  // namespace commtune::ui
