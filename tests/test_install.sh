#!/bin/sh
# The installed library: `cmake --install` into a fresh prefix, then build
# examples/host.c against that prefix only (pkg-config, no path into the source
# or build tree), linked with libtcomp.so and again with libtcomp.a
# (`pkg-config --static`), run both and check what they print.
#
#   sh tests/test_install.sh BUILD_DIR SOURCE_DIR [CC [PKG_CONFIG]]
#
# In a sanitizer build the installed tcomp.pc carries -fsanitize=... in Libs
# (the installed libraries need the sanitizer runtimes), so both programs are
# linked with them through pkg-config like any other user program would be.
set -u
BUILD=$1
SRC=$2
CC=${3:-cc}
PKG_CONFIG=${4:-pkg-config}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tcomp-install.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
# run NAME CMD...: run CMD with its output in $WORK/NAME.out, $WORK/NAME.err
run() {
	name=$1
	shift
	"$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
	st=$?
	if [ $st -ne 0 ]; then
		echo "[$name exited with $st: $*]"
		sed 's/^/  | /' "$WORK/$name.out" "$WORK/$name.err"
	fi
	return $st
}

echo "== cmake --install $BUILD --prefix $PREFIX"
if ! cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1; then
	cat "$WORK/install.log"
	echo "FAIL: cmake --install"
	exit 1
fi
PC=$(find "$PREFIX" -name tcomp.pc)
if [ -z "$PC" ]; then
	cat "$WORK/install.log"
	echo "FAIL: no tcomp.pc installed"
	exit 1
fi
PKG_CONFIG_PATH=$(dirname "$PC")
export PKG_CONFIG_PATH
echo "tcomp.pc: $PC"
sed -n '/^[A-Za-z.]*:/p' "$PC" | sed 's/^/  /'
LIBDIR=$($PKG_CONFIG --variable=libdir tcomp)
INCDIR=$($PKG_CONFIG --variable=includedir tcomp)
for f in "$LIBDIR/libtcomp.so" "$LIBDIR/libtcomp.a" "$INCDIR/tcomp.h" "$PREFIX/bin/tcomp"; do
	[ -e "$f" ] || fail "not installed: $f"
done
[ "$($PKG_CONFIG --modversion tcomp)" = "$(sed -n 's/^#define TCOMP_VERSION "\(.*\)"/\1/p' "$INCDIR/tcomp.h")" ] ||
	fail "tcomp.pc Version differs from TCOMP_VERSION in tcomp.h"
[ $fails -eq 0 ] || exit 1

echo "== libtcomp.so exports exactly the functions declared in tcomp.h"
# Declarations from the preprocessed header (comments gone), exports from the
# dynamic symbol table; names starting with _ belong to the toolchain.
printf '#include <tcomp.h>\n' >"$WORK/h.c"
$CC -E -P $($PKG_CONFIG --cflags tcomp) "$WORK/h.c" | grep -o 'tc_[A-Za-z0-9_]* *(' |
	sed 's/ *($//' | sort -u >"$WORK/declared"
nm -D --defined-only "$LIBDIR/libtcomp.so" | awk '{print $NF}' | grep -v '^_' | sort -u \
	>"$WORK/exported"
if [ ! -s "$WORK/declared" ]; then
	fail "found no declarations in tcomp.h"
elif ! cmp -s "$WORK/declared" "$WORK/exported"; then
	fail "exports differ from tcomp.h (< declared but not exported, > exported but not declared):"
	diff "$WORK/declared" "$WORK/exported" | grep '^[<>]' | sed 's/^/  /'
else
	echo "$(wc -l <"$WORK/declared") functions"
fi

echo "== libtcomp.so and the tcomp command call the same isl"
# libLLVM-19 exports the isl inside Polly (versioned LLVM_19.1); CMake's
# TCOMP_ISL picks it or libisl for every program and both libraries alike
# (a link line with LLVM before libisl once bound libtcomp.so alone to LLVM's)
isl_of() { objdump -T "$1" | awk '$NF == "isl_ctx_alloc" {print $(NF-1)}'; }
lib_isl=$(isl_of "$LIBDIR/libtcomp.so")
cmd_isl=$(isl_of "$PREFIX/bin/tcomp")
if [ -z "$lib_isl" ] || [ "$lib_isl" != "$cmd_isl" ]; then
	fail "libtcomp.so calls isl of '$lib_isl', the tcomp command of '$cmd_isl'"
