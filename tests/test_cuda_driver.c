/* Tests of the CUDA driver opened at run time (runtime/cuda_driver.c).
 *
 * The driver is opened once per process, so each case runs this program
 * again in a fresh process (--open EXPECTED, with TCOMP_CUDA_DRIVER set or
 * not), which opens the driver twice and checks that both calls give the
 * same answer: a missing file, a library that is no driver, the toolkit's
 * stub libcuda.so (where CMake found the toolkit: TCOMP_CUDA_STUB), and the
 * machine's own driver (a GPU machine opens it and sees a device; others
 * get one of the documented messages).  The same fresh processes check the
 * public API on that driver (--api EXPECTED): tc_device_alloc, _copy and
 * _free and a target=cuda tc_kernel_run give the driver's message (on a
 * GPU: a round trip through device memory and a matmul equal to C loops),
 * while kDLCPU memory and a target=cpu kernel work in the same process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/backend.h"
#include "runtime/cache_ops.h"
#include "runtime/cuda_driver.h"
#include "runtime/internal.h"
#include "runtime/kernel.h"
#include "runtime/object.h"
#include "tcomp.h"
#include "testutil.h"

#include <math.h>

/* In the fresh process: open the driver twice; expected "" means either a
 * driver with a device or one of the messages of cuda_driver.h. */
static int open_child(const char *expected)
{
	char err[512] = "", again[512] = "";
	const tc_rt_cuda *cu = tc_rt_cuda_driver(err, sizeof(err));
	const tc_rt_cuda *cu2 = tc_rt_cuda_driver(again, sizeof(again));
	if (cu != cu2 || strcmp(err, again)) {
		fprintf(stderr, "a second call differs: \"%s\" then \"%s\"\n", err, again);
		return 1;
	}
	if (cu) {
		char name[256] = "";
		int dev = -1;
		if (*expected) {
			fprintf(stderr, "expected \"%s\" but a driver opened\n", expected);
			return 1;
		}
		if (cu->ndevices < 1 || cu->driver_version < 1000 || cu->device_get(&dev, 0) ||
			cu->device_name(name, (int)sizeof(name), dev) || !*name) {
			fprintf(stderr, "an open driver without a usable device 0\n");
			return 1;
		}
		printf("driver %d, %d devices, device 0: %s\n", cu->driver_version, cu->ndevices,
			name);
		return 0;
	}
	if (*expected ? !strstr(err, expected)
		      : strncmp(err, "no CUDA driver: libcuda.so.1 not found (", 40) &&
				strncmp(err, "no CUDA device", 14) && strncmp(err, "CUDA driver (", 13)) {
		fprintf(stderr, "expected \"%s\" in \"%s\"\n", *expected ? expected : "a documented message",
			err);
		return 1;
	}
	return 0;
}

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "line %d: ", __LINE__);            \
			fprintf(stderr, __VA_ARGS__);                      \
			fprintf(stderr, "\n");                             \
			return 1;                                          \
		}                                                          \
	} while (0)

/* Whether ctx's error carries expected (or, with expected "", one of the
 * driver's documented messages). */
static int says(tc_context *ctx, const char *expected)
{
	const char *e = tc_context_error(ctx);
	if (*expected)
		return strstr(e, expected) != NULL;
	return strstr(e, "no CUDA driver: ") || strstr(e, "no CUDA device") ||
	       strstr(e, "CUDA driver (");
}

static const char mm_src[] =
	"def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }\n";

/* C = A B by C loops, in double. */
static void mm_ref(const float *a, const float *b, double *c, int m, int k, int n)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int r = 0; r < k; r++)
				s += (double)a[i * k + r] * b[r * n + j];
			c[i * n + j] = s;
		}
}

static DLTensor tensor(DLDevice dev, void *data, int64_t *shape)
{
	DLTensor t;
	memset(&t, 0, sizeof(t));
	t.data = data;
	t.device = dev;
	t.ndim = 2;
	t.dtype.code = kDLFloat;
	t.dtype.bits = 32;
	t.dtype.lanes = 1;
	t.shape = shape;
	return t;
}

