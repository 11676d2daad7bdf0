/* End-to-end tests of the tcomp command: .npy files in and out, exit codes,
 * messages and --help.  Inputs are written with tools/npy.c, the command is
 * run as a separate process, and its outputs are read back and compared
 * with plain C loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/half.h"
#include "npy.h"

static char dir[256];
static char out_text[65536];

static const char *path(const char *name)
{
	static char buf[8][512];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

/* Run "tcomp ARGS" (a shell fragment); return its exit status and leave
 * stdout+stderr in out_text. */
static int tcomp(const char *fmt, ...)
{
	char cmd[8192], args[4096];
	va_list ap;
	FILE *fp;
	size_t n;
	int st;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "cd %s && %s/tcomp %s > out.txt 2>&1", dir, TC_BINARY_DIR,
		args);
	st = system(cmd);
	fp = fopen(path("out.txt"), "rb");
	n = fp ? fread(out_text, 1, sizeof(out_text) - 1, fp) : 0;
	out_text[n] = 0;
	if (fp)
		fclose(fp);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_text(const char *name, const char *text)
{
	FILE *fp = fopen(path(name), "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static void write_npy(const char *name, tc_dtype t, int ndim, const int64_t *shape,
	const void *data)
{
	char *err = NULL;
	if (tc_npy_write(path(name), t, ndim, shape, data, &err) < 0)
		fail_msg("%s", err);
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) % 2000001) / 1000000.0f - 1.0f;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "%s/tmp-cli-XXXXXX", TC_BINARY_DIR);
	if (!mkdtemp(dir))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void matmul_matches_loops(void **state)
{
	enum { M = 7, K = 13, N = 5 };
	float a[M * K], b[K * N];
	int64_t sa[2] = {M, K}, sb[2] = {K, N};
	tc_npy c;
	char *err = NULL;
	int i, j, k;
	(void)state;
	for (i = 0; i < M * K; i++)
		a[i] = frand();
	for (i = 0; i < K * N; i++)
		b[i] = frand();
	write_npy("a.npy", TC_T_F32, 2, sa, a);
	write_npy("b.npy", TC_T_F32, 2, sb, b);
	write_text("mm.tc", "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			    "  C(m,n) +=! A(m,r) * B(r,n)\n}\n");
	assert_int_equal(tcomp("run mm.tc --in A=a.npy --in B=b.npy --out C=c.npy"), 0);
	assert_non_null(strstr(out_text, "C: float32[7x5] -> c.npy"));
	assert_int_equal(tc_npy_read(path("c.npy"), &c, &err), 0);
	assert_int_equal(c.dtype, TC_T_F32);
	assert_int_equal(c.ndim, 2);
	assert_int_equal(c.shape[0], M);
	assert_int_equal(c.shape[1], N);
	for (i = 0; i < M; i++)
		for (j = 0; j < N; j++) {
			float s = 0; /* same order as the interpreter: float accumulation */
			for (k = 0; k < K; k++)
				s += a[i * K + k] * b[k * N + j];
			assert_float_equal(((float *)c.data)[i * N + j], s, 1e-5f * (1 + fabsf(s)));
		}
	tc_npy_free(&c);
}

/* Every dtype survives .npy in -> copy kernel -> .npy out bit for bit. */
static void every_dtype_round_trips(void **state)
{
	static const char *const names[] = {"bool", "int8", "int16", "int32", "int64", "uint8",
		"uint16", "uint32", "uint64", "float16", "float32", "float64", "bfloat16"};
	unsigned char data[6 * 8];
	int64_t shape[2] = {2, 3};
	size_t t;
	(void)state;
	for (t = 0; t < sizeof(names) / sizeof(names[0]); t++) {
		tc_dtype dt = tc_dtype_from_name(names[t], (int)strlen(names[t]));
		char src[256], *err = NULL;
		tc_npy o;
		size_t i, sz = (size_t)tc_dtype_size(dt);
		for (i = 0; i < sizeof(data); i++)
			data[i] = (unsigned char)(37 * i + 11 * t + 1);
		if (dt == TC_T_BOOL)
			for (i = 0; i < 6; i++)
				data[i] = (unsigned char)(i % 2);
		if (dt == TC_T_F16) /* finite halves only, so bits compare exactly */
			for (i = 0; i < 6; i++)
				((uint16_t *)data)[i] = tc_half_from_double(0.25 * (double)i - 0.6);
		if (dt == TC_T_BF16) /* finite and not NaN, so bits compare exactly */
			for (i = 0; i < 6; i++)
				((uint16_t *)data)[i] = tc_bf16_from_double(frand());
		if (dt == TC_T_F32)
			for (i = 0; i < 6; i++)
				((float *)data)[i] = frand();
		if (dt == TC_T_F64)
			for (i = 0; i < 6; i++)
				((double *)data)[i] = frand();
		snprintf(src, sizeof(src), "def copy(%s(N,M) A) -> (O) { O(i,j) = A(i,j) }\n",
			names[t]);
		write_text("copy.tc", src);
		write_npy("in.npy", dt, 2, shape, data);
		assert_int_equal(tcomp("run copy.tc --in A=in.npy --out O=o.npy"), 0);
		assert_int_equal(tc_npy_read(path("o.npy"), &o, &err), 0);
		assert_int_equal(o.dtype, dt);
		assert_memory_equal(o.data, data, 6 * sz);
		tc_npy_free(&o);
	}
}

static void bad_npy_inputs_are_clear_errors(void **state)
{
	double d[6] = {1, 2, 3, 4, 5, 6};
	float f[6] = {1, 2, 3, 4, 5, 6};
	int64_t s2[2] = {2, 3}, s3[3] = {1, 2, 3};
	FILE *fp;
	char hdr[128];
	int n;
	(void)state;
	write_text("k.tc", "def k(float(N,M) A) -> (O) { O(i,j) = A(i,j) * 2 }\n");
	write_npy("f64.npy", TC_T_F64, 2, s2, d);
	assert_int_equal(tcomp("run k.tc --in A=f64.npy"), 1);
	assert_non_null(strstr(out_text, "must have dtype float32"));
	assert_non_null(strstr(out_text, "has float64"));
	write_npy("r3.npy", TC_T_F32, 3, s3, f);
	assert_int_equal(tcomp("run k.tc --in A=r3.npy"), 1);
	assert_non_null(strstr(out_text, "must have rank 2"));
	/* a Fortran-order 2x3 array, written by hand */
	fp = fopen(path("fortran.npy"), "wb");
	assert_non_null(fp);
	n = snprintf(hdr, sizeof(hdr),
		"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }");
	while ((10 + n + 1) % 64)
		hdr[n++] = ' ';
	hdr[n++] = '\n';
	fwrite("\x93NUMPY\x01\x00", 1, 8, fp);
	fputc(n & 0xff, fp);
	fputc(n >> 8, fp);
	fwrite(hdr, 1, (size_t)n, fp);
	fwrite(f, sizeof(float), 6, fp);
	fclose(fp);
	assert_int_equal(tcomp("run k.tc --in A=fortran.npy"), 1);
	assert_non_null(strstr(out_text, "Fortran order"));
	/* truncated: the header says 6 floats, 2 follow */
	write_npy("full.npy", TC_T_F32, 2, s2, f);
	assert_int_equal(truncate(path("full.npy"), 128 + 8), 0);
	assert_int_equal(tcomp("run k.tc --in A=full.npy"), 1);
	assert_non_null(strstr(out_text, "truncated"));
	assert_int_equal(tcomp("run k.tc --in A=missing.npy"), 1);
	assert_non_null(strstr(out_text, "missing.npy"));
}

