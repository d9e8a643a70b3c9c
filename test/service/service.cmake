# gpuaesd, the per-user GPU service (docs/SERVICE.md), end to end: the
# service with the emulated GPU layer (gpuaesd_emu) and its client library,
# against OpenSSL's default provider.  Labelled emu: CI runs them, and the
# ASan+UBSan pass of scripts/test.sh too.
add_executable(gpuaesd_emu ${GPUAESD_SOURCES} gpu/gpu_emulator.c)
target_include_directories(gpuaesd_emu PRIVATE ${PROJECT_SOURCE_DIR}/service ${PROJECT_SOURCE_DIR}/include)
target_compile_options(gpuaesd_emu PRIVATE -Wall -Wextra)
target_link_libraries(gpuaesd_emu PRIVATE gpuaesd_client testsupport OpenSSL::Crypto Threads::Threads)
set_target_properties(gpuaesd_emu PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/emu)

add_executable(test_service service/test_service.c service/test_service_hostile.c service/test_service_activation.c
  service/test_service_load.c service/test_service_spare.c service/test_service_devices.c service/service_util.c
  ${PROJECT_SOURCE_DIR}/provider/gcm/gcm_math.c)
target_include_directories(test_service PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/provider
  ${PROJECT_SOURCE_DIR}/service)
target_compile_options(test_service PRIVATE -Wall -Wextra)
target_link_libraries(test_service PRIVATE gpuaesd_client testutil OpenSSL::Crypto Threads::Threads)
add_dependencies(test_service gpuaesd_emu)

# diff: random jobs of every op through a detached service, bit for bit;
# fuzz: hostile clients beside a good one; uid: another uid is refused (root
# only, else skipped); dir: a socket directory of the wrong mode, owner or a
# symbolic link is refused; kill: SIGKILL / SIGSTOP of the service while a
# client waits, then a new service; activation: started as a systemd socket
# unit starts it (fd 3, LISTEN_PID/LISTEN_FDS); inflight: several jobs at once
# on one connection, and a client that sends more than max_inflight is throttled;
# load: the published load (seqlock across processes, hostile tables, two
# connections seeing each other's jobs, a table no client can write); warm:
# no job waits on a cold GPU layer (the service warms it before it serves);
# spare: a client gets a segment the service made and registered ahead;
# devices: two emulated GPUs, a worker process for the second.
foreach(t diff fuzz uid dir kill activation inflight load warm spare devices)
  add_test(NAME service_${t} COMMAND test_service ${t} $<TARGET_FILE:gpuaesd_emu>)
  set_tests_properties(service_${t} PROPERTIES LABELS "emu;service" SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# spare: each registration takes 300 ms (emulated), so that a client's own
# segment would run its first jobs staged; and spare (and fuzz) with the
# spare segments turned off: clients make their own.
set_tests_properties(service_spare PROPERTIES ENVIRONMENT GPUAES_EMU_REGISTER_MS=300)
add_test(NAME service_spare_off COMMAND test_service spare $<TARGET_FILE:gpuaesd_emu>)
add_test(NAME service_fuzz_nospare COMMAND test_service fuzz $<TARGET_FILE:gpuaesd_emu>)
set_tests_properties(service_spare_off service_fuzz_nospare PROPERTIES LABELS "emu;service" TIMEOUT 300
  ENVIRONMENT GPUAESD_SPARE=0)
# diff again with every DMA registration failing (emulated): the service
# serves through staging, bit for bit, and counts the failures.
add_test(NAME service_diff_noreg COMMAND test_service diff $<TARGET_FILE:gpuaesd_emu>)
set_tests_properties(service_diff_noreg PROPERTIES LABELS "emu;service" TIMEOUT 300
  ENVIRONMENT GPUAES_EMU_REGISTER_FAIL=1)
# ... and with registration turned off (GPUAESD_DMA=0: the A/B switch).
add_test(NAME service_diff_nodma COMMAND test_service diff $<TARGET_FILE:gpuaesd_emu>)
set_tests_properties(service_diff_nodma PROPERTIES LABELS "emu;service" TIMEOUT 300 ENVIRONMENT GPUAESD_DMA=0)
# ... and without job rings, turned off by the service (GPUAESD_RING=0) or
# by the client (GPUAES_SERVICE_RING=0): jobs on the socket, as before.
add_test(NAME service_diff_noring COMMAND test_service diff $<TARGET_FILE:gpuaesd_emu>)
set_tests_properties(service_diff_noring PROPERTIES LABELS "emu;service" TIMEOUT 300 ENVIRONMENT GPUAESD_RING=0)
add_test(NAME service_diff_noring_client COMMAND test_service diff $<TARGET_FILE:gpuaesd_emu>)
set_tests_properties(service_diff_noring_client PROPERTIES LABELS "emu;service" TIMEOUT 300
  ENVIRONMENT GPUAES_SERVICE_RING=0)
# The real service on a GPU machine (skipped without a usable GPU).
add_test(NAME service_diff_gpu COMMAND test_service diff $<TARGET_FILE:gpuaesd> --gpu)
set_tests_properties(service_diff_gpu PROPERTIES LABELS "gpu;service" SKIP_RETURN_CODE 77 TIMEOUT 300)

# Step 2: the provider's differential tests through the service
# (GPUAES_GPU_BACKEND=service), the emulated module forced onto its GPU path,
# each against its own service in a private socket directory
# (service_run.sh, which also checks that the service ran jobs and stops it).
# A 10 s job bound: a loaded CI host must not turn a slow answer into a
# CPU fallback (counted as a GPU error) in a test of correctness.
set(_svc_env GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_SERVICE_TIMEOUT_MS=10000)
# 64 KiB pieces (first 16K, then 32K, then 64K; a ring of 32 slots, 2 MiB):
# every job of more than 16 KiB goes through the pipeline in several pieces,
# and one of more than 2 MiB reuses the slots, as a job longer than the
# segment does with the default 4 MiB pieces (kat runs with those).
set(_svc_small GPUAES_SERVICE_CHUNK=64K)
set(_svc_run ${CMAKE_CURRENT_SOURCE_DIR}/service/service_run.sh $<TARGET_FILE:gpuaesd_emu>)
gpuaes_test(NAME kat_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_kat> --gpu
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} TIMEOUT 120)
gpuaes_test(NAME diff_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff> --gpu
  --threads 4 --iterations 8 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 120)