/* In the fresh process: the public API on the driver TCOMP_CUDA_DRIVER
 * names; expected "" also accepts a working device (then checked). */
static int api_child(const char *expected)
{
	enum { M = 5, K = 7, N = 3 };
	DLDevice cpu = {kDLCPU, 0}, gpu = {kDLCUDA, 0}, gpu1 = {kDLCUDA, 1};
	tc_context *ctx = tc_context_new();
	tc_module *mod;
	tc_options *o;
	tc_kernel *k;
	float a[M * K], b[K * N], c[M * N], back[M * N];
	double ref[M * N];
	int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
	void *p = (void *)1, *q = NULL, *da = NULL, *db = NULL, *dc = NULL;
	int i, have_gpu;
	CHECK(ctx, "no context");
	for (i = 0; i < M * K; i++)
		a[i] = (float)((rand() % 2001) - 1000) / 997.0f + 0.001f;
	for (i = 0; i < K * N; i++)
		b[i] = (float)((rand() % 2001) - 1000) / 991.0f + 0.001f;
	mm_ref(a, b, ref, M, K, N);
	/* host memory needs no driver */
	CHECK(tc_device_alloc(ctx, cpu, sizeof(a), &q) == 0 && q, "%s", tc_context_error(ctx));
	CHECK(tc_device_copy(ctx, q, cpu, a, cpu, sizeof(a)) == 0, "%s", tc_context_error(ctx));
	CHECK(!memcmp(q, a, sizeof(a)), "host copy differs");
	CHECK(tc_device_free(ctx, cpu, q) == 0, "%s", tc_context_error(ctx));
	CHECK(tc_device_alloc(ctx, gpu1, 4, &p) < 0 && !p &&
		strstr(tc_context_error(ctx), "CUDA device 1: tcomp runs on CUDA device 0 only"),
		"device 1: %s", tc_context_error(ctx));
	CHECK(tc_device_alloc(ctx, (DLDevice){kDLOpenCL, 0}, 4, &p) < 0 &&
		strstr(tc_context_error(ctx), "is neither kDLCPU"), "OpenCL: %s",
		tc_context_error(ctx));
	have_gpu = tc_device_alloc(ctx, gpu, sizeof(a), &da) == 0;
	if (!have_gpu) {
		CHECK(!da && says(ctx, expected), "alloc: \"%s\"", tc_context_error(ctx));
		CHECK(tc_device_copy(ctx, back, cpu, c, gpu, sizeof(c)) < 0 && says(ctx, expected),
			"copy: \"%s\"", tc_context_error(ctx));
		CHECK(tc_device_free(ctx, gpu, (void *)64) < 0 && says(ctx, expected),
			"free: \"%s\"", tc_context_error(ctx));
		CHECK(tc_device_free(ctx, gpu, NULL) == 0, "free(NULL): %s", tc_context_error(ctx));
	} else {
		CHECK(!*expected, "expected \"%s\" but a device opened", expected);
		CHECK(tc_device_alloc(ctx, gpu, sizeof(b), &db) == 0 &&
			tc_device_alloc(ctx, gpu, sizeof(c), &dc) == 0, "%s", tc_context_error(ctx));
		CHECK(tc_device_copy(ctx, da, gpu, a, cpu, sizeof(a)) == 0 &&
			tc_device_copy(ctx, db, gpu, b, cpu, sizeof(b)) == 0, "%s",
			tc_context_error(ctx));
		/* device to device and back */
		CHECK(tc_device_copy(ctx, dc, gpu, da, gpu, sizeof(c)) == 0 &&
			tc_device_copy(ctx, back, cpu, dc, gpu, sizeof(c)) == 0, "%s",
			tc_context_error(ctx));
		CHECK(!memcmp(back, a, sizeof(back)), "the round trip differs");
	}
	/* target=cuda: compiles where NVRTC is (no driver needed), runs only
	 * with a device */
	mod = tc_module_parse(ctx, mm_src, "mm.tc");
	CHECK(mod, "%s", tc_context_error(ctx));
	o = tc_options_new();
	CHECK(o && tc_options_set(o, "target", "cuda", ctx) == 0, "options");
	{
		DLTensor ta = tensor(gpu, have_gpu ? da : (void *)4096, sa);
		DLTensor tb = tensor(gpu, have_gpu ? db : (void *)8192, sb);
		DLTensor tcout = tensor(gpu, have_gpu ? dc : (void *)16384, sc);
		const DLTensor *in[2] = {&ta, &tb};
		DLTensor *out[1] = {&tcout};
		double ms = -1;
		k = tc_compile(mod, "mm", in, 2, o);
		if (!k) {
			/* no NVRTC on this machine: the compile's own message */
			printf("target=cuda does not compile here: %s\n", tc_context_error(ctx));
			CHECK(strstr(tc_context_error(ctx), "NVRTC") ||
				strstr(tc_context_error(ctx), "nvrtc"), "compile: %s",
				tc_context_error(ctx));
		} else {
			CHECK(tc_kernel_set_stream(k, NULL) == 0, "%s", tc_context_error(ctx));
			printf("target=cuda compiled; %s\n", have_gpu ? "run on the GPU" : "run refused");
			if (!have_gpu) {
				CHECK(tc_kernel_run(k, in, 2, out, 1) < 0 && says(ctx, expected),
					"run: \"%s\"", tc_context_error(ctx));
				CHECK(tc_kernel_run_timed(k, in, 2, out, 1, &ms) < 0 && ms == 0 &&
					says(ctx, expected), "timed run: \"%s\"", tc_context_error(ctx));
			} else {
				/* a host pointer passed as a device pointer is refused */
				DLTensor th = tensor(gpu, a, sa);
				const DLTensor *hin[2] = {&th, &tb};
				CHECK(tc_kernel_run(k, hin, 2, out, 1) < 0 &&
					strstr(tc_context_error(ctx), "not memory of CUDA device"),
					"host pointer: %s", tc_context_error(ctx));
				for (i = 0; i < M * N; i++)
					back[i] = NAN;
				CHECK(tc_device_copy(ctx, dc, gpu, back, cpu, sizeof(back)) == 0, "poison");
				CHECK(tc_kernel_run_timed(k, in, 2, out, 1, &ms) == 0 && ms >= 0, "%s",
					tc_context_error(ctx));
				CHECK(tc_device_copy(ctx, back, cpu, dc, gpu, sizeof(back)) == 0, "%s",
					tc_context_error(ctx));
				for (i = 0; i < M * N; i++)
					CHECK(fabs(back[i] - ref[i]) <= 1e-4 * (1 + fabs(ref[i])),
						"C[%d] = %g, not %g", i, back[i], ref[i]);
			}
			tc_kernel_free(k);
		}
	}
	/* the CPU path in the same process */
	CHECK(tc_options_set(o, "target", "cpu", ctx) == 0, "options");
	{
		DLTensor ta = tensor(cpu, a, sa), tb = tensor(cpu, b, sb), tcout = tensor(cpu, c, sc);
		const DLTensor *in[2] = {&ta, &tb};
		DLTensor *out[1] = {&tcout};
		double ms = -1;
		k = tc_compile(mod, "mm", in, 2, o);
		CHECK(k, "cpu compile: %s", tc_context_error(ctx));
		CHECK(tc_kernel_set_stream(k, (void *)64) < 0 &&
			strstr(tc_context_error(ctx), "runs on the CPU"), "stream: %s",
			tc_context_error(ctx));
		for (i = 0; i < M * N; i++)
			c[i] = NAN;
		CHECK(tc_kernel_run_timed(k, in, 2, out, 1, &ms) == 0 && ms >= 0, "cpu run: %s",
			tc_context_error(ctx));
		for (i = 0; i < M * N; i++)
			CHECK(fabs(c[i] - ref[i]) <= 1e-4 * (1 + fabs(ref[i])), "cpu C[%d] = %g, not %g",
				i, c[i], ref[i]);
		tc_kernel_free(k);
	}
	if (have_gpu) {
		tc_device_free(ctx, gpu, da);
		tc_device_free(ctx, gpu, db);
		tc_device_free(ctx, gpu, dc);
	}
	tc_options_free(o);
	tc_module_free(mod);
	tc_context_free(ctx);
	return 0;
}

