#!/usr/bin/env bash
# service_run.sh - runs a test program with the service backend
# (GPUAES_GPU_BACKEND=service) against a private socket directory, so that
# tests run at once never share a service; then, unless told the service must
# be absent, checks that the service ran jobs on its (emulated) GPU and stops it.
#
# usage: service_run.sh <gpuaesd binary> <expect: served|absent|killed|killed4|killed16|stopped|first|stalerate> <command...>
# "absent": the binary is missing on purpose; the command must still pass, in
# bounded time (ctest's timeout), and no service may answer afterwards.
# "killed": the service is SIGKILLed once it has answered jobs, mid-run; the command must
# still pass (jobs in flight complete on the CPU; a new service may start).  A
# run that ends first is run again (3 at most).
# "killed4", "killed16": four (sixteen) copies of the command at once, against a
# service started and warm before them, SIGKILLed at a random point (0-400 ms)
# after its first job; every copy must pass.
# "stopped": the service is SIGSTOPped once it has answered jobs, for 1.5 s,
# then continued: the jobs in flight time out (run it with a short
# GPUAES_SERVICE_TIMEOUT_MS) and complete on the CPU; the command must pass.
# "first": the service is started and warm first; then the command (a
# load_proc of one call) runs 5 times, and in at least one run that first
# call must have gone to the GPU ("gpu_bytes=" above 0): a fresh
# process's first large call waits briefly for its connection to a running
# service (a loaded host may miss the bound now and then, never always).
# "stalerate": the command (a load_proc, not forced to the GPU) runs against a
# service whose published rate for the op is slow (jobs sent before with
# GPUAES_EMU_JOB_DELAY_MS=50) but older than a second: it must send jobs again
# (a stale rate would hold every process on the CPU, and none would measure it).
set -u

SERVICE=$1
EXPECT=$2
shift 2
TMP=$(mktemp -d) || exit 1
DIR=$TMP/sock
stop() {
    local pid
    pid=$(pid_of)
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    fi
    rm -rf "$TMP"
}
trap stop EXIT

pid_of() {
    "$SERVICE" --socket-dir "$DIR" --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'
}

export GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$SERVICE GPUAES_SERVICE_DIR=$DIR
# Until the service's GPU is up and warm ("gpu:" names the device).
wait_warm() {
    for _ in $(seq 500); do
        "$SERVICE" --socket-dir "$DIR" --status 2>/dev/null | grep -q '^gpu: \(GPU \|$\)' || break
        sleep 0.02
    done
    "$SERVICE" --socket-dir "$DIR" --status 2>/dev/null | grep -q '^gpu: \(GPU \|$\)' &&
        { echo "service_run: the service's GPU did not come up"; exit 1; }
    # Several GPUs: the workers start once the first GPU is up; a client that
    # connects before one serves is handed to the others (on a loaded 2-core
    # host all of a short test's connections were, and a GPU stayed idle).
    for _ in $(seq 500); do
        [ "$("$SERVICE" --socket-dir "$DIR" --status 2>/dev/null | grep -c '^device [0-9]* (pid [0-9]*): serving')" \
            -ge "${GPUAES_EMU_DEVICES:-1}" ] && break
        [ "${GPUAES_EMU_DEVICES:-1}" -gt 1 ] || break
        sleep 0.02
    done
    # and its spare segment made (service/spare.c; none made under GPUAESD_SPARE=0 or when
    # registration fails: 2 s at most), which costs a core for a moment on a 2-core host
    for _ in $(seq 100); do
        "$SERVICE" --socket-dir "$DIR" --status 2>/dev/null | grep -q '^spare: .* [1-9][0-9]* ready' && return 0
        sleep 0.02
    done
    return 0
}
if [ "$EXPECT" = killed4 ] || [ "$EXPECT" = killed16 ] || [ "$EXPECT" = stopped ]; then
    copies=1; [ "$EXPECT" = killed4 ] && copies=4; [ "$EXPECT" = killed16 ] && copies=16
    # The service started and warm first: the copies' jobs meet it at once.
    # Left to the copies, its start-up raced them: on a loaded 2-core host all
    # sixteen once ended on the CPU before it served (a client's own start of
    # the service is service_diff's to test; after the kill, the copies start
    # a new one themselves).
    "$SERVICE" --socket-dir "$DIR" || { echo "service_run: the service did not start"; exit 1; }
    wait_warm
    pids=()
    for i in $(seq $copies); do GPUAES_TEST_SEED=$((RANDOM + i)) "$@" > "$TMP/out.$i" 2>&1 & pids+=($!); done
    running() {
        local n=0 p
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
        echo $n
    }
    # Until it has answered jobs: 60 s at most (status calls are slow on a
    # loaded host), and only while a copy still runs.
    victim=
    deadline=$((SECONDS + 60))
    while [ $SECONDS -lt $deadline ] && [ "$(running)" -gt 0 ]; do
        if "$SERVICE" --socket-dir "$DIR" --status 2>/dev/null | grep -q '^jobs: [1-9]'; then
            victim=$(pid_of)
            break
        fi
        sleep 0.02
    done
    [ -n "$victim" ] || { echo "service_run: no service served ($(running) of $copies copies running)"; cat "$TMP"/out.*; exit 1; }
    if [ "$EXPECT" != stopped ]; then
        sleep "0.$(printf '%03d' $((RANDOM % 400)))"
        running=$(running)
        kill -KILL "$victim"
        echo "service_run: killed gpuaesd $victim with $running of $copies clients running"
        [ $running -gt 0 ] || { echo "service_run: every copy ended before the kill (make the run longer)"; exit 1; }
    else
        kill -STOP "$victim"
        echo "service_run: stopped gpuaesd $victim for 1.5 s"
        sleep 1.5
        kill -CONT "$victim"
    fi
    rc=0
    for i in $(seq $copies); do
        wait "${pids[$((i - 1))]}" || { echo "service_run: copy $i failed:"; tail -20 "$TMP/out.$i"; rc=1; }
    done
    [ $rc = 0 ] && echo "service_run: ok ($copies copies passed across the $EXPECT service)"
    exit $rc
fi
if [ "$EXPECT" = first ]; then
    "$SERVICE" --socket-dir "$DIR" || { echo "service_run: the service did not start"; exit 1; }
    wait_warm
    hits=0
    for i in $(seq 5); do
        out=$("$@") || { echo "service_run: run $i failed: $out"; exit 1; }
        echo "$out"
        g=$(echo "$out" | sed -n 's/.* gpu_bytes=\([0-9-]*\) .*/\1/p')
        [ "${g:-0}" -gt 0 ] && hits=$((hits + 1))
    done
    [ $hits -gt 0 ] || { echo "service_run: no run's first call went to the GPU"; exit 1; }
    echo "service_run: ok ($hits of 5 first calls on the GPU)"
    exit 0
fi
if [ "$EXPECT" = stalerate ]; then
    GPUAES_EMU_JOB_DELAY_MS=50 "$SERVICE" --socket-dir "$DIR" || { echo "service_run: the service did not start"; exit 1; }
    wait_warm
    out=$(GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force "$@") || { echo "service_run: the forced run failed: $out"; exit 1; }
    echo "forced (publishes a slow rate): $out"
    g=$(echo "$out" | sed -n 's/.* gpu_bytes=\([0-9-]*\) .*/\1/p')
    [ "${g:-0}" -gt 0 ] || { echo "service_run: the forced run sent no job"; exit 1; }
    out=$(GPUAES_GPU_START_BYTES=0 "$@") || { echo "service_run: the run failed: $out"; exit 1; }
    echo "at once (the slow rate is fresh: the CPU, not asserted): $out"
    sleep 1.5
    out=$(GPUAES_GPU_START_BYTES=0 "$@") || { echo "service_run: the run failed: $out"; exit 1; }
    echo "1.5 s later: $out"
    g=$(echo "$out" | sed -n 's/.* gpu_bytes=\([0-9-]*\) .*/\1/p')
    [ "${g:-0}" -gt 0 ] || { echo "service_run: the stale rate held the process on the CPU"; exit 1; }
    echo "service_run: ok (a stale rate is not trusted)"
    exit 0
