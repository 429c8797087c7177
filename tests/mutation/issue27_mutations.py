"""Reintroduces each issue-27 bug in turn (a one-line mutation of its fix),
rebuilds the GUI tests (or the CLI, for a mutation with a ctest name) and
runs them: each mutation must make a test fail. Not part of the suite (a
rebuild per mutation); run it by hand after the build, from anywhere:

    /usr/bin/python3 tests/mutation/issue27_mutations.py [INDEX...]

Each file is restored after its mutation; rebuild once at the end."""
import subprocess, sys, os, time
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
M = [
 ("pareto labels overlap", "ui/pages/analysis_page.cpp", "tries < 20 &&", "tries < 0 &&"),
 ("heatmap default axes: first two axes (hook.name x byteps_compressor_type)", "ui/pages/analysis_page.cpp",
  "  std::pair<std::string, std::string> best;\n  std::tuple<int, int, int> best_score{-1, -1, -1};",
  "  std::pair<std::string, std::string> best;\n  if (data.axes.size() >= 2) return {data.axes[0], data.axes[1]};\n  std::tuple<int, int, int> best_score{-1, -1, -1};"),
 ("smoothing bends step functions", "ui/plot/run_plots.cpp", "const bool smoothed = m != kRatio && m != kWire;", "const bool smoothed = true;"),
 ("constant ratio gets a 1.999-2.0005 axis", "ui/plot/run_plots.cpp", "if (range.size() <= 1e-12 * std::abs(centre) || range.size() == 0) {", "if (false) {"),
 ("analysis forgets the chosen sweep", "ui/pages/analysis_page.cpp", "scope_->setCurrentIndex(index >= 0 ? index : 0);", "scope_->setCurrentIndex(0);"),
 ("free text matches parameter names", "core/tuner/store/run_query.cpp", "  for (const auto& [name, value] : row.params)\n    if (contains(value)) return true;", "  for (const auto& [name, value] : row.params)\n    if (contains(value) || contains(name)) return true;"),
 ("add axis always starts at optimizer.lr", "ui/forms/sweep_editor.cpp", "if (paths.contains(p) && !taken.contains(p)) return p;", "if (paths.contains(p)) return p;"),
 ("delete dialog does not say which runs", "ui/pages/runs_page.cpp", ".arg(lines.join(\"\\n\"), more),", ".arg(QString(), more),"),
 ("rename box starts empty", "ui/pages/runs_page.cpp", "QLineEdit::Normal, it == sweep_names_.end() ? QString() : it->second, &ok);", "QLineEdit::Normal, QString(), &ok);"),
 ("best lines dark purple on near-black in the dark theme", "ui/plot/parallel_coordinates.cpp", "current_theme().dark ? lo + hi - value : value", "value"),
 ("compare prints 0.10000000000000002", "app/cli/store_commands.cpp", ": v.is_number_float() ? format(\"%.6g\", v.get<double>())", ": v.is_number_float() ? json_text(v)", "axes_take_ranges"),
 ("a sweep's next trial, after another job started, wipes the dashboard", "ui/pages/dashboard_page.cpp", "const bool new_job = start.sweep_id == 0 || std::none_of(", "const bool new_job = start.sweep_id == 0 || start.sweep_id != sweep_id_ || std::none_of("),
 ("a CLI sweep does not appear on the Dashboard", "ui/pages/dashboard_page.cpp", "if (run.owner != me && db::owner_alive(run.owner)) out.push_back", "if (false) out.push_back"),
 ("a followed run's Stop is greyed", "ui/pages/dashboard_page.cpp", "    stop->setEnabled(true);\n    stop->setToolTip(\"Recorded by", "    stop->setEnabled(false);\n    stop->setToolTip(\"Recorded by"),
 ("starting a job replaces the followed run", "ui/pages/dashboard_page.cpp", "    if (!still_running) {", "    if (true) {"),
 ("a new job keeps the last job's curves and axes", "ui/pages/dashboard_page.cpp", "    if (!still_running) {", "    if (false) {"),
 ("no readout when hovering a curve or point", "ui/plot/plot_readout.cpp", "    QToolTip::hideText();\n  return hit;", "    QToolTip::hideText();\n  return std::nullopt;"),
 ("clicking a point opens nothing", "ui/plot/plot_readout.cpp", "Q_EMIT clicked(hit->runs);", "(void)hit;"),
 ("parallel coordinates label only min and max", "ui/plot/parallel_coordinates.cpp", "  if (values.size() > 8) {\n    values.clear();\n    for (int k = 0; k <= 4; ++k) {", "  if (true) {\n    values.clear();\n    for (int k = 0; k <= 4; k += 4) {"),
 ("parallel coordinates break a line at another hook's parameter", "ui/plot/parallel_coordinates.cpp", "      if (positions_[l][a])\n        points.append(QCPCurveData(static_cast<double>(points.size()), static_cast<double>(a), *positions_[l][a]));", "      points.append(QCPCurveData(static_cast<double>(points.size()), static_cast<double>(a), positions_[l][a] ? *positions_[l][a] : NAN));"),
 ("wall time absolute (the clock's epoch), not from the trial's start", "core/tuner/store/run_recorder.cpp", "started_(std::chrono::steady_clock::now()) {}", "started_(std::chrono::steady_clock::time_point{}) {}", "own_start"),
 ("relative time starts over in a resumed launch", "ui/plot/run_plots.cpp", "if (!r->raw.empty() && p.wall_s + r->wall_offset < last_wall)", "if (false)"),
 ("smoothing hides the raw curve", "ui/plot/run_plots.cpp", "r->raw_loss->setVisible(r->visible && !grouped && smoothing_ > 0);", "r->raw_loss->setVisible(false);"),
 ("log y on loss leaves empty space", "ui/plot/run_plots.cpp", "if (range.lower > 0 && range.upper / range.lower < 1.02) {  // flat: +-5% around it\n      const double centre = std::sqrt(range.lower * range.upper);\n      axis->setRange(centre / 1.05, centre * 1.05);", "if (range.lower > 0 && range.upper / range.lower < 10) {\n      const double centre = std::sqrt(range.lower * range.upper);\n      axis->setRange(centre / std::sqrt(10.0), centre * std::sqrt(10.0));"),
 ("changing the tolerance resets the heatmap's axes", "ui/pages/analysis_page.cpp", "const bool keep = kept_x != kept_y &&", "const bool keep = false &&"),
 ("a single heatmap column drawn half a cell off", "ui/pages/analysis_page.cpp", "n > 1 ? QCPRange(0, double(n) - 1) : QCPRange(-0.5, 0.5)", "QCPRange(0, double(n) - 1)"),
 ("tick labels like 0.04472135955", "ui/forms/param_field.cpp", "for (int digits = 3; digits <= 12; ++digits) {", "for (int digits = 12; digits <= 12; ++digits) {"),
 ("the what-if table shows 2 rows", "ui/pages/analysis_page.cpp", "what_if_->setMinimumHeight(height);", "(void)height;"),
 ("two name headers (hook.name's short name taken)", "ui/pages/runs_page.cpp", "const bool taken = headers.contains(short_name) ||", "const bool taken = false &&"),
 ("swept-parameter headers cut", "ui/pages/runs_page.cpp", "table_->horizontalHeader()->setSectionResizeMode(c, QHeaderView::ResizeToContents);", "table_->setColumnWidth(c, 40);"),
 ("trial names cut in the runs table", "ui/pages/runs_page.cpp", "table_->setColumnWidth(kName, std::min(480, widest + 24));", "table_->setColumnWidth(kName, 100);"),
 ("an unknown parameter in a condition gives an empty table", "core/tuner/store/run_query.cpp", "               !is_parameter_name(c.name)) {\n      throw", "               !is_parameter_name(c.name)) {\n      if (false) throw"),
 ("the legend drops a renamed run's columns", "ui/pages/runs_page.cpp", "plots_->add_run(run.id, run.label, run.swept);", "plots_->add_run(run.id, run.label);"),
 ("compare of allreduce vs PowerSGD shows only hook.name", "ui/pages/runs_page.cpp", "values.insert(it == r.params.end() ? QString(\"–\") : it->second);", "if (it != r.params.end()) values.insert(it->second);"),
 ("no sweep name field", "ui/forms/sweep_editor.cpp", "for (auto& s : SweepOptions::schema().specs()) out.emplace_back(s.name, s);", "for (auto& s : SweepOptions::schema().specs()) if (s.name != \"name\") out.emplace_back(s.name, s);"),
 ("the parameter list's font is tiny", "ui/forms/sweep_editor.cpp", "name->view()->setFont(font());", "name->view()->setFont(QFont(font().family(), 6));"),
 ("the parameter list cuts names", "ui/forms/sweep_editor.cpp", "name->view()->setMinimumWidth(name->view()->sizeHintForColumn(0) + 2 * name->view()->frameWidth() + 24);", "(void)0;"),
 ("list --search is free text only", "app/cli/store_commands.cpp", "                                return !query.matches(", "                                return query.conditions().empty() && !query.matches(", "list_search"),
 ("--axis refuses ranges", "app/cli/sweep_command.cpp", "values.find(\"..\") != std::string::npos ? axis_range(param, values) : axis_values(values)", "axis_values(values)", "axes_take_ranges"),
]
only = set(map(int, sys.argv[1:]))
env = dict(os.environ, QT_QPA_PLATFORM="offscreen", COMMTUNE_WORKER=f"{REPO}/build/app/commtune-worker")
for i, (what, path, old, new, *ctest) in enumerate(M):
    if only and i not in only: continue
    full = os.path.join(REPO, path)
    text = open(full).read()
    assert text.count(old) == 1, (what, text.count(old))
    open(full, "w").write(text.replace(old, new))
    try:
        b = subprocess.run(["cmake", "--build", "build", "--target", "commtune-cli" if ctest else "commtune_gui_tests"], cwd=REPO, capture_output=True, text=True)
        if b.returncode: print(f"[{i}] {what}: BUILD FAILED\n{b.stdout[-2000:]}", flush=True); continue
        t0 = time.time()
        if ctest:
            r = subprocess.run(["ctest", "--test-dir", "build", "-R", ctest[0], "--output-on-failure"], cwd=REPO, capture_output=True, text=True, timeout=900)
            fails = [l for l in r.stdout.splitlines() if l.startswith("FAIL:") or "AssertionError" in l]
        else:
            r = subprocess.run([f"{REPO}/build/tests/commtune_gui_tests"], cwd=REPO, capture_output=True, text=True, env=env, timeout=900)
            fails = [l for l in r.stdout.splitlines() if l.startswith("FAIL!")]
        print(f"[{i}] {what}: exit {r.returncode}, {len(fails)} failing ({time.time()-t0:.0f} s)", flush=True)
        for l in fails: print("     ", l[:300], flush=True)
    finally:
        open(full, "w").write(text)
