#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (in the main build's
# fuzz/ folder, as the main build does; the configuration target links its
# engine library) and runs each
# for SECONDS (default 60) from its corpus in tests/fuzz/corpus/<target>.
# New inputs go to a scratch folder (kept with -k); a crash stops the script,
# its input saved as build/fuzz/<target>-crash-*.
#   ./scripts/fuzz.sh [SECONDS] [-k]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
keep=${2:-}
main_build=${COMMTUNE_BUILD_DIR:-$root/build}
fuzz_build=${COMMTUNE_FUZZ_BUILD_DIR:-$main_build/fuzz}
[[ -f "$main_build/core/engine/libcommtune_engine.so" ]] || "$root/scripts/build.sh"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$fuzz_build/CMakeCache.txt" ]]; then
  cmake -S "$root/tests/fuzz" -B "$fuzz_build" "${generator[@]}" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCOMMTUNE_MAIN_BUILD="$main_build" >/dev/null
fi
cmake --build "$fuzz_build" --parallel "${COMMTUNE_JOBS:-$(nproc)}" >&2
# libtorch keeps objects alive until exit: leaks are not findings here.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
for target in fuzz_event_stream fuzz_event_files fuzz_data_headers fuzz_config fuzz_run_samples fuzz_json_text; do
  scratch=$(mktemp -d)
  echo "== $target: ${seconds}s from tests/fuzz/corpus/$target" >&2
  status=0
  corpora=("$root/tests/fuzz/corpus/$target")
  # An event file is an event stream: the stream target's corpus seeds the file target.
  [[ $target == fuzz_event_files ]] && corpora+=("$root/tests/fuzz/corpus/fuzz_event_stream")
  # Inputs up to 256 KiB reach the readers' size limits; an allocation over
  # 512 MiB, or 2 GiB in all, is a finding (a small file must not cost that).
  options=(-max_len=262144 -malloc_limit_mb=512 -rss_limit_mb=2048)
  [[ $target == fuzz_event_* ]] && options+=(-dict="$root/tests/fuzz/events.dict")
  "$fuzz_build/$target" -max_total_time="$seconds" -timeout=10 "${options[@]}" -print_final_stats=1 \
    -artifact_prefix="$fuzz_build/$target-" "$scratch" "${corpora[@]}" >"$fuzz_build/$target.log" 2>&1 ||
    status=$?
  grep -E '(DONE|ERROR|SUMMARY|stat::number_of_executed_units|stat::new_units_added)' "$fuzz_build/$target.log" >&2 || true
  if [[ -n "$keep" ]]; then echo "   new inputs kept in $scratch" >&2; else rm -rf "$scratch"; fi
  [[ $status -eq 0 ]] || { tail -40 "$fuzz_build/$target.log" >&2; echo "$target found a crash: $fuzz_build/$target-crash-*" >&2; exit 1; }
done
echo "fuzz: every target ran ${seconds}s without a finding" >&2