# The caller's share through the service (provider/gpu/remote_pipeline.c): all,
# it must run for every group; ctr (default), for CTR only (keystream pieces).
# Small pieces: a share takes only what no piece has claimed, and with the
# default ones a job of 9 MiB is all claimed at once.
gpuaes_test(NAME cpu_share_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_cpu_share> --all
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} GPUAES_GPU_CPU_SHARE=all
  TIMEOUT 300)
gpuaes_test(NAME cpu_share_ctr_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_cpu_share> --ctr
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 300)
gpuaes_test(NAME params_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_params> --gpu
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 120)
gpuaes_test(NAME bad_input_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_bad_input> --gpu
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 120)
gpuaes_test(NAME fork_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_fork> --gpu
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 120)
# GCM messages on gpuaes's engine through the service, their CPU runs in the
# stitched pass (gcm_fused.c; from 16 bytes: the emulated module's hook):
# updates of 4 KiB and more to the service's GPU, the rest on the CPU.
gpuaes_test(NAME diff_service_fused_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff> --gpu --fused
  --threads 2 --iterations 20 --max-bytes 1M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force
  GPUAES_SERVICE_TIMEOUT_MS=10000 ${_svc_small} GPUAES_TEST_FUSED_MIN=16 TIMEOUT 120)
# CTR jobs copied in and out like the other modes (service_ctr_keystream off).
gpuaes_test(NAME diff_service_ctrcopy_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff> --gpu
  --threads 4 --iterations 8 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small}
  GPUAES_SERVICE_CTR_KEYSTREAM=0 TIMEOUT 120)
# Jobs on the socket, not the job ring (GPUAES_SERVICE_RING=0: the client asks for none).
gpuaes_test(NAME diff_service_noring_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff> --gpu
  --threads 4 --iterations 8 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small}
  GPUAES_SERVICE_RING=0 TIMEOUT 120)
# The service's DMA registration fails for every client: served through
# staging, every output still right.
gpuaes_test(NAME diff_service_noreg_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff> --gpu
  --threads 4 --iterations 8 --max-bytes 1M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} GPUAES_EMU_REGISTER_FAIL=1 TIMEOUT 120)
# gpuaesd missing: every call correct on the CPU, no hang (starts are retried
# with a back-off of 1, 2, 4 ... s, in the background).
gpuaes_test(NAME diff_service_absent_emu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/service/service_run.sh
  ${CMAKE_BINARY_DIR}/emu/no-such-gpuaesd absent $<TARGET_FILE:test_diff> --iterations 8 --max-bytes 1M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} TIMEOUT 60)