fi
if [ "$EXPECT" = killed ]; then
    # A run that passes before the kill lands (a loaded host: the status
    # polls are slow) proves nothing: again, up to 3 runs, the service it
    # started still warm for the next.
    for attempt in 1 2 3; do
        "$@" & test_pid=$!
        victim=
        for _ in $(seq 500); do       # once it has answered jobs
            if "$SERVICE" --socket-dir "$DIR" --status 2>/dev/null | grep -q '^jobs: [1-9]'; then
                victim=$(pid_of)
                break
            fi
            sleep 0.02
        done
        [ -n "$victim" ] || { echo "service_run: no service served"; wait $test_pid; exit 1; }
        if ! kill -0 $test_pid 2>/dev/null; then
            wait $test_pid || { echo "service_run: the test failed (before the kill)"; exit 1; }
            echo "service_run: run $attempt ended before the kill; again"
            continue
        fi
        kill -KILL "$victim"
        echo "service_run: killed gpuaesd $victim"
        wait $test_pid || { echo "service_run: the test failed"; exit 1; }
        echo "service_run: ok (the test passed across the kill)"
        exit 0
    done
    echo "service_run: every run ended before the kill (make the run longer)"
    exit 1
fi
# "served": the service started and warm first, so that a short test's jobs
# meet a GPU that takes them (the client's own start of a service is
# service_diff's and diff_service_absent_emu's to test).
if [ "$EXPECT" = served ]; then
    "$SERVICE" --socket-dir "$DIR" || { echo "service_run: the service did not start"; exit 1; }
    wait_warm
fi
"$@" || { echo "service_run: the test failed"; exit 1; }

if [ "$EXPECT" = absent ]; then
    # the binary is missing: nothing may answer (checked with the real client's dial)
    [ ! -S "$DIR/S.gpuaesd" ] || { echo "service_run: a socket appeared"; exit 1; }
    echo "service_run: ok (no service, all on the CPU)"
    exit 0
fi
status=$("$SERVICE" --socket-dir "$DIR" --status) || { echo "service_run: no service answers"; exit 1; }
echo "$status"
bytes=$(echo "$status" | sed -n 's/^jobs: .* on the GPU (\([0-9]*\) bytes).*/\1/p')
[ "${bytes:-0}" -gt 0 ] || { echo "service_run: no bytes went through the service"; exit 1; }
# Several (emulated) GPUs: each did some of it (the threads' connections spread).
if [ "${GPUAES_EMU_DEVICES:-1}" -gt 1 ] && [ "$EXPECT" = served ]; then
    idle=$(echo "$status" | grep -c '^device [0-9]* (pid [0-9]*): serving, .* 0 jobs on the GPU')
    gpus=$(echo "$status" | grep -c '^device [0-9]* (pid [0-9]*): serving')
    [ "$gpus" -eq "$GPUAES_EMU_DEVICES" ] && [ "$idle" -eq 0 ] \
        || { echo "service_run: $gpus GPUs serving, $idle of them idle"; exit 1; }
fi
# DMA: the segments registered, jobs run straight from them; unless the
# registration is made to fail (GPUAES_EMU_REGISTER_FAIL=1): then none, and
# the jobs were still served (through staging) and right.
direct=$(echo "$status" | sed -n 's/^dma: .* \([0-9]*\) jobs direct.*/\1/p')
failed=$(echo "$status" | sed -n 's/^dma: .* \([0-9]*\) failed;.*/\1/p')
if [ "${GPUAES_EMU_REGISTER_FAIL:-0}" != 0 ]; then
    [ "${direct:-1}" -eq 0 ] && [ "${failed:-0}" -gt 0 ] || { echo "service_run: registration did not fail"; exit 1; }
elif [ "${SERVICE_RUN_FEW_JOBS:-0}" != 0 ]; then
    :   # a handful of jobs (the keystream lifecycle): they may all come before the registration
else
    [ "${direct:-0}" -gt 0 ] || { echo "service_run: no job ran direct (DMA from the segment)"; exit 1; }
fi
echo "service_run: ok ($bytes bytes through the service, ${direct:-0} jobs direct)"
