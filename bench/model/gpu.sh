#!/usr/bin/env bash
# The model's speed on a real GPU, for a lent device machine that has no Rust, no network and
# room for 64 MiB of inputs. Prepare here (x86-64 Linux), then run it there from the repo root:
#
#   bench/model/gpu.sh prepare      # builds, strips and packs into .dev/ and .gl/ (git-ignored)
#   bench/model/gpu.sh run [all|models]   # on the device machine; results under $OUT (or ./gpu-out)
#
# The device tool's `run` takes ignored paths only when named: carry [".dev", ".gl"].
#
# What it carries: the stripped `bench` and `kernel_bandwidth` examples and the wgpu kernel
# tests (`device_kernels`, `fused_kernels`, and `step_graph`: replayed decoding steps against
# launched ones), xz-compressed, and each default model as a skeleton
# (bench/model/skeleton.py: the real header and tensor table, weights repeated from each
# tensor's first blocks). The skeletons do the real model's work but their output is not text:
# these runs measure speed, and the two tests check the kernels' arithmetic on that GPU. And a
# miniature (the `miniature` example: SmolLM2's 30 layers and kernels at tiny widths), whose
# decoding steps cost only their launches: the floor that launching alone sets. `bench` is built
# with wgpu's noop backend (`--features stampo-model/noop`), so the same floor is also timed with
# no driver and no GPU under it: the host's share alone (burn, CubeCL, wgpu-core).
# Vulkan's loader comes from Debian's libvulkan1, unpacked from .gl/ (see the device tool's
# notes); the driver is the machine's own.
set -uo pipefail

MODELS=(SmolLM2-135M-Instruct.Q4_1 qwen2.5-coder-0.5b-instruct-q4_k_m gemma-3-270m-q4_k_m)

# Decompresses the xz file $1 into $2 with Python's lzma.
unxz_to() {
    python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"
}