elif [ "$lib_isl" = "Base" ] && ! readelf -d "$LIBDIR/libtcomp.so" | grep -q 'NEEDED.*\[libisl\.so'; then
	fail "libtcomp.so calls libisl but does not need it"
else
	echo "  isl_ctx_alloc: $lib_isl"
fi

# A user's copy of the example, outside the source tree.
cp "$SRC/examples/host.c" "$SRC/examples/matmul.tc" "$SRC/examples/softmax.tc" "$WORK/"
cd "$WORK" || exit 1

# check NAME BINARY: run it on a small shape and check the output.
check() {
	name=$1
	bin=$2
	if ! run "$name" "$bin" matmul.tc softmax.tc 5 7 3; then
		fail "$name: host failed"
		return
	fi
	cat "$WORK/$name.out"
	for want in 'host: M=5 K=7 N=3' '^  C float32\[5x3\]  sum=[-0-9.e+]* sumsq=[0-9.e+]*$' \
		'matmul matches the C loops' '^  O float32\[5x3\]  sum=5 sumsq=[0-9.e+]*$' \
		'softmax rows sum to 1' '^ok$'; do
		grep -q "$want" "$WORK/$name.out" || fail "$name: no line matching '$want'"
	done
	# An API error reaches the program as a message and a failing exit status.
	if "$bin" softmax.tc softmax.tc 2 2 2 >/dev/null 2>"$WORK/$name-bad.err"; then
		fail "$name: succeeded on a module without matmul"
	fi
	grep -q "tc_compile(matmul) failed: error: no def named 'matmul'" "$WORK/$name-bad.err" ||
		fail "$name: no tc_context_error message for a missing def: $(cat "$WORK/$name-bad.err")"
}

