#!/usr/bin/env bash
# test_cli.sh - the openssl command line with gpuaes: enc with gpuaes alone
# and with default beside it gives default's bytes and decrypts back; list
# shows the provider and its 15 ciphers; speed runs; openssl.cnf (after
# openssl.cnf.example) works without any -provider flag.
#
# usage: test_cli.sh <source dir> <gpu_probe binary> [--gpu]
# env:   GPUAES_MODULE_DIR (the directory holding gpuaes.so)
# "a && b || fail": fail when either step fails, as intended.
# shellcheck disable=SC2015
set -u

SRC=$1
PROBE=$2
GPU=${3:-}
DIR=${GPUAES_MODULE_DIR:?GPUAES_MODULE_DIR is not set}
OPENSSL=$(command -v openssl) || { echo "no openssl on PATH"; exit 1; }
# A sanitized build's module needs the sanitizer's runtime loaded first; the
# openssl binary is not instrumented, so preload it there (and only there).
if [ -n "${GPUAES_TEST_PRELOAD:-}" ]; then
    OPENSSL=(env "LD_PRELOAD=$GPUAES_TEST_PRELOAD" "${OPENSSL[@]}")
fi
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if [ "$GPU" = "--gpu" ]; then
    "$PROBE" || exit $?            # exits 77 (skip) without a usable GPU
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/gpuaes_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
# No system openssl.cnf: only the providers named on each command line.
: > "$T/empty.cnf"
export OPENSSL_CONF=$T/empty.cnf
# Debug output only where a check asks for it.
DEBUG=${GPUAES_DEBUG:-}
unset GPUAES_DEBUG

G=(-provider-path "$DIR" -provider gpuaes)
head -c $((5 * 1024 * 1024 + 3)) /dev/urandom > "$T/plain"

IV=000102030405060708090a0b0c0d0e0f
K128=2b7e151628aed2a6abf7158809cf4f3c
K192=8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b
K256=603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4

# enc_check <cipher> <key> <iv or ->
enc_check() {
    local c=$1 k=$2 iv=() tag=$1
    [ "$3" != "-" ] && iv=(-iv "$3")
    "${OPENSSL[@]}" enc "-$c" -K "$k" "${iv[@]}" -in "$T/plain" -out "$T/ref.$tag" \
        || { fail "$c: openssl enc with the default provider"; return; }
    # gpuaes alone: the app loads no default provider
    "${OPENSSL[@]}" enc "${G[@]}" "-$c" -K "$k" "${iv[@]}" -in "$T/plain" -out "$T/g1.$tag" 2> "$T/err" \
        || { fail "$c: enc with gpuaes alone"; cat "$T/err"; return; }
    [ -s "$T/err" ] && { fail "$c: enc with gpuaes alone wrote to stderr:"; cat "$T/err"; }
    cmp -s "$T/ref.$tag" "$T/g1.$tag" || fail "$c: gpuaes alone differs from default"
    # gpuaes and default, no preference; then gpuaes required
    "${OPENSSL[@]}" enc "${G[@]}" -provider default "-$c" -K "$k" "${iv[@]}" -in "$T/plain" -out "$T/g2.$tag" \
        && cmp -s "$T/ref.$tag" "$T/g2.$tag" || fail "$c: -provider gpuaes -provider default differs"
    "${OPENSSL[@]}" enc "${G[@]}" -provider default -propquery provider=gpuaes "-$c" -K "$k" "${iv[@]}" \
        -in "$T/plain" -out "$T/g3.$tag" \
        && cmp -s "$T/ref.$tag" "$T/g3.$tag" || fail "$c: -propquery provider=gpuaes differs"
    # and back, gpuaes alone
    "${OPENSSL[@]}" enc -d "${G[@]}" "-$c" -K "$k" "${iv[@]}" -in "$T/ref.$tag" -out "$T/back.$tag" \
        && cmp -s "$T/plain" "$T/back.$tag" || fail "$c: decryption with gpuaes alone"
    echo "ok  enc $c"
}

