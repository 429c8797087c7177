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
 ("free text matches parameter names", "core/store/run_query.cpp", "  for (const auto& [name, value] : row.params)\n    if (contains(value)) return true;", "  for (const auto& [name, value] : row.params)\n    if (contains(value) || contains(name)) return true;"),
 ("add axis always starts at optimizer.lr", "ui/forms/sweep_editor.cpp", "if (paths.contains(p) && !taken.contains(p)) return p;", "if (paths.contains(p)) return p;"),
 ("delete dialog does not say which runs", "ui/pages/runs_page.cpp", ".arg(lines.join(\"\\n\"), more),", ".arg(QString(), more),"),
 ("rename box starts empty", "ui/pages/runs_page.cpp", "QLineEdit::Normal, it == sweep_names_.end() ? QString() : it->second, &ok);", "QLineEdit::Normal, QString(), &ok);"),
 ("best lines dark purple on near-black in the dark theme", "ui/plot/parallel_coordinates.cpp", "current_theme().dark ? lo + hi - value : value", "value"),
 ("compare prints 0.10000000000000002", "app/cli/store_commands.cpp", ": v.is_number_float() ? format(\"%.6g\", v.get<double>())", ": v.is_number_float() ? json_text(v)", "axes_take_ranges"),
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
