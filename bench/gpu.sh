#!/bin/sh
# The CUDA checks and timings on a machine with an NVIDIA GPU, in one call.
#
#   sh bench/gpu.sh pack [BUILD]   here: gpu-kit/ (git-ignored) with the built tcomp,
#                                  npygen, test_corpus and test_cuda_driver and the shared
#                                  libraries they load (libLLVM, isl inside it, SQLite,
#                                  cmocka, z3, ICU, ...) as one xz tarball, for a machine
#                                  that has no package registry (the device tool carries
#                                  gpu-kit/: `carry: ["gpu-kit"]`, at most 64 MiB)
#   sh bench/gpu.sh run [OUT]      there, from the repository root: unpacks gpu-kit/,
#                                  then writes OUT/gpu.md (default $OUT, else .):
#     1. nvidia-smi, the driver and the device as tcomp sees them;
#     2. test_corpus gpu: every corpus kernel with target=cuda on device memory under the
#        default and a drawn mapping against C loops (outputs poisoned on the device);
#     3. test_cuda_driver: the device-memory API and the cached-cubin path on a real driver;
#     4. tcomp bench --target cuda (CUDA events) on bench/kernels.tc at bench/baselines.c's
#        shapes, and the same operations in PyTorch (cuBLAS, cuDNN) when python3 can import
#        torch with CUDA there (said so when it cannot).
# Nothing here is run by `make test`: CI has no GPU.
set -eu

cmd=${1:-}
case "$cmd" in
pack)
	build=${2:-build}
	rm -rf gpu-kit && mkdir -p gpu-kit/bin gpu-kit/lib
	for b in tcomp npygen tests/test_corpus tests/test_cuda_driver; do
		cp "$build/$b" gpu-kit/bin/
	done
	# every shared library the binaries load but the C library's own
	for f in $(ldd gpu-kit/bin/* | awk '/=>/ {print $3}' | sort -u); do
		case "$(basename "$f")" in
		libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) ;;
		*) cp -L "$f" gpu-kit/lib/ ;;
		esac
	done
	tar -C gpu-kit -cf - lib | xz -T2 -6 > gpu-kit/lib.tar.xz
	rm -rf gpu-kit/lib
	du -sh gpu-kit
	;;
run)
	out=${2:-${OUT:-.}}
	mkdir -p "$out"
	report="$out/gpu.md"
	kit=$(pwd)/gpu-kit
	[ -f "$kit/lib.tar.xz" ] || { echo "gpu.sh: no gpu-kit/ (run 'sh bench/gpu.sh pack' first)" >&2; exit 1; }
	[ -d "$kit/lib" ] || (cd "$kit" && xz -dc lib.tar.xz | tar -xf -)
	export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export TCOMP_CACHE="$kit/no-cache/kernels.sqlite"
	bin=$kit/bin
	{
		echo "# CUDA on $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo
		echo '```'
		nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>&1 || true
		echo '```'
		echo
		echo "## test_corpus gpu"
		echo
		echo '```'
		TC_SOURCE_DIR=$(pwd) "$bin/test_corpus" gpu 2>&1 | tail -40 || true
		echo '```'
		echo
		echo "## test_cuda_driver"
		echo
		echo '```'
		"$bin/test_cuda_driver" 2>&1 | tail -20 || true
		echo '```'
		echo
		echo "## tcomp bench --target cuda (CUDA events; JSON lines)"
		echo
		echo '```'
	} > "$report"
	while read -r name shapes; do
		set -- $shapes
		args=""
		for s in "$@"; do args="$args --shape $s"; done
		# shellcheck disable=SC2086
		"$bin/tcomp" bench bench/kernels.tc -e "$name" $args --target cuda --json --no-cache \
			--min-time 0.5 >> "$report" 2>&1 || echo "$name: failed" >> "$report"
	done <<'EOF'
matmul A=1024x1024 B=1024x1024
matmul_nt A=1024x1024 B=1024x1024
batch_matmul X=500x26x72 Y=500x72x26
conv2d I=8x64x56x56 W1=64x64x3x3 B=64
softmax I=4096x4096
layernorm X=4096x1024 G=1024 Bt=1024
group_conv I=32x32x16x14x14 W1=32x16x16x3x3 B=32x16
kronecker3 W0=16x16 W1=16x16 W2=16x16 X=256x16x16x16
mlp_fwd X=128x784 W1=784x128 B1=128 W2=128x10 B2=10
EOF
	echo '```' >> "$report"
	{
		echo
		echo "## PyTorch on the same device"
		echo
		if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
			echo '```'
			python3 - <<'PY'
import torch, time
def t(f, n=50):
    for _ in range(5): f()
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(n):
        s.record(); f(); e.record(); torch.cuda.synchronize(); ms.append(s.elapsed_time(e))
    ms.sort(); return ms[len(ms) // 2]
d = "cuda"
A = torch.randn(1024, 1024, device=d); B = torch.randn(1024, 1024, device=d)
print("matmul 1024 (cuBLAS) ms", t(lambda: A @ B))
X = torch.randn(500, 26, 72, device=d); Y = torch.randn(500, 72, 26, device=d)
print("batch_matmul 500x26x72 ms", t(lambda: torch.bmm(X, Y)))
I = torch.randn(8, 64, 56, 56, device=d); W = torch.randn(64, 64, 3, 3, device=d)
print("conv2d 8x64x56x56 3x3 (cuDNN) ms", t(lambda: torch.nn.functional.conv2d(I, W)))
S = torch.randn(4096, 4096, device=d)
print("softmax 4096x4096 ms", t(lambda: torch.softmax(S, 1)))
L = torch.randn(4096, 1024, device=d)
print("layernorm 4096x1024 ms", t(lambda: torch.nn.functional.layer_norm(L, (1024,))))
PY
			echo '```'
		else
			echo "python3 cannot import torch with CUDA on this machine: no PyTorch figures."
		fi
	} >> "$report"
	echo "gpu.sh: wrote $report"
	;;
*)
	echo "usage: sh bench/gpu.sh pack [BUILD] | run [OUT]" >&2
	exit 2
	;;
esac