enc_check aes-128-ctr "$K128" "$IV"
enc_check aes-256-cbc "$K256" "$IV"
enc_check aes-192-cfb "$K192" "$IV"
enc_check aes-256-ecb "$K256" -

# Nothing but gpuaes is loaded: a cipher it lacks is not found.
if "${OPENSSL[@]}" enc "${G[@]}" -aes-128-ofb -K "$K128" -iv "$IV" -in "$T/plain" -out "$T/ofb" 2> /dev/null; then
    fail "aes-128-ofb worked with gpuaes alone: was the default provider loaded?"
fi

# GPUAES_DEBUG=1 logs to stderr; without it the provider is silent (checked above).
GPUAES_DEBUG=1 "${OPENSSL[@]}" enc "${G[@]}" -aes-128-ctr -K "$K128" -iv "$IV" -in "$T/plain" \
    -out "$T/dbg" 2> "$T/dbglog" || fail "enc with GPUAES_DEBUG=1"
[ -s "$T/dbglog" ] || fail "GPUAES_DEBUG=1 printed nothing"
cmp -s "$T/dbg" "$T/ref.aes-128-ctr" || fail "enc with GPUAES_DEBUG=1 differs"
# Its last line counts the contexts made per cipher (bench/tls_loopback.sh
# relies on it to tell that gpuaes served a program's ciphers).
grep -Eq "cipher contexts made:.* AES-128-CTR [1-9]" "$T/dbglog" \
    || fail "GPUAES_DEBUG=1 did not count the AES-128-CTR context"
if [ "$GPU" = "--gpu" ]; then
    echo "--- GPUAES_DEBUG=1 log of a 5 MiB aes-128-ctr (GPUAES_OFFLOAD_MIN_BYTES=${GPUAES_OFFLOAD_MIN_BYTES:-unset}, GPUAES_DISPATCH=${GPUAES_DISPATCH:-unset}):"
    head -20 "$T/dbglog"
    grep -qi "failed" "$T/dbglog" && fail "the GPU failed (see the log above)"
fi

# openssl list
"${OPENSSL[@]}" list -providers "${G[@]}" > "$T/prov" 2>&1 || fail "list -providers"
grep -q "^  gpuaes$" "$T/prov" || fail "list -providers does not show gpuaes"
grep -q "status: active" "$T/prov" || fail "list -providers: gpuaes not active"
cat "$T/prov"
"${OPENSSL[@]}" list -cipher-algorithms "${G[@]}" > "$T/ciphers" 2>&1 || fail "list -cipher-algorithms"
n=$(grep -c "@ gpuaes$" "$T/ciphers")
[ "$n" -eq 15 ] || fail "list -cipher-algorithms shows $n ciphers @ gpuaes, want 15"
for bits in 128 192 256; do
    for mode in ECB CBC CFB CTR GCM; do
        grep -i "AES-$bits-${mode}[ ,}].*@ gpuaes$" "$T/ciphers" | grep -qiv "AES-$bits-$mode-" \
            || fail "list -cipher-algorithms lacks AES-$bits-$mode @ gpuaes"
    done
done
echo "ok  list"

# openssl speed (3.0 takes -seconds and -bytes).  gpuaes alone has no DRBG,
# which speed needs, so default is loaded beside it and gpuaes preferred (3.0.13
# applies -propquery to the DRBG fetch too: "provider=gpuaes" would fail there).
"${OPENSSL[@]}" speed "${G[@]}" -provider default -propquery '?provider=gpuaes' -evp aes-128-ctr \
    -seconds 1 -bytes 16384 > "$T/speed" 2>&1 || { fail "speed"; cat "$T/speed"; }
grep -Eq "^AES-128-CTR +[0-9.]+k" "$T/speed" || { fail "speed printed no result line"; cat "$T/speed"; }
grep -E "^(type|AES-128-CTR) " "$T/speed"

