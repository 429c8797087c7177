// Work off the UI thread: `work` runs on Qt's thread pool (store reads,
// predictions), `done` gets its result, or the error's text, back on the
// thread of `owner` — not at all when `owner` is gone by then.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>
#include <exception>
#include <optional>
#include <utility>

namespace commtune::ui {

template <class T>
struct Outcome {
  std::optional<T> value;
  QString error;
};

template <class Work, class Done>
void run_async(QObject* owner, Work work, Done done) {
  using T = std::invoke_result_t<Work>;
  auto* watcher = new QFutureWatcher<Outcome<T>>(owner);
  QObject::connect(watcher, &QFutureWatcher<Outcome<T>>::finished, owner, [watcher, done = std::move(done)] {
    done(watcher->result());
    watcher->deleteLater();
  });
  watcher->setFuture(QtConcurrent::run([work = std::move(work)]() -> Outcome<T> {
    try {
      return {work(), {}};
    } catch (const std::exception& e) {
      return {std::nullopt, QString::fromUtf8(e.what())};
    }
  }));
}

}  // namespace commtune::ui