static void bad_arguments_are_clear_errors(void **state)
{
	float f[6] = {1, 2, 3, 4, 5, 6};
	int64_t s2[2] = {2, 3};
	(void)state;
	write_text("k.tc", "def k(float(N,M) A) -> (O) { O(i,j) = A(i,j) * 2 }\n"
			   "def k2(float(N) A) -> (O) { O(i) = A(i) }\n");
	write_npy("a.npy", TC_T_F32, 2, s2, f);
	assert_int_equal(tcomp("run k.tc --in A=a.npy"), 1);
	assert_non_null(strstr(out_text, "several defs"));
	assert_int_equal(tcomp("run k.tc -e nope --in A=a.npy"), 1);
	assert_non_null(strstr(out_text, "no def named 'nope'"));
	assert_int_equal(tcomp("run k.tc -e k"), 1);
	assert_non_null(strstr(out_text, "no --in for input 'A'"));
	assert_int_equal(tcomp("run k.tc -e k --in A=a.npy --in Z=a.npy"), 1);
	assert_non_null(strstr(out_text, "'Z' is not an input"));
	assert_int_equal(tcomp("run k.tc -e k --in A=a.npy --out Q=q.npy"), 1);
	assert_non_null(strstr(out_text, "'Q' is not an output"));
	assert_int_equal(tcomp("run k.tc -e k --in A=a.npy --in A=a.npy"), 1);
	assert_non_null(strstr(out_text, "tensor 'A' is given twice"));
	assert_int_equal(tcomp("run k.tc -e k --in A"), 1);
	assert_non_null(strstr(out_text, "expected TENSOR=FILE"));
	assert_int_equal(tcomp("run k.tc -e k --in A=a.npy --target gpu"), 1);
	assert_non_null(strstr(out_text, "cannot be 'gpu'"));
	assert_int_equal(tcomp("run k.tc -e k --in A=a.npy --bogus"), 1);
	assert_non_null(strstr(out_text, "tcomp: error: unknown option '--bogus'"));
	assert_int_equal(tcomp("frobnicate"), 1);
	assert_non_null(strstr(out_text, "unknown command"));
	assert_int_equal(tcomp(""), 1);
	assert_int_equal(tcomp("emit k.tc -e k --stage nonsense"), 1);
	assert_non_null(strstr(out_text, "unknown stage 'nonsense'"));
}

/* getopt_long: --name=value as well as --name value, -eNAME, options after
 * the operands; errors in one format ("tcomp: error: ..."), exit status 1;
 * a file of several defs without -e lists them. */
static void long_options_and_one_error_format(void **state)
{
	float a[6];
	int64_t s2[2] = {2, 3};
	tc_npy o;
	char *err = NULL;
	int i;
	static const char *const bad[] = {
		"run k.tc --entry=k --in=A=a.npy --bogus=1",
		"run k.tc -e k --in A=a.npy --print=yes",
		"run k.tc -e k --in A=a.npy -q",
		"run k.tc -e k --in",
		"bench k.tc -e k --shape=A=2x3 --runs=0",
		"emit k.tc -e k --stage",
		"check --frob k.tc",
		"cache list --failed",
		"cache export -o",
		"autotune k.tc -e k --shape A=2x3 --generations=none",
		"options --verbose",
		"run k.tc -e nope --in A=a.npy",
		"cache",
		"",
	};
	(void)state;
	for (i = 0; i < 6; i++)
		a[i] = frand();
	write_text("k.tc", "def k(float(N,M) A) -> (O) { O(i,j) = A(i,j) * 2 }\n"
			   "def k2(float(N) A) -> (O) { O(i) = A(i) }\n");
	write_npy("a.npy", TC_T_F32, 2, s2, a);
	assert_int_equal(tcomp("run --entry=k --in=A=a.npy --out=O=o.npy k.tc"), 0);
	assert_int_equal(tc_npy_read(path("o.npy"), &o, &err), 0);
	for (i = 0; i < 6; i++)
		assert_true(((float *)o.data)[i] == 2 * a[i]);
	tc_npy_free(&o);
	remove(path("o.npy"));
	assert_int_equal(tcomp("run k.tc -ek --in A=a.npy --out O=o.npy --target=interp"), 0);
	assert_int_equal(tc_npy_read(path("o.npy"), &o, &err), 0);
	for (i = 0; i < 6; i++)
		assert_true(((float *)o.data)[i] == 2 * a[i]);
	tc_npy_free(&o);
	assert_int_equal(tcomp("emit k.tc --entry=k --stage=ir"), 0);
	assert_non_null(strstr(out_text, "O"));
	for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
		assert_int_equal(tcomp("%s", bad[i]), 1);
		if (strncmp(out_text, "tcomp: error: ", 14))
			fail_msg("'%s' printed: %s", bad[i], out_text);
	}
	assert_int_equal(tcomp("run k.tc -e k --in A=a.npy --print=yes"), 1);
	assert_non_null(strstr(out_text, "option '--print=yes' takes no value"));
	assert_int_equal(tcomp("bench k.tc -e k --shape=A=2x3 --runs=0"), 1);
	assert_non_null(strstr(out_text, "--runs needs an integer of at least 1 but found '0'"));
	assert_int_equal(tcomp("run k.tc -e k --in A=a.npy -q"), 1);
	assert_non_null(strstr(out_text, "unknown option '-q'"));
	assert_int_equal(tcomp("run k.tc --in A=a.npy"), 1);
	assert_non_null(strstr(out_text, "tcomp: error: 'k.tc' has several defs: choose one with "
					 "-e NAME: k, k2"));
}

static void help_for_each_command(void **state)
{
	static const char *const cmds[] = {"--help", "check --help", "run --help",
		"emit --help", "run -h"};
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		assert_int_equal(tcomp("%s", cmds[i]), 0);
		assert_non_null(strstr(out_text, "usage: tcomp"));
	}
	assert_int_equal(tcomp("--version"), 0);
	assert_non_null(strstr(out_text, "tcomp 0."));
	assert_int_equal(tcomp("options"), 0);
	assert_non_null(strstr(out_text, "target"));
}

