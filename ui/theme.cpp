#include "ui/theme.h"

#include <QApplication>
#include <QPainter>
#include <QPalette>
#include <QProxyStyle>
#include <QStyle>
#include <QStyleFactory>
#include <QStyleOption>

namespace commtune::ui {

namespace {

// Fusion outlines a check box in the window's colour darkened, which on the
// dark palette's base reads as nothing: an unchecked box (the plots' "log y",
// the trial list's) was invisible. On a dark palette, a frame in the muted
// colour around Fusion's own indicator.
class FramedIndicators final : public QProxyStyle {
 public:
  using QProxyStyle::QProxyStyle;
  void drawPrimitive(PrimitiveElement element, const QStyleOption* option, QPainter* painter,
                     const QWidget* widget) const override {
    QProxyStyle::drawPrimitive(element, option, painter, widget);
    const bool box = element == PE_IndicatorCheckBox || element == PE_IndicatorItemViewItemCheck;
    if (!box || option->palette.color(QPalette::Window).lightnessF() >= 0.5) return;
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing, false);
    painter->setPen(QPen(QColor(0x9a, 0x9a, 0x9a), 1));
    painter->setBrush(Qt::NoBrush);
    painter->drawRect(option->rect.adjusted(0, 0, -1, -1));
    painter->restore();
  }
};

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
  // 24 colours per theme: Okabe-Ito's first five (safe with the common
  // colour-vision deficiencies), then each next colour the one farthest (CIELAB)
  // from those before it, within a lightness band readable on the background.
  // Every pair differs by at least 31 ΔE76 (tests/ui check it); a sweep of
  // 24 trials repeats no colour.
  static const std::vector<QRgb> light{
      0x0072b2, 0xe69f00, 0x009e73, 0xd55e00, 0xcc79a7, 0x0000ff,
      0xff00e1, 0x4b3c0f, 0x4b1e96, 0x00b400, 0xff005a, 0x87962d,
      0x780f1e, 0xd28769, 0xd20087, 0x0078ff, 0xd278f0, 0x5a2d5a,
      0xff0000, 0x004b00, 0x4ba5b4, 0x964bff, 0x004b3c, 0x96690f,
  };
  static const std::vector<QRgb> dark{
      0x56b4e9, 0xe69f00, 0x00c08a, 0xf0e442, 0xff7a45, 0xff00ff,
      0x00ff00, 0xd269a5, 0x6978ff, 0x96875a, 0x4ba500, 0xff1e69,
      0x00ff87, 0xffd2ff, 0xff1eb4, 0xc3f096, 0xa5f0e1, 0xffb4a5,
      0x009696, 0xa5f000, 0xe178ff, 0x9687d2, 0x96961e, 0xff2d00,
  };
  for (const auto rgb : t.dark ? dark : light) t.series.emplace_back(rgb);
  return t;
}

Theme apply_theme(QApplication& app, ThemeChoice choice) {
  system_palette();  // remember it before the first change
  if (choice == ThemeChoice::System) {
    app.setPalette(system_palette());
  } else {
    if (auto* fusion = QStyleFactory::create("Fusion")) app.setStyle(new FramedIndicators(fusion));
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
