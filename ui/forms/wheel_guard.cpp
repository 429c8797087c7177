#include "ui/forms/wheel_guard.h"

#include <QSlider>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QEvent>

namespace commtune::ui {

namespace {

// The field a widget belongs to (a spin box's line edit belongs to the spin box).
QWidget* value_field(QObject* object) {
  auto* widget = qobject_cast<QWidget*>(object);
  for (int depth = 0; widget && depth < 2; ++depth, widget = widget->parentWidget())
    if (qobject_cast<QComboBox*>(widget) || qobject_cast<QAbstractSpinBox*>(widget) ||
        qobject_cast<QSlider*>(widget))
      return widget;
  return nullptr;
}

}  // namespace

bool WheelGuard::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::Polish) {
    if (auto* field = value_field(watched); field == watched && (field->focusPolicy() & Qt::WheelFocus) == Qt::WheelFocus)
      field->setFocusPolicy(Qt::StrongFocus);
  } else if (event->type() == QEvent::Wheel) {
    if (auto* field = value_field(watched); field && !field->hasFocus()) {
      event->ignore();  // unaccepted, the wheel event goes on to the parents: the scroll area
      return true;
    }
  }
  return QObject::eventFilter(watched, event);
}

}  // namespace commtune::ui