static void check_prints_signatures_and_located_errors(void **state)
{
	(void)state;
	write_text("ok.tc", "def conv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {\n"
			    "  O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw)\n}\n");
	assert_int_equal(tcomp("check ok.tc"), 0);
	assert_non_null(strstr(out_text,
		"def conv(float32(N,C,H,W) I, float32(F,C,KH,KW) Wt) -> (float32(N,F,H - KH + 1,W - KW + 1) O)"));
	write_text("bad.tc", "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			     "  C(m,n) +=! A(m,k) * B(k,n,1)\n}\n");
	assert_int_equal(tcomp("check bad.tc"), 1);
	assert_string_equal(out_text,
		"bad.tc:2:23: error: expected 2 indices for 'B' (declared float32(K,N)) but found 3\n"
		"    C(m,n) +=! A(m,k) * B(k,n,1)\n"
		"                        ^~~~~~~~\n");
	/* several files: the good one still prints, the status is 1 */
	assert_int_equal(tcomp("check ok.tc bad.tc"), 1);
	assert_non_null(strstr(out_text, "def conv("));
	assert_int_equal(tcomp("check nothere.tc"), 1);
	assert_non_null(strstr(out_text, "cannot open 'nothere.tc'"));
}

static void emit_stages(void **state)
{
	(void)state;
	write_text("mm.tc", "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			    "  C(m,n) +=! A(m,r) * B(r,n)\n}\n");
	assert_int_equal(tcomp("emit mm.tc --stage syntax"), 0);
	assert_non_null(strstr(out_text, "Stmt C(m,n) +=!"));
	assert_int_equal(tcomp("emit mm.tc --stage ir"), 0);
	assert_non_null(strstr(out_text,
		"domain: [M, K, N] -> { S0[m, n, r] : 0 <= m < M and 0 <= n < N and 0 <= r < K }"));
	assert_int_equal(tcomp("emit mm.tc --stage canonical"), 0);
	assert_non_null(strstr(out_text, "v5(v6,v7) +=! v2(v6, v8) * v4(v8, v7)"));
	assert_non_null(strstr(out_text, "# hash "));
}

/* --stage schedule:PASS: the passes the help lists are the library's (an
 * unknown name is an error that lists them), in the same order, and each
 * gives a schedule. */
static void emit_schedule_after_pass(void **state)
{
	char listed[512], help[1024], *p, *q, name[64];
	size_t n;
	(void)state;
	write_text("mm.tc", "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			    "  C(m,n) +=! A(m,r) * B(r,n)\n}\n");
	assert_int_equal(tcomp("emit mm.tc --stage schedule:nonsense"), 1);
	p = strstr(out_text, "schedule pass (");
	assert_non_null(p);
	p += strlen("schedule pass (");
	q = strchr(p, ')');
	assert_non_null(q);
	snprintf(listed, sizeof(listed), "%.*s", (int)(q - p), p);
	assert_int_equal(tcomp("emit --help"), 0);
	p = strstr(out_text, "schedule:PASS");
	assert_non_null(p);
	p = strstr(p, "order: ");
	assert_non_null(p);
	p += strlen("order: ");
	q = strstr(p, " (polyhedral");
	assert_non_null(q);
	/* the help's list without its line breaks and indentation */
	for (n = 0; p < q && n + 1 < sizeof(help); p++)
		if (*p != '\n' && !(*p == ' ' && n && help[n - 1] == ' '))
			help[n++] = *p;
	help[n] = 0;
	assert_string_equal(help, listed);
	for (p = listed; *p; p = *q ? q + 2 : q) {
		q = strchr(p, ',');
		q = q ? q : p + strlen(p);
		snprintf(name, sizeof(name), "%.*s", (int)(q - p), p);
		assert_int_equal(tcomp("emit mm.tc --stage schedule:%s --shape A=8x4 --shape B=4x16",
					 name), 0);
		assert_non_null(strstr(out_text, "domain"));
	}
	assert_int_equal(tcomp("emit mm.tc --stage schedule:all"), 0);
	assert_non_null(strstr(out_text, "# after scheduler\n"));
	assert_non_null(strstr(out_text, "# after rowbuf\n"));
}

/* A gather with an index out of range is a run-time error with a location. */
static void gather_out_of_bounds_is_located(void **state)
{
	int32_t idx[4] = {0, 2, 9, 1};
	float lut[3 * 2] = {1, 2, 3, 4, 5, 6};
	int64_t si[2] = {2, 2}, sl[2] = {3, 2};
	(void)state;
	write_text("emb.tc", "def emb(float(R,D) LUT, int32(B,L) I) -> (O) {\n"
			     "  O(i,j) +=! LUT(I(i,k), j)\n}\n");
	write_npy("lut.npy", TC_T_F32, 2, sl, lut);
	write_npy("idx.npy", TC_T_I32, 2, si, idx);
	assert_int_equal(tcomp("run emb.tc --in LUT=lut.npy --in I=idx.npy"), 1);
	assert_non_null(strstr(out_text, "emb.tc:2:14: error: index 9 is out of bounds for dimension 0 of 'LUT' (extent 3)"));
}

