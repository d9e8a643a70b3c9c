# evp/ - gpuaes through EVP (and libssl, the openssl CLI), against OpenSSL's
# default provider in the same library context: known answers, the
# differential tests, parameters, misuse and errors, re-initialisation, TLS,
# fork and exit, the dispatcher's choices, keystream ahead, start-up and
# unload.  Included from test/CMakeLists.txt (its functions, the shared
# support libraries and variables).  Tests labelled "gpu" exit 77 (skipped) on
# a host without a usable GPU.

# Known-answer tests (test_kat: test/vectors, see its README.md) and the
# differential test against OpenSSL's default provider (test_diff).
gpuaes_test_program(test_kat evp/test_kat.c support/kat_vectors.c support/kat_diff_op.c)
gpuaes_test_program(test_diff evp/test_diff.c evp/test_diff_stream.c evp/test_diff_wrap.c evp/test_diff_big.c
  evp/test_diff_migrate.c support/kat_diff_op.c)

# CPU path with default settings; run everywhere.
gpuaes_test(NAME kat COMMAND test_kat)
gpuaes_test(NAME diff COMMAND test_diff)
# The threshold makes updates alternate between CPU and GPU on a GPU host.
gpuaes_test(NAME diff_switch COMMAND test_diff ENV GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_threads COMMAND test_diff --threads 8)

