#include "ui/theme.h"

#include <QApplication>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace commtune::ui {

namespace {

QPalette dark_palette() {
  QPalette p;
  const QColor window(0x2b, 0x2d, 0x31), base(0x1f, 0x21, 0x24), text(0xe6, 0xe6, 0xe6);
  const QColor highlight(0x3d, 0x8e, 0xd8), disabled(0x80, 0x80, 0x80);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, window);
  p.setColor(QPalette::ToolTipBase, base);
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, disabled);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, window);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, Qt::red);
  p.setColor(QPalette::Link, highlight.lighter(130));
  p.setColor(QPalette::Highlight, highlight);
  p.setColor(QPalette::HighlightedText, Qt::white);
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, disabled);
  return p;
}

// The palette the platform gave the application before we touched it.
QPalette& system_palette() {
  static QPalette palette = QApplication::palette();
  return palette;
}

}  // namespace

Theme current_theme() {
  const QPalette p = QApplication::palette();
  Theme t;
  t.background = p.color(QPalette::Base);
  t.foreground = p.color(QPalette::Text);
  t.dark = t.background.lightnessF() < 0.5;
  t.grid = t.dark ? QColor(0x44, 0x47, 0x4d) : QColor(0xdd, 0xdd, 0xdd);
  t.muted = t.dark ? QColor(0x9a, 0x9a, 0x9a) : QColor(0x70, 0x70, 0x70);
  // Okabe-Ito: distinguishable with the common colour-vision deficiencies.
  if (t.dark)
    t.series = {QColor(0x56, 0xb4, 0xe9), QColor(0xe6, 0x9f, 0x00), QColor(0x00, 0xc0, 0x8a), QColor(0xf0, 0xe4, 0x42),
                QColor(0xff, 0x7a, 0x45), QColor(0xcc, 0x99, 0xcc), QColor(0x8a, 0xc9, 0xff), QColor(0xc8, 0xc8, 0xc8)};
  else
    t.series = {QColor(0x00, 0x72, 0xb2), QColor(0xe6, 0x9f, 0x00), QColor(0x00, 0x9e, 0x73), QColor(0xd5, 0x5e, 0x00),
                QColor(0xcc, 0x79, 0xa7), QColor(0x56, 0xb4, 0xe9), QColor(0x33, 0x33, 0x33), QColor(0xb8, 0xa0, 0x00)};
  return t;
}

Theme apply_theme(QApplication& app, ThemeChoice choice) {
  system_palette();  // remember it before the first change
  if (choice == ThemeChoice::System) {
    app.setPalette(system_palette());
  } else {
    if (auto* fusion = QStyleFactory::create("Fusion")) app.setStyle(fusion);
    app.setPalette(choice == ThemeChoice::Dark ? dark_palette() : app.style()->standardPalette());
  }
  return current_theme();
}

QString to_string(ThemeChoice choice) {
  switch (choice) {
    case ThemeChoice::Light:
      return "light";
    case ThemeChoice::Dark:
      return "dark";
    case ThemeChoice::System:
      break;
  }
  return "system";
}

ThemeChoice theme_from_string(const QString& text) {
  if (text == "light") return ThemeChoice::Light;
  if (text == "dark") return ThemeChoice::Dark;
  return ThemeChoice::System;
}

}  // namespace commtune::ui