/* --options FILE and --option NAME=VALUE on run and emit. */
static void options_on_run_and_emit(void **state)
{
	float a[6] = {1, 2, 3, 4, 5, 6};
	int64_t s2[2] = {2, 3};
	tc_npy o;
	char *err = NULL;
	int i;
	(void)state;
	write_text("k.tc", "def k(float(N,M) A) -> (O) { O(i,j) = A(i,j) * 2 }\n");
	write_npy("a.npy", TC_T_F32, 2, s2, a);
	write_text("interp.opts", "# run in the interpreter\ntarget = interp ; # comment\n");
	write_text("cpu.opts", "target=cpu\n");
	write_text("bad.opts", "target=cpu\n\nbogus=3\n");
	write_text("badval.opts", "# x\ntarget=gpu\n");
	/* each way of giving options runs and gives the same result */
	assert_int_equal(tcomp("run k.tc --in A=a.npy --out O=o.npy --options interp.opts"), 0);
	assert_int_equal(tcomp("run k.tc --in A=a.npy --out O=o.npy --option target=interp"), 0);
	assert_int_equal(tcomp("run k.tc --in A=a.npy --out O=o.npy --options cpu.opts "
			       "--option target=interp --print"),
		0);
	assert_non_null(strstr(out_text, "O: float32[2x3] -> o.npy"));
	assert_int_equal(tc_npy_read(path("o.npy"), &o, &err), 0);
	for (i = 0; i < 6; i++)
		assert_float_equal(((float *)o.data)[i], 2 * a[i], 0);
	tc_npy_free(&o);
	/* errors: the file and line, the option, exit status 1 */
	assert_int_equal(tcomp("run k.tc --in A=a.npy --options bad.opts"), 1);
	assert_non_null(strstr(out_text,
		"tcomp: error: bad.opts: line 3: unknown option 'bogus' (options: target"));
	assert_int_equal(tcomp("run k.tc --in A=a.npy --options badval.opts"), 1);
	assert_non_null(strstr(out_text,
		"tcomp: error: badval.opts: line 2: option 'target' cannot be 'gpu' (allowed: cpu|interp|cuda|cuda-emu)"));
	assert_int_equal(tcomp("run k.tc --in A=a.npy --options missing.opts"), 1);
	assert_non_null(strstr(out_text, "cannot read options file 'missing.opts'"));
	assert_int_equal(tcomp("run k.tc --in A=a.npy --option bogus=1"), 1);
	assert_non_null(strstr(out_text, "tcomp: error: unknown option 'bogus'"));
	assert_int_equal(tcomp("run k.tc --in A=a.npy --option target=gpu"), 1);
	assert_non_null(strstr(out_text, "option 'target' cannot be 'gpu'"));
	assert_int_equal(tcomp("run k.tc --in A=a.npy --option target"), 1);
	assert_non_null(strstr(out_text, "expected NAME=VALUE after --option but found 'target'"));
	assert_int_equal(tcomp("run k.tc --in A=a.npy --option"), 1);
	assert_non_null(strstr(out_text, "tcomp: error: option '--option' needs a value"));
	/* --option is applied after --options, whatever the order on the line */
	assert_int_equal(tcomp("run k.tc --in A=a.npy --option target=interp --options bad.opts"), 1);
	assert_non_null(strstr(out_text, "bad.opts: line 3"));

	/* emit: options apply to a kernel compiled for shapes */
	assert_int_equal(tcomp("emit k.tc --stage ast --shape A=4x5 --option target=cpu"), 0);
	assert_non_null(strstr(out_text, "for ("));
	assert_int_equal(tcomp("emit k.tc --stage c --shape A=4x5 --options interp.opts"), 0);
	assert_non_null(strstr(out_text, "for ("));
	assert_int_equal(tcomp("emit k.tc --stage llvm --shape A=4x5 --options cpu.opts "
			       "--option target=cpu"),
		0);
	assert_non_null(strstr(out_text, "define"));
	assert_int_equal(tcomp("emit k.tc --stage ast --shape A=4x5 --options bad.opts"), 1);
	assert_non_null(strstr(out_text, "bad.opts: line 3: unknown option 'bogus'"));
	assert_int_equal(tcomp("emit k.tc --stage ast --shape A=4x5 --option target=gpu"), 1);
	assert_non_null(strstr(out_text, "cannot be 'gpu'"));
	assert_int_equal(tcomp("emit k.tc --stage ast --option target=cpu"), 1);
	assert_non_null(strstr(out_text, "give --shape for every input"));
	/* tcomp options: the table, and its help */
	assert_int_equal(tcomp("options"), 0);
	assert_non_null(strstr(out_text, "target"));
	assert_non_null(strstr(out_text, "cpu|interp"));
	assert_non_null(strstr(out_text, "default cpu"));
	assert_int_equal(tcomp("options --help"), 0);
	assert_non_null(strstr(out_text, "usage: tcomp options"));
	assert_int_equal(tcomp("options extra"), 1);
}

/* The value of "key": in a one-line JSON object, as text up to the next
 * ',' or '}' outside strings (enough for numbers and simple strings). */
static const char *json_value(const char *json, const char *key, char *buf, size_t n)
{
	char pat[64];
	const char *p, *e;
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	if (*p == '"')
		e = strchr(p + 1, '"') + 1;
	else
		for (e = p; *e && *e != ',' && *e != '}'; e++)
			;
	snprintf(buf, n, "%.*s", (int)(e - p), p);
	return buf;
}

/* --threads N sets the threads of parallel loops: the results do not depend
 * on it (each row of the output is one iteration of the parallel loop, whole
 * on one thread), and a bad count is refused. */
static void threads_option(void **state)
{
	float a[6 * 5], b[5 * 7];
	int64_t sa[2] = {6, 5}, sb[2] = {5, 7};
	tc_npy c1, c2;
	char *err = NULL;
	int i;
	(void)state;
	for (i = 0; i < 30; i++)
		a[i] = frand();
	for (i = 0; i < 35; i++)
		b[i] = frand();
	write_npy("ta.npy", TC_T_F32, 2, sa, a);
	write_npy("tb.npy", TC_T_F32, 2, sb, b);
	write_text("tm.tc", "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			    "  C(m,n) +=! A(m,r) * B(r,n)\n}\n");
	assert_int_equal(tcomp("run tm.tc --in A=ta.npy --in B=tb.npy --out C=t1.npy --threads 1"), 0);
	assert_int_equal(tcomp("run tm.tc --in A=ta.npy --in B=tb.npy --out C=t2.npy --threads 2"), 0);
	assert_int_equal(tc_npy_read(path("t1.npy"), &c1, &err), 0);
	assert_int_equal(tc_npy_read(path("t2.npy"), &c2, &err), 0);
	assert_memory_equal(c1.data, c2.data, c1.nbytes);
	tc_npy_free(&c1);
	tc_npy_free(&c2);
	assert_int_equal(tcomp("run tm.tc --in A=ta.npy --in B=tb.npy --threads 0"), 1);
	assert_non_null(strstr(out_text, "option 'threads' cannot be '0'"));
	assert_int_equal(tcomp("bench tm.tc --shape A=6x5 --shape B=5x7 --runs 2 --min-time 0 "
			       "--threads 2 --json"), 0);
	assert_non_null(strstr(out_text, "threads=2"));
}