# GPU path: skipped (77) without a GPU; --gpu asserts that gpu-bytes grew.
gpuaes_test(NAME kat_gpu COMMAND test_kat --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_gpu COMMAND test_diff --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_gpu_switch COMMAND test_diff --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_gpu_threads COMMAND test_diff --gpu --threads 16
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
# The same, small enough for ThreadSanitizer in CI time (scripts/tsan.sh).
gpuaes_test(NAME diff_gpu_threads_small_emu COMMAND test_diff --gpu --threads 8 --iterations 8 --max-bytes 1M
  LABELS emu MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
# GCM messages that begin on the CPU (first update 64 KiB .. 256 KiB - 1) and
# move to the GPU at the first block-aligned update of 256 KiB or more.
gpuaes_test(NAME diff_gpu_migrate COMMAND test_diff --gpu --migrate --iterations 8
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=262144 GPUAES_DISPATCH=force)
# GCM messages on gpuaes's engine whose CPU blocks take the stitched pass
# (gcm_fused.c): updates of 4 KiB and more to the GPU, the rest, from 16 bytes
# (GPUAES_TEST_FUSED_MIN: the emulated module only), through the default
# provider's AES-GCM at a counter of the engine's choosing; the callers' shares
# of GPU jobs too.
gpuaes_test(NAME diff_gpu_fused_emu COMMAND test_diff --gpu --fused --iterations 60 --max-bytes 1M
  LABELS emu MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force GPUAES_TEST_FUSED_MIN=16)
gpuaes_test(NAME diff_gpu_fused_share_emu COMMAND test_diff --gpu --fused --iterations 30 --max-bytes 2M
  LABELS emu MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_GPU_CPU_SHARE=all
  GPUAES_TEST_FUSED_MIN=16)
gpuaes_test(NAME diff_gpu_big COMMAND test_diff --gpu --big
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force TIMEOUT 900)

# Lengths around the staging-chunk boundaries (+-1 byte, +-1 block), every GPU
# operation, in place and not (the _emu twin covers the emulator's 1 MiB chunks).
# 1 MiB buffers and 3 lanes: a job's chunks ramp from 128 KiB to 1 MiB and
# down, and lanes wrap at an odd count.
gpuaes_test_program(test_chunk_edges evp/test_chunk_edges.c support/kat_diff_op.c)
gpuaes_test(NAME chunk_edges_gpu COMMAND test_chunk_edges --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_STAGING_CHUNK=1048576 GPUAES_STAGING_LANES=3 TIMEOUT 600)

# API-level tests (params, bad input, fork, TLS, CLI).
gpuaes_test_program(test_params evp/test_params.c evp/test_params_pv.c evp/test_params_ctx.c evp/test_params_gcm.c
  evp/test_params_fuzz.c evp/test_params_num.c)
target_link_libraries(test_params PRIVATE api_util)
gpuaes_test(NAME params COMMAND test_params TIMEOUT 120)
gpuaes_test(NAME params_nogpu COMMAND test_params TIMEOUT 120
  ENV "GPUAES_DISABLE_GPU=1;GPUAES_OFFLOAD_MIN_BYTES=12345")
# every update of two blocks or more on the GPU path: its parameter tracking
gpuaes_test(NAME params_gpu COMMAND test_params --gpu LABELS gpu TIMEOUT 120
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")

gpuaes_test_program(test_bad_input evp/test_bad_input.c)
target_link_libraries(test_bad_input PRIVATE api_util)
gpuaes_test(NAME bad_input COMMAND test_bad_input TIMEOUT 300)
gpuaes_test(NAME bad_input_gpu COMMAND test_bad_input --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")

# Errors of gpuaes and of its fallback reach the application's queue once, as
# the default provider's do (provider/prov_err.h); the program is also a core
# of its own, as another libcrypto would be (the error upcalls).
gpuaes_test_program(test_errors evp/test_errors.c)
target_link_libraries(test_errors PRIVATE api_util ${CMAKE_DL_LIBS})
gpuaes_test(NAME errors COMMAND test_errors TIMEOUT 120)
gpuaes_test(NAME errors_emu COMMAND test_errors LABELS emu TIMEOUT 120
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu)

# No key left in memory gpuaes frees (OpenSSL's allocator hooked).
gpuaes_test_program(test_wipe evp/test_wipe.c)
target_link_libraries(test_wipe PRIVATE api_util)
gpuaes_test(NAME wipe COMMAND test_wipe)

gpuaes_test_program(test_fork evp/test_fork.c)
target_link_libraries(test_fork PRIVATE api_util)
gpuaes_test(NAME fork COMMAND test_fork TIMEOUT 300)
gpuaes_test(NAME fork_gpu COMMAND test_fork --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")
# Forks while another thread loads the provider (emulated module: its test
# hook holds the fallback table lock 20 ms per load).
gpuaes_test(NAME fork_locks_emu COMMAND test_fork --locks LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_TEST_TABLE_LOCK_MS=20")

gpuaes_test_program(test_tls evp/test_tls.c)
target_link_libraries(test_tls PRIVATE api_util)
gpuaes_test(NAME tls COMMAND test_tls TIMEOUT 300)
gpuaes_test(NAME tls_gpu COMMAND test_tls --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")

# The CLI test: the openssl on PATH, this build's module (gpu_probe: gpu/;
# _cli_env, the ASan runtime preloaded into openssl: test/CMakeLists.txt).
gpuaes_test(NAME cli TIMEOUT 300 ENV "${_cli_env}"
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/evp/test_cli.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:gpu_probe>)
gpuaes_test(NAME cli_gpu LABELS gpu TIMEOUT 300 ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;${_cli_env}"
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/evp/test_cli.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:gpu_probe> --gpu)

# The GPU's start-up runs in the background, never on a caller's path; the
# _emu twin makes it take 1.5 s (GPUAES_EMU_INIT_MS) so the calls meanwhile
# are seen on the CPU.
gpuaes_test_program(test_startup evp/test_startup.c)
target_link_libraries(test_startup PRIVATE api_util)
gpuaes_test(NAME startup COMMAND test_startup LABELS gpu TIMEOUT 120
  ENV "GPUAES_OFFLOAD_MIN_BYTES=65536;GPUAES_DISPATCH=force;GPUAES_EMU_INIT_MS=1500")

# exit() while other threads' updates start the GPU and run on it: every
# child exits with status 0, none hangs (20 runs of each program here; the
# soak of 1000 each: bench/probe/exit_soak.sh).
gpuaes_test_program(test_exit_race evp/test_exit_race.c)
gpuaes_test(NAME exit_race COMMAND test_exit_race 20 2 LABELS gpu TIMEOUT 300)

# Unload gives back what the provider took: 200 load/use/unload cycles, no
# growth of threads, open files, RSS or (NVML) device memory.
gpuaes_test_program(test_unload evp/test_unload.c)
target_link_libraries(test_unload PRIVATE api_util ${CMAKE_DL_LIBS})
gpuaes_test(NAME unload COMMAND test_unload --gpu LABELS gpu TIMEOUT 600
  ENV "GPUAES_OFFLOAD_MIN_BYTES=65536;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM_RAMP_BYTES=64K")
# NVML's figure is the whole device's: other tests' contexts would move it.
set_tests_properties(unload PROPERTIES RUN_SERIAL ON)

# The dispatcher decides at the default thresholds: a slow GPU gets little
# work, a failing one is backed off from; outputs identical (emulator only:
# the delay and the fault are the emulator's).
gpuaes_test_program(test_dispatch evp/test_dispatch.c)
target_link_libraries(test_dispatch PRIVATE api_util)
gpuaes_test(NAME dispatch_slow_emu COMMAND test_dispatch --slow LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_EMU_JOB_DELAY_MS=20;GPUAES_KEYSTREAM=0")
# A threshold alone (offload_min_bytes, below the calls' 2 MiB) does not
# force the GPU: the dispatcher still keeps the slow GPU's share small.
gpuaes_test(NAME dispatch_slow_threshold_emu COMMAND test_dispatch --slow LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_EMU_JOB_DELAY_MS=20;GPUAES_KEYSTREAM=0;GPUAES_OFFLOAD_MIN_BYTES=1M")
gpuaes_test(NAME dispatch_fail_emu COMMAND test_dispatch --fail LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_FAULT=alloc;GPUAES_KEYSTREAM=0")
# A fresh process's first large call of each offloaded kind goes to the GPU
# (the CPU's rate is measured aside): one process per kind.
foreach(f "AES-256-GCM enc" "AES-128-CTR enc" "AES-256-ECB enc" "AES-192-ECB dec" "AES-128-CBC dec"
    "AES-256-CFB dec")
  string(REPLACE " " ";" args "${f}")
  string(REGEX REPLACE "^AES-([0-9]+)-([A-Z]+) (enc|dec)$" "\\2_\\1_\\3" tag "${f}")
  string(TOLOWER "${tag}" tag)
  gpuaes_test(NAME dispatch_first_${tag}_emu COMMAND test_dispatch --first ${args} LABELS emu TIMEOUT 300
    MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_GPU_START_BYTES=0")
endforeach()
gpuaes_test(NAME dispatch_gcm_late_emu COMMAND test_dispatch --gcm-late LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_GPU_START_BYTES=16777216")
gpuaes_test(NAME dispatch_gcm_leave_emu COMMAND test_dispatch --gcm-leave LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_GPU_START_BYTES=0;GPUAES_EMU_JOB_DELAY_MS=40")

# Default policy: the GPU starts only after GPUAES_GPU_START_BYTES of work it could have taken.
gpuaes_test(NAME startup_after_work COMMAND test_startup --start-after-work LABELS gpu TIMEOUT 120
  ENV "GPUAES_GPU_START_BYTES=16M")

# Re-initialisation (key / IV / direction each NULL or not) and GCM init
# orders, against the default provider; --gpu: the GPU is used exactly where
# it may be.  Small updates stay on the CPU, large ones cross the threshold.
# GCM with 3 x 16 MiB updates: at GCM's default threshold set explicitly and
# forced (every such update on the GPU), and at the default settings, where
# the dispatcher decides (the GPU may take less, never more).
gpuaes_test_program(test_reinit evp/test_reinit.c support/kat_diff_op.c)
target_link_libraries(test_reinit PRIVATE api_util)
gpuaes_test(NAME reinit_gpu COMMAND test_reinit --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=4096;GPUAES_DISPATCH=force")
gpuaes_test(NAME reinit_gcm_8m_gpu COMMAND test_reinit --gpu --gcm-default LABELS gpu
  TIMEOUT 300 ENV "GPUAES_OFFLOAD_MIN_BYTES=8M;GPUAES_DISPATCH=force")
gpuaes_test(NAME reinit_gcm_default_gpu COMMAND test_reinit --gpu --gcm-default --dispatched
  LABELS gpu TIMEOUT 300)

# The knobs (provider/settings.c): every syntax, bad values from the
# environment and from openssl.cnf (refused with an error naming the knob,
# the default kept, the provider loaded).  The emulated module: its GPU layer
# shows that disable_gpu reaches it.
gpuaes_test_program(test_settings evp/test_settings.c)
gpuaes_test(NAME settings COMMAND test_settings TIMEOUT 120 MODULE_DIR ${CMAKE_BINARY_DIR}/emu)
# A setuid process takes no knob from its environment and spawns no gpuaesd
# (root only: a setuid-nobody copy of the test; 77 elsewhere).
gpuaes_test_program(test_secure_env evp/test_secure_env.c)
gpuaes_test(NAME secure_env COMMAND test_secure_env TIMEOUT 60 MODULE_DIR ${CMAKE_BINARY_DIR}/emu)

# What gpuaes assumes about the default provider, checked at load (emulated
# module; the checks themselves: unit/, test_assumptions): one made to fail
# turns the GPU path off.
gpuaes_test_program(test_assume_load evp/test_assume_load.c)
target_link_libraries(test_assume_load PRIVATE api_util)
gpuaes_test(NAME assume_load_emu COMMAND test_assume_load LABELS emu TIMEOUT 120
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0")
gpuaes_test(NAME assume_load_broken_emu COMMAND test_assume_load --broken LABELS emu TIMEOUT 120
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0;GPUAES_TEST_BREAK_ASSUMPTION=ASSUME_UPDATED_IV")

# 32 threads mixing every mode, key size and direction at the dispatcher's own
# policy (default thresholds, dispatch = auto), the GPU started at once: outputs identical,
# the GPU and the CPU both take large calls.
gpuaes_test_program(test_mix evp/test_mix.c)
target_link_libraries(test_mix PRIVATE api_util)
gpuaes_test(NAME mix_gpu COMMAND test_mix LABELS gpu TIMEOUT 600 ENV "GPUAES_GPU_START_BYTES=0")

# Partially overlapping input and output: the default provider's bytes, in
# place still on the GPU; whole jobs, and CTR streams in keystream mode.
gpuaes_test_program(test_overlap evp/test_overlap.c)
target_link_libraries(test_overlap PRIVATE api_util)
gpuaes_test(NAME overlap_gpu COMMAND test_overlap --gpu LABELS gpu TIMEOUT 600
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")
gpuaes_test(NAME overlap_keystream_gpu COMMAND test_overlap --gpu --keystream LABELS gpu TIMEOUT 600
  ENV "GPUAES_OFFLOAD_MIN_BYTES=1M;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=64K;GPUAES_KEYSTREAM_TOTAL_BYTES=1M;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")

# Keystream ahead (CTR): differential tests against the default provider with
# small knobs, so that windows turn over constantly (docs/DESIGN.md,
# "Keystream ahead").  Labelled gpu: the _emu twin runs them against the
# emulated GPU layer, whose windows become ready only on the second poll.
gpuaes_test_program(test_keystream evp/test_keystream.c)
# Up to 16 keystream contexts at once (keystream_max_contexts; the default is 2): concurrency is what these test.
set(_ks_env "GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=64K;GPUAES_KEYSTREAM_TOTAL_BYTES=1M;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")
gpuaes_test(NAME keystream COMMAND test_keystream --gpu --threads 8 LABELS gpu TIMEOUT 600
  ENV "${_ks_env}")
# Windows of one block and an odd size: every update crosses windows.
gpuaes_test(NAME keystream_tiny COMMAND test_keystream --gpu --threads 4 LABELS gpu TIMEOUT 600
  ENV "GPUAES_KEYSTREAM_RAMP_BYTES=0;GPUAES_KEYSTREAM_MAX_WINDOW=4112;GPUAES_KEYSTREAM_TOTAL_BYTES=64K;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")
# A GPU failure in the keystream path: output stays right (CPU), error counted.
gpuaes_test(NAME keystream_fault COMMAND test_keystream --threads 2 LABELS gpu TIMEOUT 600
  ENV "${_ks_env};GPUAES_FAULT=sync")
# Off, and no GPU: the same contexts on the CPU path.
gpuaes_test(NAME keystream_off COMMAND test_keystream --threads 2 TIMEOUT 600
  ENV "${_ks_env};GPUAES_KEYSTREAM=0")

# The lifecycle of keystream contexts and windows (test_ks_life.c): large
# updates after keystream mode, final, and the window pool's bound.
gpuaes_test_program(test_ks_life evp/test_ks_life.c)
set(_life_env "GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=64K;GPUAES_KEYSTREAM_TOTAL_BYTES=16M")
foreach(t jump mixed final)
  gpuaes_test(NAME ks_life_${t} COMMAND test_ks_life ${t} --gpu LABELS gpu TIMEOUT 300
    ENV "${_life_env};GPUAES_KEYSTREAM_MAX_CONTEXTS=1")
endforeach()
# 256 KiB windows: freeing a context's windows takes long enough for a race
# with another context's entry to show.
gpuaes_test(NAME ks_life_pool COMMAND test_ks_life pool --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=256K;GPUAES_KEYSTREAM_TOTAL_BYTES=64M;GPUAES_KEYSTREAM_MAX_CONTEXTS=2")

# exit() while threads XOR against keystream windows (test_ks_exit.c): the
# exit-time release must neither crash them nor let them emit plaintext.
gpuaes_test_program(test_ks_exit evp/test_ks_exit.c)
gpuaes_test(NAME ks_exit COMMAND test_ks_exit --gpu LABELS gpu TIMEOUT 600
  ENV "GPUAES_KEYSTREAM_RAMP_BYTES=16K;GPUAES_KEYSTREAM_MAX_WINDOW=256K;GPUAES_KEYSTREAM_TOTAL_BYTES=64M;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")