prepare() {
    set -e
    # shellcheck source=/dev/null
    source scripts/env.sh
    local target=$CARGO_TARGET_DIR
    cargo build --release -p stampo-cli -p stampo-model --features stampo-model/noop \
        --example kernel_bandwidth --example bench --example miniature
    cargo test --workspace --test device_kernels --test fused_kernels --test step_graph --no-run
    mkdir -p .dev
    rm -f .dev/*.xz
    cp "$target/release/examples/bench" "$target/release/examples/kernel_bandwidth" .dev/
    for t in device_kernels fused_kernels step_graph; do
        cp "$(ls -t "$target"/debug/deps/$t-* | grep -v '\.d$' | head -1)" .dev/$t
    done
    strip .dev/bench .dev/kernel_bandwidth .dev/device_kernels .dev/fused_kernels .dev/step_graph
    xz -T2 -6 .dev/bench .dev/kernel_bandwidth .dev/device_kernels .dev/fused_kernels .dev/step_graph
    # The skeletons are written with gguf-py: the reference venv's, or one made for it.
    if ! "$STAMPO_CACHE/venv/bin/python" -c "import gguf" 2>/dev/null; then
        python3 -m venv "$STAMPO_CACHE/venv"
        "$STAMPO_CACHE/venv/bin/pip" install -q gguf
    fi
    for m in "${MODELS[@]}"; do
        "$STAMPO_CACHE/venv/bin/python" bench/model/skeleton.py shrink \
            "$STAMPO_CACHE/models/$m.gguf" ".dev/$m.skel"
    done
    "$target/release/examples/miniature" .dev/miniature.gguf
    xz -T2 -6 .dev/miniature.gguf
    # Vulkan's loader for the device machine, which has only the driver (the device tool's notes).
    if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
        local apt=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
        mkdir -p .gl /tmp/amd64/partial
        apt-get "${apt[@]}" update -qq
        (cd .gl && apt-get "${apt[@]}" download libvulkan1)
    fi
    du -sh .dev .gl
}

run() {
    local out=${OUT:-gpu-out}
    mkdir -p "$out"
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$icd" ] && export VK_DRIVER_FILES=$icd
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
    local bin=/tmp/stampo-bin
    mkdir -p $bin /tmp/models
    for b in bench kernel_bandwidth device_kernels fused_kernels step_graph; do
        unxz_to ".dev/$b.xz" "$bin/$b" && chmod +x "$bin/$b"
    done
    unxz_to .dev/miniature.gguf.xz /tmp/models/miniature.gguf
    for m in "${MODELS[@]}"; do
        python3 bench/model/skeleton.py expand ".dev/$m.skel" "/tmp/models/$m.gguf"
    done

    echo "== kernels against the scalar reference on this GPU; replayed steps against launched ones"
    for t in device_kernels fused_kernels step_graph; do
        STAMPO_MODELS=/tmp/models STAMPO_REQUIRE_WGPU=1 timeout 120 $bin/$t --test-threads 1 2>&1 |
            tee "$out/$t.log" | grep -v XDG_RUNTIME
    done

    if [ "${1:-all}" = all ]; then
        echo "== quantised matmul bandwidth"
        timeout 200 $bin/kernel_bandwidth wgpu 512 2>/dev/null | tee "$out/kernels.jsonl"
    fi

    echo "== the launch floor: a miniature with SmolLM2's kernels and nothing to compute"
    timeout 60 $bin/bench /tmp/models/miniature.gguf 16 256 wgpu 2>/dev/null | tee "$out/miniature.jsonl"

    # 128 + 128 tokens of each model named after $1 and $2, with the variable $2 at 1, then
    # 0, twice over; each run's JSON line after a line {"$1": value}.
    alternate() {
        local key=$1 var=$2
        shift 2
        for value in 1 0 1 0; do
            for m in "$@"; do
                echo "{\"$key\":$value}"
                env "$var=$value" timeout 60 $bin/bench "/tmp/models/$m.gguf" 128 128 wgpu 2>/dev/null
            done
        done
    }

    echo "== launches from the device's thread (default) against handed over one by one (STAMPO_WGPU_INLINE=0)"
    alternate inline STAMPO_WGPU_INLINE miniature "${MODELS[0]}" | tee "$out/inline.jsonl"

    echo "== decoding steps replayed from a recording (default) against launched one by one (STAMPO_WGPU_GRAPHS=0)"
    alternate graphs STAMPO_WGPU_GRAPHS miniature "${MODELS[@]}" | tee "$out/graphs.jsonl"

    echo "== the host's floor: the miniature and SmolLM2 on wgpu's noop backend (launched, never run)"
    timeout 60 $bin/bench /tmp/models/miniature.gguf 16 256 noop 2>/dev/null | tee "$out/noop.jsonl"
    timeout 60 $bin/bench "/tmp/models/${MODELS[0]}.gguf" 128 128 noop 2>/dev/null | tee -a "$out/noop.jsonl"

    echo "== models (skeletons): wgpu, then the CPU with 16 threads"
    : >"$out/models.jsonl"
    for m in "${MODELS[@]}"; do
        for shape in "128 128" "1024 64"; do
            # shellcheck disable=SC2086
            timeout 60 $bin/bench "/tmp/models/$m.gguf" $shape wgpu 2>/dev/null | tee -a "$out/models.jsonl"
        done
        STAMPO_THREADS=16 timeout 60 $bin/bench "/tmp/models/$m.gguf" 128 64 cpu 2>/dev/null | tee -a "$out/models.jsonl"
    done

    echo "== per-kernel device times, SmolLM2, 16 + 8 tokens (CubeCL's profiler syncs each launch)"
    STAMPO_WGPU_GRAPHS=0 CUBECL_DEBUG_LOG="$out/profile.log" timeout 60 $bin/bench "/tmp/models/${MODELS[0]}.gguf" 16 8 wgpu >/dev/null 2>&1
    ls -la "$out/profile.log"
}

case "${1:-}" in
prepare) prepare ;;
run) run "${2:-all}" ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