static void bench_matmul(void **state)
{
	static char line[sizeof(out_text)];
	char v[512];
	size_t n;
	(void)state;
	write_text("mm.tc", "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			    "  C(m,n) +=! A(m,r) * B(r,n)\n}\n");
	assert_int_equal(tcomp("bench mm.tc --shape A=64x64 --shape B=64x64 --runs 3 "
			       "--min-time 0.05"),
		0);
	assert_non_null(strstr(out_text, "kernel   mm (A=64x64 B=64x64)"));
	assert_non_null(strstr(out_text, "compile  "));
	assert_non_null(strstr(out_text, "median "));
	assert_non_null(strstr(out_text, " min "));
	assert_non_null(strstr(out_text, "GFLOP/s (524288 flop per run)")); /* 2 x 64^3 */
	assert_non_null(strstr(out_text, "GB/s (49152 bytes of inputs and outputs per run)"));
	assert_non_null(strstr(out_text, "options  target=cpu;order=on;contract=on;parallel=auto;threads=auto;fusion=auto;tile=auto;regtile=auto;unroll=on;unroll_inner=auto;vector=auto;fastmath=off;vecreduce=on;share=on;inline=on;stream=auto;mask=auto;pack=on;interchange=auto;block=auto;grid=auto;gpu_arch=auto;reduce=auto;reduce_threads=auto;reduce_map=auto;shared=auto;shared_tile=auto;sizes=auto;cpu=host (defaults)"));

	/* --json: one line, one object */
	assert_int_equal(tcomp("bench mm.tc -e mm --shape A=64x64 --shape B=64x64 --runs 3 "
			       "--warmup 1 --min-time 0.05 --json"),
		0);
	n = strlen(out_text);
	assert_true(n > 2);
	assert_int_equal(out_text[0], '{');
	assert_int_equal(out_text[n - 1], '\n');
	assert_int_equal(out_text[n - 2], '}');
	assert_ptr_equal(strchr(out_text, '\n'), out_text + n - 1);
	memcpy(line, out_text, n + 1);
	assert_string_equal(json_value(line, "kernel", v, sizeof(v)), "\"mm\"");
	assert_non_null(strstr(line, "\"shapes\":{\"A\":[64,64],\"B\":[64,64]}"));
	assert_true(atof(json_value(line, "median_ms", v, sizeof(v))) > 0);
	assert_true(atof(json_value(line, "min_ms", v, sizeof(v))) > 0);
	assert_true(atof(json_value(line, "min_ms", v, sizeof(v))) <=
		atof(json_value(line, "median_ms", v + 128, sizeof(v) - 128)));
	assert_true(atoi(json_value(line, "runs", v, sizeof(v))) >= 3);
	assert_true(atof(json_value(line, "compile_ms", v, sizeof(v))) > 0);
	assert_true(atof(json_value(line, "gflops", v, sizeof(v))) > 0);
	assert_true(atof(json_value(line, "gbs", v, sizeof(v))) > 0);
	assert_string_equal(json_value(line, "options", v, sizeof(v)), "\"target=cpu;order=on;contract=on;parallel=auto;threads=auto;fusion=auto;tile=auto;regtile=auto;unroll=on;unroll_inner=auto;vector=auto;fastmath=off;vecreduce=on;share=on;inline=on;stream=auto;mask=auto;pack=on;interchange=auto;block=auto;grid=auto;gpu_arch=auto;reduce=auto;reduce_threads=auto;reduce_map=auto;shared=auto;shared_tile=auto;sizes=auto;cpu=host\"");
	assert_string_equal(json_value(line, "source", v, sizeof(v)), "\"default\"");

	/* options given: "source":"file" */
	assert_int_equal(tcomp("bench mm.tc --shape A=16x8 --shape B=8x4 --runs 3 --min-time 0 "
			       "--json --option target=cpu"),
		0);
	assert_int_equal(out_text[0], '{');
	assert_non_null(strstr(out_text, "\"source\":\"file\""));
	assert_non_null(strstr(out_text, "\"options\":\"target=cpu;order=on;contract=on;parallel=auto;threads=auto;fusion=auto;tile=auto;regtile=auto;unroll=on;unroll_inner=auto;vector=auto;fastmath=off;vecreduce=on;share=on;inline=on;stream=auto;mask=auto;pack=on;interchange=auto;block=auto;grid=auto;gpu_arch=auto;reduce=auto;reduce_threads=auto;reduce_map=auto;shared=auto;shared_tile=auto;sizes=auto;cpu=host\""));
	write_text("interp.opts", "target=interp\n");
	assert_int_equal(tcomp("bench mm.tc --shape A=16x8 --shape B=8x4 --runs 2 --min-time 0 "
			       "--json --options interp.opts"),
		0);
	assert_non_null(strstr(out_text, "\"options\":\"target=interp;order=on;contract=on;parallel=auto;threads=auto;fusion=auto;tile=auto;regtile=auto;unroll=on;unroll_inner=auto;vector=auto;fastmath=off;vecreduce=on;share=on;inline=on;stream=auto;mask=auto;pack=on;interchange=auto;block=auto;grid=auto;gpu_arch=auto;reduce=auto;reduce_threads=auto;reduce_map=auto;shared=auto;shared_tile=auto;sizes=auto;cpu=host\""));
	assert_non_null(strstr(out_text, "\"source\":\"file\""));
	assert_non_null(strstr(out_text, "\"runs\":2,"));

	/* --help */
	assert_int_equal(tcomp("bench --help"), 0);
	assert_non_null(strstr(out_text, "usage: tcomp bench"));

	/* errors */
	assert_int_equal(tcomp("bench mm.tc --shape A=64x64"), 1);
	assert_non_null(strstr(out_text, "no --shape or --in for input 'B' of 'mm'"));
	assert_int_equal(tcomp("bench mm.tc --shape A=64x64 --shape B=64by64"), 1);
	assert_non_null(strstr(out_text, "bad shape '64by64'"));
	assert_int_equal(tcomp("bench mm.tc --shape A=64x-1 --shape B=64x64"), 1);
	assert_non_null(strstr(out_text, "bad shape '64x-1'"));
	assert_int_equal(tcomp("bench mm.tc --shape A=64x64 --shape B=32x64"), 1);
	assert_non_null(strstr(out_text, "size K"));
	assert_int_equal(tcomp("bench mm.tc --shape A=64x64 --shape B=64x64 --shape Z=4"), 1);
	assert_non_null(strstr(out_text, "'Z' is not an input of 'mm'"));
	assert_int_equal(tcomp("bench mm.tc --shape A=4x4 --shape B=4x4 --option bogus=1"), 1);
	assert_non_null(strstr(out_text, "unknown option 'bogus'"));
	assert_int_equal(tcomp("bench mm.tc --shape A=4x4 --shape B=4x4 --options nothere.opts"), 1);
	assert_non_null(strstr(out_text, "cannot read options file 'nothere.opts'"));
	assert_int_equal(tcomp("bench mm.tc --shape A=4x4 --shape B=4x4 --runs 0"), 1);
	assert_non_null(strstr(out_text, "--runs needs an integer of at least 1 but found '0'"));
	assert_int_equal(tcomp("bench mm.tc --shape A=4x4 --shape B=4x4 --min-time soon"), 1);
	assert_non_null(strstr(out_text, "--min-time needs a number of seconds"));
	assert_int_equal(tcomp("bench mm.tc --shape A=4x4 --shape B=4x4 --frob"), 1);
	assert_non_null(strstr(out_text, "tcomp: error: unknown option '--frob'"));
	assert_int_equal(tcomp("bench --shape A=4x4"), 1);
	assert_non_null(strstr(out_text, "bench needs a FILE.tc"));
	assert_int_equal(tcomp("bench nothere.tc --shape A=4x4"), 1);
	assert_non_null(strstr(out_text, "cannot open 'nothere.tc'"));
}