# openssl.cnf: no -provider flags.  Made from openssl.cnf.example when there
# is one (so the example itself is tested), with this build's module,
# offload_min_bytes = 0 and dispatch = force.
if [ -f "$SRC/openssl.cnf.example" ]; then
    sed -e "s|^module *=.*|module = $DIR/gpuaes.so|" \
        -e "s|^# *offload_min_bytes *=.*|offload_min_bytes = 0|" \
        -e "s|^# *dispatch *=.*|dispatch = force|" \
        "$SRC/openssl.cnf.example" > "$T/test.cnf"
else
    echo "note: no $SRC/openssl.cnf.example, using the built-in copy of its shape"
    cat > "$T/test.cnf" <<EOF
openssl_conf = openssl_init
[openssl_init]
providers = provider_sect
alg_section = algorithm_sect
[provider_sect]
default = default_sect
gpuaes = gpuaes_sect
[default_sect]
activate = 1
[gpuaes_sect]
module = $DIR/gpuaes.so
activate = 1
offload_min_bytes = 0
dispatch = force
[algorithm_sect]
default_properties = ?provider=gpuaes
EOF
fi
grep -q "^module = $DIR/gpuaes.so" "$T/test.cnf" || fail "openssl.cnf.example: no 'module =' line to point at the build"
grep -q "^offload_min_bytes = 0" "$T/test.cnf" || fail "openssl.cnf.example: no '# offload_min_bytes =' line"
grep -q "^dispatch = force" "$T/test.cnf" || fail "openssl.cnf.example: no '# dispatch =' line"
# The same with gpuaes required, proving the ciphers do come from it.
sed -e "s|^default_properties *= *?provider=gpuaes|default_properties = provider=gpuaes|" \
    "$T/test.cnf" > "$T/strict.cnf"
for cnf in test strict; do
    for spec in "aes-128-ctr $K128" "aes-256-cbc $K256"; do
        read -r c k <<< "$spec"
        OPENSSL_CONF=$T/$cnf.cnf "${OPENSSL[@]}" enc "-$c" -K "$k" -iv "$IV" -in "$T/plain" \
            -out "$T/cnf.$c" 2> "$T/err" || { fail "$cnf.cnf: enc -$c"; cat "$T/err"; continue; }
        cmp -s "$T/cnf.$c" "$T/ref.$c" || fail "$cnf.cnf: enc -$c differs from default"
        OPENSSL_CONF=$T/$cnf.cnf "${OPENSSL[@]}" enc -d "-$c" -K "$k" -iv "$IV" -in "$T/ref.$c" \
            -out "$T/cnfback.$c" && cmp -s "$T/cnfback.$c" "$T/plain" || fail "$cnf.cnf: enc -d -$c"
    done
done
OPENSSL_CONF=$T/test.cnf "${OPENSSL[@]}" list -providers 2>&1 | grep -q "^  gpuaes$" \
    || fail "openssl.cnf: gpuaes not among the active providers"
echo "ok  openssl.cnf"

# The module alone, without the GPU layer beside it (and none installed):
# every call on the CPU, right, and the debug log says why (no crash, no
# error for the application: a host without the layer has no GPU).
mkdir "$T/alone" && cp "$DIR/gpuaes.so" "$T/alone/"
GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_DEBUG=1 "${OPENSSL[@]}" enc -provider-path "$T/alone" -provider gpuaes \
    -aes-128-ctr -K "$K128" -iv "$IV" -in "$T/plain" -out "$T/alone.ctr" 2> "$T/alonelog" \
    && cmp -s "$T/alone.ctr" "$T/ref.aes-128-ctr" || { fail "the module without its GPU layer"; cat "$T/alonelog"; }
# (An installed layer, `cmake --install`, is loaded instead where there is one.)
grep -q "cannot load the GPU layer\|GPU layer .* loaded" "$T/alonelog" \
    || { fail "no word of the missing GPU layer"; cat "$T/alonelog"; }
grep -q "GPU layer $T/alone" "$T/alonelog" && fail "a GPU layer was found beside the lone module"
echo "ok  module without its GPU layer"

[ -n "$DEBUG" ] && export GPUAES_DEBUG=$DEBUG
if [ "$failures" -ne 0 ]; then
    echo "cli: FAILED ($failures)"
    exit 1
fi
echo "cli: ok"