/* In a fresh process without a driver: the cuda backend's object code (a
 * launch table and the cubin NVRTC made for sm_90) is stored in a kernel
 * cache next to its options, and a later tc_compile that hits them loads
 * it instead of compiling (the run then fails for want of a driver, as
 * a compiled one does).  Where NVRTC is missing it says so and passes. */
static int cache_child(const char *cache)
{
	int64_t sa[2] = {4, 6}, sb[2] = {6, 3};
	DLDevice gpu = {kDLCUDA, 0};
	DLTensor ta = tensor(gpu, NULL, sa), tb = tensor(gpu, NULL, sb);
	const DLTensor *in[2] = {&ta, &tb};
	tc_context *ctx = tc_context_new();
	tc_module *mod = tc_module_parse(ctx, mm_src, "mm.tc");
	tc_options *o = tc_options_new();
	tc_rt_object obj;
	tc_cache_key key;
	tc_cache_run run = {"target=cuda", 1.0, 1.0, NULL, 1};
	tc_cache *c;
	tc_kernel *k;
	char *msg = NULL, head[64];
	CHECK(ctx && mod && o && tc_options_set(o, "target", "cuda", ctx) == 0, "setup");
	memset(&obj, 0, sizeof(obj));
	obj.symbol = tc_strdup("mm_cuda");
	if (tc_rt_compile_object(mod, "mm", in, 2, o, &obj) < 0) {
		CHECK(strstr(tc_context_error(ctx), "NVRTC") || strstr(tc_context_error(ctx), "nvrtc"),
			"object: %s", tc_context_error(ctx));
		printf("no NVRTC: %s\n", tc_context_error(ctx));
		return 0;
	}
	snprintf(head, sizeof(head), "%.*s", (int)(obj.size < 30 ? obj.size : 30),
		(const char *)obj.code);
	CHECK(!strncmp(head, "tcomp-cuda 1 sm_90 1 ", 21), "object header: %s", head);
	tc_rt_object_clear(&obj);
	unlink(cache);
	CHECK(tc_cache_key_init(&key, mod, "mm", in, 2) == 0, "key: %s", tc_context_error(ctx));
	CHECK(!strcmp(key.target, "unknown"), "key target %s", key.target);
	c = tc_cache_open(cache, TC_CACHE_WRITE, &msg);
	CHECK(c, "cache: %s", msg ? msg : "?");
	CHECK(tc_cache_record(c, &key, &run) == 0, "record: %s", tc_cache_error(c));
	CHECK(tc_cache_store_object(c, &key, mod, in, 2, "target=cuda") == 0, "store: %s",
		tc_cache_error(c));
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	tc_module_free(mod);
	tc_context_free(ctx);
	/* a new context reads it */
	ctx = tc_context_new();
	CHECK(tc_context_set_cache(ctx, cache) == 0 &&
		tc_context_set_cache_result_options(ctx, 1) == 0, "set cache");
	mod = tc_module_parse(ctx, mm_src, "mm.tc");
	k = tc_compile(mod, "mm", in, 2, NULL);
	CHECK(k, "compile: %s", tc_context_error(ctx));
	CHECK(!strcmp(tc_kernel_options_source(k), "cache"), "source %s",
		tc_kernel_options_source(k));
	CHECK(k->c->from_object == 1, "the cubin was not loaded from the cache");
	CHECK(!strcmp(k->c->backend->name, "cuda"), "backend %s", k->c->backend->name);
	{
		float fa[24], fb[18], fc[12]; /* host memory: the run fails before looking */
		DLTensor xa = tensor(gpu, fa, sa), xb = tensor(gpu, fb, sb);
		int64_t sc[2] = {4, 3};
		DLTensor xc = tensor(gpu, fc, sc);
		const DLTensor *xin[2] = {&xa, &xb};
		DLTensor *xout[1] = {&xc};
		CHECK(tc_kernel_run(k, xin, 2, xout, 1) < 0 && says(ctx, "no CUDA driver"),
			"run: %s", tc_context_error(ctx));
	}
	tc_kernel_free(k);
	tc_module_free(mod);
	tc_options_free(o);
	tc_context_free(ctx);
	tu_remove_db(cache);
	return 0;
}