/* emb.tc (a gather LUT(I(i,k), j)) and its inputs: good.npy (2x2 int32
 * indices in range for a LUT of 3 rows), bad.npy (one index 9), lut.npy
 * (3x2 float32) and lut64.npy (the same in float64). */
static void write_gather_files(void)
{
	int32_t good[4] = {0, 2, 1, 1}, bad[4] = {0, 2, 9, 1};
	float lut[3 * 2] = {1, 2, 3, 4, 5, 6};
	double d[3 * 2] = {1, 2, 3, 4, 5, 6};
	int64_t si[2] = {2, 2}, sl[2] = {3, 2};
	write_text("emb.tc", "def emb(float(R,D) LUT, int32(B,L) I) -> (O) {\n"
			     "  O(i,j) +=! LUT(I(i,k), j)\n}\n");
	write_npy("good.npy", TC_T_I32, 2, si, good);
	write_npy("bad.npy", TC_T_I32, 2, si, bad);
	write_npy("lut.npy", TC_T_F32, 2, sl, lut);
	write_npy("lut64.npy", TC_T_F64, 2, sl, d);
}

/* bench --in T=FILE: T's shape and values from the file (an index out of
 * range there is the kernel's run-time error, so the values are the file's),
 * the other inputs random; bad files and mixed-up names are clear errors. */
static void bench_inputs_from_files(void **state)
{
	(void)state;
	write_gather_files();
	assert_int_equal(tcomp("bench emb.tc --in I=good.npy --shape LUT=3x64 --runs 2 "
			       "--min-time 0 --json"),
		0);
	assert_non_null(strstr(out_text, "\"shapes\":{\"LUT\":[3,64],\"I\":[2,2]}"));
	assert_int_equal(tcomp("bench emb.tc --in I=good.npy --in LUT=lut.npy --runs 2 "
			       "--min-time 0"),
		0);
	assert_non_null(strstr(out_text, "(LUT=3x2 I=2x2)"));
	assert_int_equal(tcomp("bench emb.tc --in I=bad.npy --shape LUT=3x64 --runs 2 "
			       "--min-time 0"),
		1);
	assert_non_null(strstr(out_text, "index 9 is out of bounds for dimension 0 of 'LUT'"));
	/* random indices (--shape) stay in bounds */
	assert_int_equal(tcomp("bench emb.tc --shape I=2x2 --shape LUT=3x64 --runs 2 "
			       "--min-time 0"),
		0);
	assert_int_equal(tcomp("bench emb.tc --in I=good.npy --in LUT=lut64.npy"), 1);
	assert_non_null(strstr(out_text, "input 'LUT' of 'emb' is float32 but lut64.npy holds "
					 "float64"));
	assert_int_equal(tcomp("bench emb.tc --in I=good.npy --shape I=2x2 --shape LUT=3x2"), 1);
	assert_non_null(strstr(out_text, "tensor 'I' is given twice"));
	assert_int_equal(tcomp("bench emb.tc --in I=good.npy"), 1);
	assert_non_null(strstr(out_text, "no --shape or --in for input 'LUT' of 'emb'"));
	assert_int_equal(tcomp("bench emb.tc --in I=good.npy --in LUT=nothere.npy"), 1);
	assert_non_null(strstr(out_text, "input 'LUT': "));
	assert_non_null(strstr(out_text, "nothere.npy"));
	assert_int_equal(tcomp("bench emb.tc --in I=good.npy --in LUT=lut.npy --in Z=lut.npy"), 1);
	assert_non_null(strstr(out_text, "'Z' is not an input of 'emb'"));
	assert_int_equal(tcomp("bench emb.tc --in I --shape LUT=3x2"), 1);
	assert_non_null(strstr(out_text, "expected TENSOR=FILE but found 'I'"));
}

/* autotune --in T=FILE: the candidates run on the file's data (indices out
 * of range there fail every candidate, so the data is the file's; random
 * indices would be in range), the --shape inputs on random data; the
 * printed command names the file; bad files are clear errors. */
static void autotune_inputs_from_files(void **state)
{
	const char *quick = "--generations 1 --population 2 --final-candidates 0 --no-cache "
			    "--quiet --seed 5";
	char cmd[512];
	(void)state;
	write_gather_files();
	snprintf(cmd, sizeof(cmd), "autotune emb.tc --in I=good.npy --shape LUT=3x64 %s", quick);
	assert_int_equal(tcomp(cmd), 0);
	assert_non_null(strstr(out_text, "# tcomp autotune emb.tc -e emb --shape LUT=3x64 "
					 "--in I=good.npy\n"));
	assert_non_null(strstr(out_text, "\ntarget=cpu\n"));
	snprintf(cmd, sizeof(cmd), "autotune emb.tc --in I=good.npy --in LUT=lut.npy %s", quick);
	assert_int_equal(tcomp(cmd), 0);
	snprintf(cmd, sizeof(cmd), "autotune emb.tc --in I=bad.npy --shape LUT=3x64 %s", quick);
	assert_int_equal(tcomp(cmd), 1);
	assert_non_null(strstr(out_text, "no candidate of 'emb' compiled and ran correctly (all "
					 "failed); the first failure: emb.tc:2:14: error: index 9 is "
					 "out of bounds for dimension 0 of 'LUT'"));
	snprintf(cmd, sizeof(cmd), "autotune emb.tc --shape I=2x2 --shape LUT=3x64 %s", quick);
	assert_int_equal(tcomp(cmd), 0); /* random indices: in range */
	assert_int_equal(tcomp("autotune emb.tc --in I=lut.npy --shape LUT=3x64 --no-cache"), 1);
	assert_non_null(strstr(out_text, "input 'I' of 'emb' is int32 but lut.npy holds float32"));
	assert_int_equal(tcomp("autotune emb.tc --in I=good.npy --no-cache"), 1);
	assert_non_null(strstr(out_text, "no --shape or --in for input 'LUT' of 'emb'"));
	assert_int_equal(tcomp("autotune emb.tc --in I=good.npy --shape I=2x2 --no-cache"), 1);
	assert_non_null(strstr(out_text, "tensor 'I' is given twice"));
	assert_int_equal(tcomp("autotune --batch b.txt --in I=good.npy"), 1);
	assert_non_null(strstr(out_text, "no FILE.tc, -e, --shape, --in or --train with it"));
}

