#!/bin/sh
# make demo: check the example kernels, then run a few of them end to end on
# random .npy inputs through the tcomp command, from a host C program
# through the C API (examples/host.c), and from Python (examples/python_demo.py).
set -e
BUILD=${1:-build}
TCOMP="$BUILD/tcomp"
NPYGEN="$BUILD/npygen"
EX=$(dirname "$0")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tcomp-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

if [ -t 1 ]; then B='\033[1m' E='\033[0m'; else B='' E=''; fi
step() { printf "\n${B}\$ %s${E}\n" "$*"; "$@"; }

echo "== tcomp demo: check the examples (signatures with inferred output shapes)"
step "$TCOMP" check "$EX/matmul.tc" "$EX/conv2d.tc" "$EX/softmax.tc" "$EX/mlp.tc"

echo
echo "== make random inputs (NumPy .npy files)"
"$NPYGEN" "$WORK/a.npy" float32 3x4 --seed 1
"$NPYGEN" "$WORK/b.npy" float32 4x5 --seed 2
"$NPYGEN" "$WORK/x.npy" float32 2x6 --seed 3
"$NPYGEN" "$WORK/img.npy" float32 1x2x6x6 --seed 4
"$NPYGEN" "$WORK/w.npy" float32 3x2x3x3 --seed 5
"$NPYGEN" "$WORK/bias.npy" float32 3 --seed 6
"$NPYGEN" "$WORK/fw.npy" float32 4x6 --seed 7
"$NPYGEN" "$WORK/fb.npy" float32 4 --seed 8
ls "$WORK"

echo
echo "== run them"
step "$TCOMP" run "$EX/matmul.tc" -e matmul --in A="$WORK/a.npy" --in B="$WORK/b.npy" \
	--out C="$WORK/c.npy" --print
step "$TCOMP" run "$EX/softmax.tc" -e softmax --in I="$WORK/x.npy" --print
step "$TCOMP" run "$EX/conv2d.tc" -e conv2d --in I="$WORK/img.npy" --in W1="$WORK/w.npy" \
	--in B="$WORK/bias.npy"
step "$TCOMP" run "$EX/mlp.tc" -e fc_relu --in I="$WORK/x.npy" --in W1="$WORK/fw.npy" \
	--in Bias="$WORK/fb.npy" --print

echo
echo "== a host C program on the C API (examples/host.c, linked with libtcomp.so):"
echo "   compile matmul and softmax for the shapes given, run them, check against C loops"
step "$BUILD/host" "$EX/matmul.tc" "$EX/softmax.tc" 64 32 48
step "$BUILD/host" "$EX/matmul.tc" "$EX/softmax.tc" 3 300 7

echo
echo "== from Python: the tcomp package (tools/python) on NumPy arrays and torch tensors,"
echo "   the gradient derived by tcomp checked against PyTorch's (examples/python_demo.py)"
step env PYTHONPATH="$EX/../tools/python" TCOMP_LIBRARY="$BUILD/libtcomp.so" \
	/usr/bin/python3 "$EX/python_demo.py"

echo
echo "== what the compiler does with matmul: the tensor IR, then the loop nest isl"
echo "   generates for 64x32 times 32x48, as the C equivalent of the code LLVM"
echo "   compiles (--stage llvm and --stage asm show that code itself)"
step "$TCOMP" emit "$EX/matmul.tc" -e matmul --stage ir
step "$TCOMP" emit "$EX/matmul.tc" -e matmul --stage c --shape A=64x32 --shape B=32x48

echo
echo "== errors: inputs whose sizes disagree, and a kernel with a mistake"
if "$TCOMP" run "$EX/matmul.tc" -e matmul --in A="$WORK/a.npy" --in B="$WORK/a.npy"; then
	echo "expected an error" >&2
	exit 1
fi
cat > "$WORK/bad.tc" <<'TC'
def mm(float(M,K) A, float(K,N) B) -> (C) {
  C(m,n) +=! A(m,k) * B(k,n,1)
}
TC
if "$TCOMP" check "$WORK/bad.tc"; then
	echo "expected an error" >&2
	exit 1
fi
echo
echo "demo done"