/* Run this program with --open expected, TCOMP_CUDA_DRIVER set to driver
 * (NULL: unset); its exit status must be 0. */
static void run_child(const char *mode, const char *driver, const char *expected)
{
	int status = 0;
	pid_t pid;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (driver)
			setenv("TCOMP_CUDA_DRIVER", driver, 1);
		else
			unsetenv("TCOMP_CUDA_DRIVER");
		execl("/proc/self/exe", "test_cuda_driver", mode, expected, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("%s, TCOMP_CUDA_DRIVER=%s: see the message above", mode,
			driver ? driver : "(unset)");
}

/* The driver opened (--open) and the public API on it (--api). */
static void run_open(const char *driver, const char *expected)
{
	run_child("--open", driver, expected);
	run_child("--api", driver, expected);
}

static void a_missing_driver_is_a_clear_error(void **state)
{
	(void)state;
	run_open("/nonexistent/libcuda.so.1",
		"no CUDA driver: /nonexistent/libcuda.so.1 not found (/nonexistent/libcuda.so.1: "
		"cannot open shared object file: No such file or directory)");
}

static void a_library_that_is_no_driver_is_refused(void **state)
{
	(void)state;
	run_open("libm.so.6", "no CUDA driver: libm.so.6 lacks the driver API's entry points");
}

/* The toolkit's stub answers CUDA_ERROR_STUB_LIBRARY to cuInit: the one
 * CMake found, else the toolkit's usual place (skipped without either). */
static void the_toolkits_stub_is_a_clear_error(void **state)
{
#ifdef TCOMP_CUDA_STUB
	const char *stub = TCOMP_CUDA_STUB;
#else
	const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
#endif
	(void)state;
	if (access(stub, R_OK)) {
		printf("no stub libcuda.so at %s\n", stub);
		skip();
	}
	run_open(stub, "cuInit failed: CUDA_ERROR_STUB_LIBRARY");
}

static void cached_cubins_skip_nvrtc(void **state)
{
	char cache[512];
	(void)state;
	snprintf(cache, sizeof(cache), "%s/test_cuda_driver_%ld.sqlite", TC_BINARY_DIR,
		(long)getpid());
	run_child("--cache", "/nonexistent/libcuda.so.1", cache);
}

static void the_machines_own_driver(void **state)
{
	(void)state;
	run_open(NULL, "");
}

static void result_names(void **state)
{
	char buf[32];
	(void)state;
	assert_string_equal(tc_rt_cuda_result_name(34, buf, sizeof(buf)), "CUDA_ERROR_STUB_LIBRARY");
	assert_string_equal(tc_rt_cuda_result_name(100, buf, sizeof(buf)), "CUDA_ERROR_NO_DEVICE");
	assert_string_equal(tc_rt_cuda_result_name(12345, buf, sizeof(buf)), "CUDA error 12345");
	assert_string_equal(tc_rt_cuda_result_name(12345, NULL, 0), "CUDA error");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_missing_driver_is_a_clear_error),
		cmocka_unit_test(a_library_that_is_no_driver_is_refused),
		cmocka_unit_test(the_toolkits_stub_is_a_clear_error),
		cmocka_unit_test(the_machines_own_driver),
		cmocka_unit_test(cached_cubins_skip_nvrtc),
		cmocka_unit_test(result_names),
	};
	if (argc > 2 && !strcmp(argv[1], "--open"))
		return open_child(argv[2]);
	if (argc > 2 && !strcmp(argv[1], "--cache"))
		return cache_child(argv[2]);
	if (argc > 2 && !strcmp(argv[1], "--api"))
		return api_child(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