# SIGKILL of the service mid-run, with several pieces of each job in flight:
# the jobs complete on the CPU from the prefix copied out, every output is
# still right (test_diff without --gpu: errors are expected).
gpuaes_test(NAME diff_service_killed_emu COMMAND ${_svc_run} killed $<TARGET_FILE:test_diff>
  --threads 4 --iterations 64 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 120)
# The service answers FAILED for pieces in the middle of jobs (every 5th job
# it runs fails after half its blocks): each job's prefix up to there is
# kept, the rest done on the CPU, and every output is right.
gpuaes_test(NAME diff_service_failmid_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff>
  --threads 2 --iterations 16 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small}
  GPUAES_EMU_FAIL_EVERY=5 TIMEOUT 120)
# ... and with the caller's share for every op (gpu_cpu_share=all) and a slow
# service (1 ms a piece, so that callers wait and take shares): a job ends
# with a GPU prefix, a gap and the share's tail (GCM's tail GHASH folded in
# after the gap); and the service SIGKILLed with shares running.
gpuaes_test(NAME diff_service_failmid_share_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff>
  --threads 2 --iterations 32 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small}
  GPUAES_EMU_FAIL_EVERY=5 GPUAES_GPU_CPU_SHARE=all GPUAES_EMU_JOB_DELAY_MS=1 TIMEOUT 120)
gpuaes_test(NAME diff_service_killed_share_emu COMMAND ${_svc_run} killed $<TARGET_FILE:test_diff>
  --threads 4 --iterations 64 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small}
  GPUAES_GPU_CPU_SHARE=all GPUAES_EMU_JOB_DELAY_MS=1 TIMEOUT 120)
# A service whose GPU cannot run GCM answers BUSY for it: those jobs run on
# the CPU (and are not sent again for a moment), the rest through the service.
gpuaes_test(NAME kat_service_nogcm_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_kat> --gpu
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} GPUAES_EMU_NO_GCM=1 TIMEOUT 120)
# `openssl list -providers -verbose` in service mode: the service's state,
# nothing started by asking.
# (the openssl CLI gets the ASan runtime preloaded in that build, as the cli test's)
gpuaes_test(NAME service_list_emu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/service/service_list.sh
  $<TARGET_FILE:gpuaesd_emu> ${CMAKE_BINARY_DIR}/emu
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "${_cli_env}" TIMEOUT 60)
# A process that exits while the service it started does not answer yet
# exits at once, not at the start's deadline.
gpuaes_test(NAME service_exit_starting_emu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/service/service_exit_starting.sh
  ${CMAKE_BINARY_DIR}/emu LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "${_cli_env}" TIMEOUT 60)
# The idle exit: GPUAESD_IDLE_EXIT for a service started without --idle-exit
# (a provider's), the option winning over it, a value not a number ignored.
gpuaes_test(NAME service_idle_exit_emu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/service/service_idle_exit.sh
  $<TARGET_FILE:gpuaesd_emu> LABELS emu service TIMEOUT 60)
# The same with GPUAES_GPU_BACKEND unset: the service is gpuaes's default backend.
gpuaes_test(NAME backend_default_emu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/service/service_list.sh
  $<TARGET_FILE:gpuaesd_emu> ${CMAKE_BINARY_DIR}/emu default
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "${_cli_env}" TIMEOUT 60)
# Four client processes, the service SIGKILLed at a random point; one process
# of four threads, the service SIGSTOPped for 1.5 s (jobs time out at 300 ms
# and finish on the CPU, the service is left alone for its back-off, then
# used again): every output still right.
gpuaes_test(NAME diff_service_killed4_emu COMMAND ${_svc_run} killed4 $<TARGET_FILE:test_diff>
  --threads 2 --iterations 128 --max-bytes 1M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 180)
# Two emulated GPUs (a worker process for the second): the threads'
# connections spread over both, every output right; and the service SIGKILLed
# under four processes, its worker ending with it.
gpuaes_test(NAME diff_service_2gpu_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_diff> --gpu
  --threads 4 --iterations 8 --max-bytes 3M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small}
  GPUAES_EMU_DEVICES=2 TIMEOUT 120)
gpuaes_test(NAME diff_service_killed4_2gpu_emu COMMAND ${_svc_run} killed4 $<TARGET_FILE:test_diff>
  --threads 2 --iterations 128 --max-bytes 1M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small}
  GPUAES_EMU_DEVICES=2 TIMEOUT 180)
