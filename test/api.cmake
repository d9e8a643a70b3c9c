# API-level tests (params, bad input, fork, fault injection, TLS, CLI).
# Tests labelled "gpu" exit 77 (skipped) on a host without a usable GPU.
add_library(api_util STATIC api_util.c)
target_link_libraries(api_util PUBLIC testutil OpenSSL::Crypto)

gpuaes_test_program(test_params test_params.c test_params_pv.c test_params_ctx.c test_params_gcm.c
  test_params_fuzz.c test_params_num.c)
target_link_libraries(test_params PRIVATE api_util)
gpuaes_test(NAME params COMMAND test_params TIMEOUT 120)
gpuaes_test(NAME params_nogpu COMMAND test_params TIMEOUT 120
  ENV "GPUAES_DISABLE_GPU=1;GPUAES_OFFLOAD_MIN_BYTES=12345")
# every update of two blocks or more on the GPU path: its parameter tracking
gpuaes_test(NAME params_gpu COMMAND test_params --gpu LABELS gpu TIMEOUT 120
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")

gpuaes_test_program(test_bad_input test_bad_input.c)
target_link_libraries(test_bad_input PRIVATE api_util)
gpuaes_test(NAME bad_input COMMAND test_bad_input TIMEOUT 300)
gpuaes_test(NAME bad_input_gpu COMMAND test_bad_input --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")

# Errors of gpuaes and of its fallback reach the application's queue once, as
# the default provider's do (provider/prov_err.h); the program is also a core
# of its own, as another libcrypto would be (the error upcalls).
gpuaes_test_program(test_errors test_errors.c)
target_link_libraries(test_errors PRIVATE api_util ${CMAKE_DL_LIBS})
gpuaes_test(NAME errors COMMAND test_errors TIMEOUT 120)
gpuaes_test(NAME errors_emu COMMAND test_errors LABELS emu TIMEOUT 120
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu)
# gpuaes inside programs with their own libcrypto, the `cryptography` wheels'
# (static OpenSSL): a differential of every cipher through their API with
# every update on the emulated GPU, against the same wheel without gpuaes,
# and errors of gpuaes and its fallback on the wheel's stack.  wheel_emu: the
# cryptography python3 has (skipped where none); wheel_<OpenSSL>_emu: CI's
# OpenSSL matrix, one pinned wheel each (test/py/wheels.txt, installed by
# scripts/deps.sh; with CI set, a missing one fails).  Not in sanitized
# builds: an instrumented module cannot load into an uninstrumented python
# (test_errors covers the same code there, as a foreign core of its own).
find_program(GPUAES_PYTHON3 python3)
if(GPUAES_PYTHON3 AND NOT GPUAES_SANITIZE)
  set(_wheel ${GPUAES_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/py/test_wheel.py)
  gpuaes_test(NAME wheel_emu LABELS emu matrix TIMEOUT 300 MODULE_DIR ${CMAKE_BINARY_DIR}/emu
    COMMAND ${_wheel})
  file(READ ${CMAKE_CURRENT_SOURCE_DIR}/py/wheels.txt _pins)
  string(REGEX MATCHALL "# OpenSSL [0-9.]+\ncryptography==[0-9.]+" _pins "${_pins}")
  foreach(_pin IN LISTS _pins)
    string(REGEX MATCH "OpenSSL ([0-9.]+)\ncryptography==([0-9.]+)" _pin "${_pin}")
    gpuaes_test(NAME wheel_${CMAKE_MATCH_1}_emu LABELS emu matrix TIMEOUT 600
      MODULE_DIR ${CMAKE_BINARY_DIR}/emu COMMAND ${_wheel} --wheel ${CMAKE_MATCH_2})
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/py/wheels.txt)
endif()

gpuaes_test_program(test_fork test_fork.c)
target_link_libraries(test_fork PRIVATE api_util)
gpuaes_test(NAME fork COMMAND test_fork TIMEOUT 300)
gpuaes_test(NAME fork_gpu COMMAND test_fork --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")
# Forks while another thread loads the provider (emulated module: its test
# hook holds the fallback table lock 20 ms per load).
gpuaes_test(NAME fork_locks_emu COMMAND test_fork --locks LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_TEST_TABLE_LOCK_MS=20")

gpuaes_test_program(test_fault test_fault.c)
target_link_libraries(test_fault PRIVATE api_util)
foreach(stage alloc copyin launch copyout sync)
  gpuaes_test(NAME fault_${stage} COMMAND test_fault LABELS gpu TIMEOUT 300
    ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_FAULT=${stage}")
endforeach()

gpuaes_test_program(test_tls test_tls.c)
target_link_libraries(test_tls PRIVATE api_util)
gpuaes_test(NAME tls COMMAND test_tls TIMEOUT 300)
gpuaes_test(NAME tls_gpu COMMAND test_tls --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")

# The CLI test: the openssl on PATH, this build's module.  With AddressSanitizer
# the (uninstrumented) openssl gets the ASan runtime preloaded, so that the
# module's instrumented code runs and its leaks are checked there too.
gpuaes_test_program(gpu_probe gpu_probe.c)
set(_cli_env "")
if(GPUAES_SANITIZE MATCHES "address")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _libasan OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(_cli_env "GPUAES_TEST_PRELOAD=${_libasan}")
endif()
gpuaes_test(NAME cli TIMEOUT 300 ENV "${_cli_env}"
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:gpu_probe>)
gpuaes_test(NAME cli_gpu LABELS gpu TIMEOUT 300 ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;${_cli_env}"
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:gpu_probe> --gpu)

# GCM with GHASH split between GPU pieces and OpenSSL segments: small and large
# updates mixed (the threshold makes the small ones CPU pieces), and with GPU
# jobs that stop after a prefix.
gpuaes_test_program(test_gcm_ghash test_gcm_ghash.c)
target_link_libraries(test_gcm_ghash PRIVATE api_util)
gpuaes_test(NAME gcm_ghash COMMAND test_gcm_ghash TIMEOUT 300)
gpuaes_test(NAME gcm_ghash_gpu COMMAND test_gcm_ghash --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=4096;GPUAES_DISPATCH=force")
gpuaes_test(NAME gcm_ghash_fault_gpu COMMAND test_gcm_ghash LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=4096;GPUAES_DISPATCH=force;GPUAES_FAULT=copyout")
# A GPU that cannot run GCM (compute capability 7.5; emulated): GCM stays on the CPU.
gpuaes_test(NAME gcm_ghash_no_gcm_emu COMMAND test_gcm_ghash --no-gpu-gcm LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_OFFLOAD_MIN_BYTES=4096;GPUAES_DISPATCH=force;GPUAES_EMU_NO_GCM=1")

# The caller's share of GPU jobs (gpu_cpu_share): all, it must run for every
# group; ctr (default), for CTR only; off, for none; both give the default provider's output and tags.
gpuaes_test_program(test_cpu_share test_cpu_share.c)
target_link_libraries(test_cpu_share PRIVATE api_util)
gpuaes_test(NAME cpu_share_gpu COMMAND test_cpu_share --all LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_GPU_CPU_SHARE=all")
gpuaes_test(NAME cpu_share_ctr_gpu COMMAND test_cpu_share --ctr LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")
gpuaes_test(NAME cpu_share_off_gpu COMMAND test_cpu_share --off LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_GPU_CPU_SHARE=off")

# The GPU's start-up runs in the background, never on a caller's path; the
# _emu twin makes it take 1.5 s (GPUAES_EMU_INIT_MS) so the calls meanwhile
# are seen on the CPU.
gpuaes_test_program(test_startup test_startup.c)
target_link_libraries(test_startup PRIVATE api_util)
gpuaes_test(NAME startup COMMAND test_startup LABELS gpu TIMEOUT 120
  ENV "GPUAES_OFFLOAD_MIN_BYTES=65536;GPUAES_DISPATCH=force;GPUAES_EMU_INIT_MS=1500")

# exit() while other threads' updates start the GPU and run on it: every
# child exits with status 0, none hangs (20 runs of each program here; the
# soak of 1000 each: bench/probe/exit_soak.sh).
gpuaes_test_program(test_exit_race test_exit_race.c)
gpuaes_test(NAME exit_race COMMAND test_exit_race 20 2 LABELS gpu TIMEOUT 300)

# Unload gives back what the provider took: 200 load/use/unload cycles, no
# growth of threads, open files, RSS or (NVML) device memory.
gpuaes_test_program(test_unload test_unload.c)
target_link_libraries(test_unload PRIVATE api_util ${CMAKE_DL_LIBS})
gpuaes_test(NAME unload COMMAND test_unload --gpu LABELS gpu TIMEOUT 600
  ENV "GPUAES_OFFLOAD_MIN_BYTES=65536;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM_RAMP_BYTES=64K")
# NVML's figure is the whole device's: other tests' contexts would move it.
set_tests_properties(unload PROPERTIES RUN_SERIAL ON)

# The dispatcher decides at the default thresholds: a slow GPU gets little
# work, a failing one is backed off from; outputs identical (emulator only:
# the delay and the fault are the emulator's).
gpuaes_test_program(test_dispatch test_dispatch.c)
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
# The dispatcher itself (provider/gpu/dispatch.c compiled in) on a model clock:
# it looks again after contention, both ways, at a bounded cost, and keeps
# the load rules.  No GPU, no module.  Its usable cores: the affinity set.
add_executable(test_dispatch_model test_dispatch_model.c ${PROJECT_SOURCE_DIR}/provider/gpu/dispatch.c
  ${PROJECT_SOURCE_DIR}/provider/debug.c)
target_include_directories(test_dispatch_model PRIVATE ${PROJECT_SOURCE_DIR}/provider
  ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(test_dispatch_model PRIVATE GPUAES_TEST_HOOKS)
target_compile_options(test_dispatch_model PRIVATE -Wall -Wextra)
target_link_libraries(test_dispatch_model PRIVATE testsupport OpenSSL::Crypto Threads::Threads)
foreach(s after8 after16 opposite slowgpu fastgpu closegpu fresh load8 cores16 fastgcm burst16 others16 othersend procs16 procs4
    cores)
  gpuaes_test(NAME dispatch_model_${s} COMMAND test_dispatch_model ${s} TIMEOUT 120)
endforeach()
find_program(TASKSET taskset)
if(TASKSET)
  gpuaes_test(NAME dispatch_model_cores_taskset COMMAND ${TASKSET} -c 0 $<TARGET_FILE:test_dispatch_model>
    cores 1 TIMEOUT 60)
endif()
# Default policy: the GPU starts only after GPUAES_GPU_START_BYTES of work it could have taken.
gpuaes_test(NAME startup_after_work COMMAND test_startup --start-after-work LABELS gpu TIMEOUT 120
  ENV "GPUAES_GPU_START_BYTES=16M")

# Re-initialisation (key / IV / direction each NULL or not) and GCM init
# orders, against the default provider; --gpu: the GPU is used exactly where
# it may be.  Small updates stay on the CPU, large ones cross the threshold.
# GCM with 3 x 16 MiB updates: at GCM's default threshold set explicitly and
# forced (every such update on the GPU), and at the default settings, where
# the dispatcher decides (the GPU may take less, never more).
gpuaes_test_program(test_reinit test_reinit.c kat_diff_op.c)
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
gpuaes_test_program(test_settings test_settings.c)
gpuaes_test(NAME settings COMMAND test_settings TIMEOUT 120 MODULE_DIR ${CMAKE_BINARY_DIR}/emu)
# A setuid process takes no knob from its environment and spawns no gpuaesd
# (root only: a setuid-nobody copy of the test; 77 elsewhere).
gpuaes_test_program(test_secure_env test_secure_env.c)
gpuaes_test(NAME secure_env COMMAND test_secure_env TIMEOUT 60 MODULE_DIR ${CMAKE_BINARY_DIR}/emu)

# What gpuaes assumes about the default provider (provider/assume/fallback_assumptions.h):
# every check against this libcrypto, through gpuaes's own loader (fallback.c)
# and dispatch calls.  CPU only: no GPU, no module.
add_executable(test_assumptions test_assumptions.c ${PROJECT_SOURCE_DIR}/provider/assume/assumptions.c
  ${PROJECT_SOURCE_DIR}/provider/assume/assume_block.c ${PROJECT_SOURCE_DIR}/provider/assume/assume_gcm.c
  ${PROJECT_SOURCE_DIR}/provider/fallback.c ${PROJECT_SOURCE_DIR}/provider/debug.c
  ${PROJECT_SOURCE_DIR}/provider/gcm/gcm_math.c ${PROJECT_SOURCE_DIR}/provider/gcm/gcm_fused.c ${PROJECT_SOURCE_DIR}/provider/prov_err.c
  ${PROJECT_SOURCE_DIR}/provider/loaded_object.c)
target_include_directories(test_assumptions PRIVATE ${PROJECT_SOURCE_DIR}/provider ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_assumptions PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_link_libraries(test_assumptions PRIVATE OpenSSL::Crypto Threads::Threads ${CMAKE_DL_LIBS})
gpuaes_test(NAME assumptions COMMAND test_assumptions TIMEOUT 120)
# The same checks at load (emulated module): one made to fail turns the GPU path off.
gpuaes_test_program(test_assume_load test_assume_load.c)
target_link_libraries(test_assume_load PRIVATE api_util)
gpuaes_test(NAME assume_load_emu COMMAND test_assume_load LABELS emu TIMEOUT 120
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0")
gpuaes_test(NAME assume_load_broken_emu COMMAND test_assume_load --broken LABELS emu TIMEOUT 120
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0;GPUAES_TEST_BREAK_ASSUMPTION=ASSUME_UPDATED_IV")

# gpu_memory_max: slots the cap would not hold are not made; the work goes to
# the CPU, identical, counted in gpu-memory-refusals.  2 lanes of 1 MiB make a
# slot of ~8 MiB (README, "Device memory"): 12 MiB holds one.
gpuaes_test_program(test_memcap test_memcap.c)
target_link_libraries(test_memcap PRIVATE api_util)
gpuaes_test(NAME memcap_zero COMMAND test_memcap --zero LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=1M;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0;GPUAES_GPU_MEMORY_MAX=0")
gpuaes_test(NAME memcap_one COMMAND test_memcap --one LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=1M;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0;GPUAES_GPU_MEMORY_MAX=12582912;GPUAES_STAGING_LANES=2;GPUAES_STAGING_CHUNK=1M;GPUAES_EMU_JOB_DELAY_MS=30")

# 32 threads mixing every mode, key size and direction at the dispatcher's own
# policy (default thresholds, dispatch = auto), the GPU started at once: outputs identical,
# the GPU and the CPU both take large calls.
gpuaes_test_program(test_mix test_mix.c)
target_link_libraries(test_mix PRIVATE api_util)
gpuaes_test(NAME mix_gpu COMMAND test_mix LABELS gpu TIMEOUT 600 ENV "GPUAES_GPU_START_BYTES=0")

# Partially overlapping input and output: the default provider's bytes, in
# place still on the GPU; whole jobs, and CTR streams in keystream mode.
gpuaes_test_program(test_overlap test_overlap.c)
target_link_libraries(test_overlap PRIVATE api_util)
gpuaes_test(NAME overlap_gpu COMMAND test_overlap --gpu LABELS gpu TIMEOUT 600
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")
gpuaes_test(NAME overlap_keystream_gpu COMMAND test_overlap --gpu --keystream LABELS gpu TIMEOUT 600
  ENV "GPUAES_OFFLOAD_MIN_BYTES=1M;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=64K;GPUAES_KEYSTREAM_TOTAL_BYTES=1M;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")