/* Integer inputs stay in bounds as gather indices; other dtypes work. */
static void bench_gather_and_dtypes(void **state)
{
	(void)state;
	write_text("emb.tc", "def emb(float(R,D) LUT, int32(B,L) I) -> (O) {\n"
			     "  O(i,j) +=! LUT(I(i,k), j)\n}\n");
	assert_int_equal(tcomp("bench emb.tc --shape LUT=3x64 --shape I=32x16 --runs 3 "
			       "--min-time 0"),
		0);
	assert_non_null(strstr(out_text, "GFLOP/s"));
	assert_int_equal(tcomp("bench emb.tc --shape LUT=3x64 --shape I=32x16 --runs 3 "
			       "--min-time 0 --target interp"),
		0);
	write_text("mix.tc", "def mix(float16(N) H, double(N) D, int8(N) I, bool(N) Bo,"
			     " uint64(N) U) -> (O) {\n"
			     "  O(i) = Bo(i) ? float(H(i)) * float(D(i)) / float(I(i))"
			     " : float(U(i) / uint64(I(i)))\n}\n");
	assert_int_equal(tcomp("bench mix.tc --shape H=100 --shape D=100 --shape I=100 "
			       "--shape Bo=100 --shape U=100 --runs 2 --min-time 0 --json"),
		0);
	assert_int_equal(out_text[0], '{');
	/* the operation and byte counts of tc_kernel_stats */
	write_text("fc.tc", "def fc(float(B,M) I, float(N,M) W1, float(N) Bias) -> (O) {\n"
			    "  O(b,n) +=! I(b,m) * W1(n,m)\n"
			    "  O(b,n) = O(b,n) + Bias(n)\n"
			    "  O(b,n) = fmax(O(b,n), 0)\n}\n");
	assert_int_equal(tcomp("bench fc.tc --shape I=4x8 --shape W1=16x8 --shape Bias=16 "
			       "--runs 2 --min-time 0"),
		0);
	/* 4*16*8 points x (* and +) + 4*16 x + + 4*16 x fmax; 4 bytes x (32 + 128 + 16 + 64) */
	assert_non_null(strstr(out_text, "(1152 flop per run)"));
	assert_non_null(strstr(out_text, "(960 bytes of inputs and outputs per run)"));
	write_text("conv.tc", "def conv(float(B) I, float(K) W) -> (O) {\n"
			      "  O(i) +=! I(i + k) * W(k)\n}\n");
	assert_int_equal(tcomp("bench conv.tc --shape I=10 --shape W=3 --runs 2 --min-time 0"), 0);
	/* 8 x 3 points x (* and +), not counting the subscript's +; 4 x (10 + 3 + 8) bytes */
	assert_non_null(strstr(out_text, "(48 flop per run)"));
	assert_non_null(strstr(out_text, "(84 bytes of inputs and outputs per run)"));
	write_text("sc.tc", "def sc(float A) -> (O) { O = A * A }\n");
	assert_int_equal(tcomp("bench sc.tc --shape A=scalar --runs 2 --min-time 0"), 0);
	assert_non_null(strstr(out_text, "(A=scalar)"));
}

/* --target cuda-emu runs the CUDA code on the CPU: equal to --target cpu
 * on .npy data (a matmul and a softmax, whose rows become several
 * kernels); bench times the emulator and says so; --target cuda without a
 * driver (a missing one, the toolkit's stub) is the driver's clear error
 * for run and bench, exit status 1. */
static void cuda_targets(void **state)
{
	enum { M = 6, K = 9, N = 5 };
	float a[M * K], b[K * N];
	int64_t sa[2] = {M, K}, sb[2] = {K, N};
	const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
	char buf[256];
	int i, j;
	(void)state;
	for (i = 0; i < M * K; i++)
		a[i] = frand();
	for (i = 0; i < K * N; i++)
		b[i] = frand();
	write_npy("ga.npy", TC_T_F32, 2, sa, a);
	write_npy("gb.npy", TC_T_F32, 2, sb, b);
	write_text("g.tc", "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			   "  C(m,n) +=! A(m,r) * B(r,n)\n}\n"
			   "def softmax(float(M,K) A) -> (mx, e, s, O) {\n"
			   "  mx(m) max=! A(m,k)\n  e(m,k) = exp(A(m,k) - mx(m))\n"
			   "  s(m) +=! e(m,k)\n  O(m,k) = e(m,k) / s(m)\n}\n");
	for (j = 0; j < 2; j++) {
		const char *def = j ? "softmax" : "mm", *ins = j ? "--in A=ga.npy"
								  : "--in A=ga.npy --in B=gb.npy";
		const char *out = j ? "O" : "C";
		tc_npy x, y;
		char *err = NULL;
		int64_t n = 1;
		remove(path("gcpu.npy"));
		remove(path("gemu.npy"));
		assert_int_equal(tcomp("run g.tc -e %s %s --out %s=gcpu.npy --no-cache", def, ins,
					 out), 0);
		assert_int_equal(tcomp("run g.tc -e %s %s --out %s=gemu.npy --target cuda-emu "
				       "--no-cache", def, ins, out), 0);
		assert_int_equal(tc_npy_read(path("gcpu.npy"), &x, &err), 0);
		assert_int_equal(tc_npy_read(path("gemu.npy"), &y, &err), 0);
		assert_int_equal(x.ndim, y.ndim);
		for (i = 0; i < x.ndim; i++) {
			assert_int_equal(x.shape[i], y.shape[i]);
			n *= x.shape[i];
		}
		assert_int_equal(n, j ? M * K : M * N);
		for (i = 0; i < n; i++) {
			float u = ((float *)x.data)[i], v = ((float *)y.data)[i];
			assert_true(isfinite(u));
			assert_float_equal(u, v, 1e-5f * (1 + fabsf(u)));
		}
		tc_npy_free(&x);
		tc_npy_free(&y);
	}
	/* bench times the emulator and says it is one */
	assert_int_equal(tcomp("bench g.tc -e mm --shape A=16x8 --shape B=8x4 --target cuda-emu "
			       "--runs 2 --warmup 0 --min-time 0 --json --no-cache"), 0);
	assert_string_equal(json_value(out_text, "device", buf, sizeof(buf)), "\"cuda-emu\"");
	assert_string_equal(json_value(out_text, "emulated", buf, sizeof(buf)), "true");
	assert_string_equal(json_value(out_text, "timer", buf, sizeof(buf)), "\"host-clock\"");
	assert_true(atof(json_value(out_text, "median_ms", buf, sizeof(buf))) > 0);
	assert_int_equal(tcomp("bench g.tc -e mm --shape A=16x8 --shape B=8x4 --target cuda-emu "
			       "--runs 2 --warmup 0 --min-time 0 --no-cache"), 0);
	assert_non_null(strstr(out_text, "EMULATED on the CPU"));
	/* no driver: a missing one, the toolkit's stub */
	setenv("TCOMP_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
	assert_int_equal(tcomp("run g.tc -e mm --in A=ga.npy --in B=gb.npy --target cuda "
			       "--no-cache"), 1);
	assert_non_null(strstr(out_text, "tcomp: error: tensor 'A': tc_device_alloc: no CUDA "
					 "driver: /nonexistent/libcuda.so.1 not found"));
	assert_int_equal(tcomp("bench g.tc -e mm --shape A=16x8 --shape B=8x4 --target cuda "
			       "--no-cache --json"), 1);
	assert_non_null(strstr(out_text, "no CUDA driver: /nonexistent/libcuda.so.1 not found"));
	if (!access(stub, R_OK)) {
		setenv("TCOMP_CUDA_DRIVER", stub, 1);
		assert_int_equal(tcomp("run g.tc -e mm --in A=ga.npy --in B=gb.npy --target cuda "
				       "--no-cache"), 1);
		assert_non_null(strstr(out_text, "cuInit failed: CUDA_ERROR_STUB_LIBRARY"));
	}
	unsetenv("TCOMP_CUDA_DRIVER");
	/* --gpu-arch: an architecture offline (NVRTC, no driver), and a bad one */
#ifdef TCOMP_HAVE_NVRTC
	assert_int_equal(tcomp("emit g.tc -e mm --shape A=16x8 --shape B=8x4 --option target=cuda "
			       "--gpu-arch sm_80 --stage cuda-resources"), 0);
	assert_non_null(strstr(out_text, "mm for sm_80"));
	assert_non_null(strstr(out_text, "Compiling entry function 'mm_k0' for 'sm_80'"));
	assert_int_equal(tcomp("emit g.tc -e mm --shape A=16x8 --shape B=8x4 --option target=cuda "
			       "--stage cuda"), 0);
	assert_non_null(strstr(out_text, "extern \"C\" __global__ void"));
	/* --target T in emit is --option target=T */
	assert_int_equal(tcomp("emit g.tc -e mm --shape A=16x8 --shape B=8x4 --target cuda "
			       "--stage cuda"), 0);
	assert_non_null(strstr(out_text, "extern \"C\" __global__ void"));
#endif
	assert_int_equal(tcomp("emit g.tc -e mm --shape A=16x8 --shape B=8x4 --option target=cuda "
			       "--gpu-arch sm_99 --stage cuda"), 1);
	assert_non_null(strstr(out_text, "option 'gpu_arch' cannot be 'sm_99'"));
}

