// Scrolling a form must scroll it: a wheel turned over a choice list, spin
// box or slider (not a scroll bar) that the user has not clicked into (given focus) goes to the
// scroll area around it instead of changing its value, and such fields no
// longer take focus from the wheel. Installed once on the application, it
// covers every field of every page, including those built later.
#pragma once

#include <QObject>

namespace commtune::ui {

class WheelGuard final : public QObject {
 public:
  using QObject::QObject;
  bool eventFilter(QObject* watched, QEvent* event) override;
};

}  // namespace commtune::ui