echo "== dynamic: $CC host.c \$(pkg-config --cflags --libs tcomp) -lm"
CFLAGS_TC=$($PKG_CONFIG --cflags tcomp)
LIBS_TC=$($PKG_CONFIG --libs tcomp)
echo "  pkg-config: $CFLAGS_TC $LIBS_TC"
if run cc-dynamic $CC -o host-dynamic host.c $CFLAGS_TC $LIBS_TC -lm; then
	# libtcomp.so must come from the prefix, found without LD_LIBRARY_PATH.
	so=$(env -u LD_LIBRARY_PATH ldd ./host-dynamic | awk '/libtcomp\.so/ {print $3}')
	case $so in
	"$LIBDIR"/*) echo "  libtcomp.so: $so" ;;
	*) fail "host-dynamic does not load libtcomp.so from $LIBDIR: '$so'" ;;
	esac
	check dynamic ./host-dynamic
else
	fail "dynamic: compiling against the installed tree"
fi

echo "== static: $CC host.c \$(pkg-config --cflags tcomp) \$(pkg-config --static --libs tcomp, -ltcomp as -l:libtcomp.a) -lm"
# -l:libtcomp.a: -ltcomp would pick libtcomp.so, which is installed alongside.
LIBS_TC=$(echo " $($PKG_CONFIG --static --libs tcomp) " | sed 's/ -ltcomp / -l:libtcomp.a /')
echo "  pkg-config: $CFLAGS_TC $LIBS_TC"
if run cc-static $CC -o host-static host.c $CFLAGS_TC $LIBS_TC -lm; then
	if readelf -d host-static | grep -q 'NEEDED.*libtcomp'; then
		fail "host-static depends on libtcomp.so"
	fi
	check static ./host-static
	# Same library code, same numbers.
	if [ -s "$WORK/dynamic.out" ] && ! cmp -s "$WORK/dynamic.out" "$WORK/static.out"; then
		fail "static and dynamic programs print different results"
	fi
else
	fail "static: compiling against the installed tree"
fi

# The program built in the build tree (libtcomp.so of the build) agrees too.
if [ -x "$BUILD/host" ] && [ -s "$WORK/dynamic.out" ]; then
	if run build-host "$BUILD/host" matmul.tc softmax.tc 5 7 3 &&
		cmp -s "$WORK/dynamic.out" "$WORK/build-host.out"; then
		echo "== the build tree's host prints the same"
	else
		fail "the build tree's host prints something else"
	fi
fi

echo "== CMake: find_package(tcomp) in a consumer project"
# Only the prefix is known to the consumer (CMAKE_PREFIX_PATH); it asks for
# this version, links the shared and the static imported target, and gets
# the same numbers.  A version this tcomp is not compatible with is refused.
VERSION=$(sed -n 's/^#define TCOMP_VERSION "\(.*\)"/\1/p' "$INCDIR/tcomp.h")
mkdir -p "$WORK/consumer"
{
	echo 'cmake_minimum_required(VERSION 3.20)'
	echo 'project(consumer C)'
	echo 'find_package(tcomp ${WANT} REQUIRED CONFIG)'
	echo 'message(STATUS "found tcomp ${tcomp_VERSION}")'
	echo 'add_executable(host-cmake ${CMAKE_SOURCE_DIR}/../host.c)'
	echo 'target_link_libraries(host-cmake PRIVATE tcomp::tcomp m)'
	echo 'add_executable(host-cmake-static ${CMAKE_SOURCE_DIR}/../host.c)'
	echo 'target_link_libraries(host-cmake-static PRIVATE tcomp::tcomp_static m)'
} >"$WORK/consumer/CMakeLists.txt"
if run cmake-configure cmake -S "$WORK/consumer" -B "$WORK/consumer/build" \
	-DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_COMPILER="$CC" -DWANT="$VERSION" &&
	run cmake-build cmake --build "$WORK/consumer/build"; then
	grep -q "found tcomp $VERSION" "$WORK/cmake-configure.out" ||
		fail "find_package(tcomp) did not report version $VERSION"
	if readelf -d "$WORK/consumer/build/host-cmake-static" | grep -q 'NEEDED.*libtcomp'; then
		fail "host-cmake-static depends on libtcomp.so"
	fi
	check cmake-dynamic "$WORK/consumer/build/host-cmake"
	check cmake-static "$WORK/consumer/build/host-cmake-static"
	for o in cmake-dynamic cmake-static; do
		if [ -s "$WORK/dynamic.out" ] && ! cmp -s "$WORK/dynamic.out" "$WORK/$o.out"; then
			fail "$o prints something else than the pkg-config program"
		fi
	done
else
	fail "CMake consumer: configuring or building against the installed package"
fi
if cmake -S "$WORK/consumer" -B "$WORK/consumer/build99" -DCMAKE_PREFIX_PATH="$PREFIX" \
	-DCMAKE_C_COMPILER="$CC" -DWANT=99.0 >"$WORK/cmake99.log" 2>&1; then
	fail "find_package(tcomp 99.0) accepted tcomp $VERSION"
fi

echo "== one version number: tcomp.h, tcomp.pc, the soname, tcomp --version, README"
MAJMIN=$(echo "$VERSION" | sed 's/^\([0-9]*\.[0-9]*\)\..*/\1/')
SONAME=$(readelf -d "$LIBDIR/libtcomp.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$SONAME" = "libtcomp.so.$MAJMIN" ] || fail "soname '$SONAME' is not libtcomp.so.$MAJMIN"
[ -e "$LIBDIR/libtcomp.so.$VERSION" ] || fail "no $LIBDIR/libtcomp.so.$VERSION"
[ "$("$PREFIX/bin/tcomp" --version)" = "tcomp $VERSION" ] ||
	fail "tcomp --version says '$("$PREFIX/bin/tcomp" --version)', not 'tcomp $VERSION'"
grep -q "release $MAJMIN)" "$SRC/README.md" || fail "README.md does not say release $MAJMIN"
echo "  $VERSION (soname $SONAME)"

echo "== the installed npygen and tcomp run (docs/language.md's example)"
if run npygen-a "$PREFIX/bin/npygen" a.npy float32 3x4 --seed 1 &&
	run npygen-b "$PREFIX/bin/npygen" b.npy float32 4x5 --seed 2 &&
	run cli-run "$PREFIX/bin/tcomp" run matmul.tc -e matmul --in A=a.npy --in B=b.npy; then
	grep -q 'C: float32\[3x5\]' "$WORK/cli-run.out" || fail "tcomp run: no C float32[3x5]"
else
	fail "installed npygen or tcomp run"
fi

echo "== the installed tcomp command"
if run cli "$PREFIX/bin/tcomp" check matmul.tc; then
	sed 's/^/  /' "$WORK/cli.out"
	grep -q '^def matmul(' "$WORK/cli.out" || fail "tcomp check: no signature of matmul"
else
	fail "installed tcomp check"
fi

if [ $fails -ne 0 ]; then
	echo "$fails failure(s)"
	exit 1
fi
echo "PASS"