/* tcomp autotune --train tunes every kernel of a training step, records
 * each in the cache (which tc_model_build then reads), and refuses
 * malformed --train, --params and --optimizer arguments. */
static void autotune_train_tunes_every_kernel_of_a_step(void **state)
{
	static const char *const bad[][2] = {
		{"autotune m.tc --train mlp --params W1 --shape X=4x3", "--train needs FWD,LOSS"},
		{"autotune m.tc --params W1 --shape X=4x3", "go together"},
		{"autotune m.tc --train mlp,xent --params W1 -e mlp", "no -e"},
		{"autotune m.tc --train mlp,xent --params W1 --optimizer rms", "sgd, momentum or adam"},
		{"autotune m.tc --train mlp,xent --params W1 --ensemble 0", "--ensemble needs a number"},
		{"autotune m.tc -e mlp --ensemble 2 --shape X=4x3", "--ensemble goes with --train"},
	};
	const char *flags = "--generations 1 --population 2 --final-candidates 0 --runs 1 "
			    "--min-time 0.001 --threads 1 --jobs 1 --quiet";
	const char *shapes = "--shape X=8x6 --shape Y=8 --shape W1=5x6 --shape B1=5 --shape W2=3x5";
	(void)state;
	write_text("m.tc",
		"def mlp(float(B,I) X, float(H,I) W1, float(H) B1, float(K,H) W2) -> (Z) {\n"
		"    A(b,h) +=! X(b,r_i) * W1(h,r_i)\n"
		"    A(b,h) = fmax(A(b,h) + B1(h), 0)\n"
		"    Z(b,k) +=! A(b,r_h) * W2(k,r_h)\n"
		"}\n"
		"def xent(float(B,K) Z, int64(B) Y) -> (L) {\n"
		"    s(b) +=! exp(Z(b,r_k))\n"
		"    L +=! (log(s(r_b)) - Z(r_b, Y(r_b))) / B\n"
		"}\n");
	if (tcomp("autotune m.tc --train mlp,xent --params W1,B1,W2 --optimizer adam %s "
		  "--cache tc.sqlite %s", shapes, flags))
		fail_msg("%s", out_text);
	assert_non_null(strstr(out_text, "# kernel 1/5: mlp_fwd"));
	assert_non_null(strstr(out_text, "# kernel 4/5: mlp_grad"));
	assert_non_null(strstr(out_text, "# kernel 5/5: adam"));
	assert_non_null(strstr(out_text, "# the step: defaults"));
	assert_int_equal(tcomp("cache list --cache tc.sqlite"), 0);
	for (int i = 0; i < 5; i++) {
		static const char *const defs[5] = {"mlp_fwd ", "xent_fwd ", "xent_grad ", "mlp_grad ",
			"adam "};
		if (!strstr(out_text, defs[i]))
			fail_msg("no cache entry for %s in:\n%s", defs[i], out_text);
	}
	/* an ensemble of 2: the step's kernels at the batched shapes */
	if (tcomp("autotune m.tc --train mlp,xent --params W1,B1,W2 --ensemble 2 %s "
		  "--cache tc.sqlite %s", shapes, flags))
		fail_msg("%s", out_text);
	assert_non_null(strstr(out_text, "--ensemble 2"));
	assert_non_null(strstr(out_text, "# kernel 4/5: mlp_grad"));
	assert_int_equal(tcomp("cache list --cache tc.sqlite"), 0);
	if (!strstr(out_text, "8x6,2x5x6,2x5,2x3x5"))
		fail_msg("no cache entry at the ensemble's shapes in:\n%s", out_text);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(tcomp("%s", bad[i][0]), 1);
		if (!strstr(out_text, bad[i][1]))
			fail_msg("'%s' printed: %s", bad[i][0], out_text);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(matmul_matches_loops),
		cmocka_unit_test(every_dtype_round_trips),
		cmocka_unit_test(bad_npy_inputs_are_clear_errors),
		cmocka_unit_test(bad_arguments_are_clear_errors),
		cmocka_unit_test(long_options_and_one_error_format),
		cmocka_unit_test(help_for_each_command),
		cmocka_unit_test(check_prints_signatures_and_located_errors),
		cmocka_unit_test(emit_stages),
		cmocka_unit_test(emit_schedule_after_pass),
		cmocka_unit_test(gather_out_of_bounds_is_located),
		cmocka_unit_test(threads_option),
		cmocka_unit_test(options_on_run_and_emit),
		cmocka_unit_test(bench_matmul),
		cmocka_unit_test(bench_gather_and_dtypes),
		cmocka_unit_test(bench_inputs_from_files),
		cmocka_unit_test(autotune_inputs_from_files),
		cmocka_unit_test(cuda_targets),
		cmocka_unit_test(autotune_train_tunes_every_kernel_of_a_step),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
