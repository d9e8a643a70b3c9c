# sanitizer_env.sh - the run-time options of the sanitized test runs (sourced
# by scripts/test.sh and scripts/tsan.sh; ctest passes them on to every test).
# Every finding fails the test: ASan and LSan exit non-zero, UBSan is built
# not to recover (-fno-sanitize-recover=undefined), TSan halts on the first.
# protect_shadow_gap=0: the CUDA runtime maps memory where ASan would
# otherwise protect (a GPU host's CUDA initialisation fails without it).
_san_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0:detect_stack_use_after_return=1:strict_string_checks=1
export LSAN_OPTIONS=suppressions=$_san_dir/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$_san_dir/tsan.supp
unset _san_dir