# Issue 22's "killed service": sixteen processes of every mode (each cipher
# of test_diff, random splits), the service SIGKILLed among them.
gpuaes_test(NAME diff_service_killed16_emu COMMAND ${_svc_run} killed16 $<TARGET_FILE:test_diff>
  --threads 1 --iterations 48 --max-bytes 512K
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_env} ${_svc_small} TIMEOUT 300)
gpuaes_test(NAME diff_service_stopped_emu COMMAND ${_svc_run} stopped $<TARGET_FILE:test_diff>
  --threads 4 --iterations 48 --max-bytes 1M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force
  GPUAES_SERVICE_TIMEOUT_MS=300 ${_svc_small} TIMEOUT 180)
# A fresh process's first large call, with the service already running and
# warm, goes to the GPU (its start waits briefly for the connection: a GCM
# message keeps the engine its first data chose).  One 16 MiB AES-256-GCM
# call per load_proc, forced to the GPU path; at least one of 5 runs.  The
# wait is 3 ms by default; 500 ms here, as a loaded CI host under ASan needs
# (with no wait the first call is always the CPU's: the test fails).
gpuaes_test(NAME first_call_service_emu COMMAND ${_svc_run} first $<TARGET_FILE:load_proc>
  --provider gpuaes --cipher AES-256-GCM --dir enc --size 16M --bytes 16M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force
  GPUAES_SERVICE_CONNECT_WAIT_MS=500 GPUAES_SERVICE_TIMEOUT_MS=10000 TIMEOUT 120)
# A rate the service published a while ago (slow: delayed emulated jobs) is
# not trusted: the next process sends jobs and measures again.  (Its first
# call may wait 1 s for the connection: a loaded CI host must not turn a slow
# hello into "held on the CPU".)
gpuaes_test(NAME stale_rate_service_emu COMMAND ${_svc_run} stalerate $<TARGET_FILE:load_proc>
  --provider gpuaes --cipher AES-128-CTR --dir enc --size 16M --bytes 64M
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_SERVICE_TIMEOUT_MS=10000
  GPUAES_SERVICE_CONNECT_WAIT_MS=1000 TIMEOUT 120)
# Keystream windows made by the service (provider/gpu/remote_keystream.c): the
# keystream differential through gpuaesd_emu, 8 threads and 16 contexts at
# once with small windows turning over (it requires keystream used), one
# block-and-a-bit windows, and the service SIGKILLed mid-run (every output
# still right: the contexts go on on the CPU).
set(_svc_ks_env GPUAES_SERVICE_TIMEOUT_MS=10000 GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_CONNECT_WAIT_MS=1000)
gpuaes_test(NAME keystream_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_keystream> --gpu --threads 8
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_ks_env} ${_ks_env} TIMEOUT 300)
gpuaes_test(NAME keystream_tiny_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_keystream> --gpu --threads 4
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_ks_env}
  GPUAES_KEYSTREAM_RAMP_BYTES=0 GPUAES_KEYSTREAM_MAX_WINDOW=4112 GPUAES_KEYSTREAM_TOTAL_BYTES=64K
  GPUAES_KEYSTREAM_MAX_CONTEXTS=16 TIMEOUT 300)
gpuaes_test(NAME keystream_service_killed_emu COMMAND ${_svc_run} killed $<TARGET_FILE:test_keystream> --threads 8
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_ks_env} ${_ks_env} TIMEOUT 300)
# The lifecycle of keystream contexts and windows (test_ks_life.c) with the
# service's windows: a context that leaves keystream mode gives its slots
# back (those freed with a fill in flight at its reply), so that the next
# context gets windows; never more than 3 per context.
# They make a handful of fills, which may all come before the service has
# registered the segment (under ASan): no direct job is required.
foreach(t jump mixed final)
  gpuaes_test(NAME ks_life_${t}_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_ks_life> ${t} --gpu
    LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_ks_env} ${_life_env}
    GPUAES_KEYSTREAM_MAX_CONTEXTS=1 SERVICE_RUN_FEW_JOBS=1 TIMEOUT 300)
endforeach()
gpuaes_test(NAME ks_life_pool_service_emu COMMAND ${_svc_run} served $<TARGET_FILE:test_ks_life> pool --gpu
  LABELS emu service MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV ${_svc_ks_env} SERVICE_RUN_FEW_JOBS=1
  GPUAES_KEYSTREAM_RAMP_BYTES=4K GPUAES_KEYSTREAM_MAX_WINDOW=256K GPUAES_KEYSTREAM_TOTAL_BYTES=64M
  GPUAES_KEYSTREAM_MAX_CONTEXTS=2 TIMEOUT 300)
