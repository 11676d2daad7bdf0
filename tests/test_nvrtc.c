/* Tests of NVRTC opened at run time (codegen/nvrtc.c).
 *
 * Built where CMake found the CUDA toolkit (TCOMP_HAVE_NVRTC): NVRTC must
 * open, report its version, and compile CUDA C to PTX and to a cubin for
 * sm_90 and an older architecture; a source with errors fails with NVRTC's
 * log in the message; architectures it lacks are refused with the list it
 * has; the source's multiply-adds stay unfused unless written as fmaf.
 * Everywhere: a TCOMP_NVRTC naming a missing file is a clear error (in a
 * child process, since the library is opened once per process). */
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

#include "codegen/nvrtc.h"

static const char *const add_source =
	"extern \"C\" __global__ void add(const float *a, const float *b, float *c, int n)\n"
	"{\n"
	"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"    if (i < n)\n"
	"        c[i] = a[i] * b[i] + c[i];\n"
	"}\n"
	"extern \"C\" __global__ void fused(const float *a, const float *b, float *c, int n)\n"
	"{\n"
	"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"    if (i < n)\n"
	"        c[i] = fmaf(a[i], b[i], c[i]);\n"
	"}\n";

/* The text of d's messages. */
static char *messages(tc_diags *d)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_diags_render(d, 1u << TC_SEV_ERROR, &b);
	return tc_buf_take(&b);
}

#ifdef TCOMP_HAVE_NVRTC
static void opens_and_reports_its_version(void **state)
{
	tc_diags d;
	int major = 0, minor = -1;
	(void)state;
	tc_diags_init(&d, NULL);
	assert_int_equal(tc_cg_nvrtc_available(&d), 1);
	assert_int_equal(tc_cg_nvrtc_version(&major, &minor, &d), 0);
	assert_true(major >= 12);
	assert_true(minor >= 0);
	assert_int_equal(d.nerrors, 0);
	tc_diags_clear(&d);
}

/* PTX for sm_90 and sm_80, the entry points in it; a cubin (an ELF file)
 * for both. */
static void compiles_to_ptx_and_cubin(void **state)
{
	static const char *const archs[] = {"sm_90", "sm_80"};
	size_t i;
	(void)state;
	for (i = 0; i < 2; i++) {
		tc_diags d;
		char *image = NULL, *log = NULL, target[32];
		size_t size = 0;
		tc_diags_init(&d, NULL);
		assert_int_equal(tc_cg_nvrtc_compile(add_source, "add.cu", archs[i], 0, &image, &size,
					 &log, &d), TC_OK);
		assert_int_equal(size, strlen(image) + 1);
		snprintf(target, sizeof(target), ".target %s", archs[i]);
		assert_non_null(strstr(image, target));
		assert_non_null(strstr(image, ".entry add("));
		assert_non_null(strstr(image, ".entry fused("));
		tc_free(image);
		tc_free(log);
		assert_int_equal(tc_cg_nvrtc_compile(add_source, "add.cu", archs[i], 1, &image, &size,
					 NULL, &d), TC_OK);
		assert_true(size > 64);
		assert_memory_equal(image, "\177ELF", 4);
		tc_free(image);
		assert_int_equal(d.nerrors, 0);
		tc_diags_clear(&d);
	}
}

/* a * b + c stays a multiply and an add (--fmad=false); fmaf is one fma. */
static void multiply_adds_are_fused_only_where_written(void **state)
{
	tc_diags d;
	char *ptx = NULL, *add, *fused;
	size_t size;
	(void)state;
	tc_diags_init(&d, NULL);
	assert_int_equal(tc_cg_nvrtc_compile(add_source, "add.cu", "sm_90", 0, &ptx, &size, NULL,
				 &d), TC_OK);
	add = strstr(ptx, ".entry add(");
	fused = strstr(ptx, ".entry fused(");
	assert_non_null(add);
	assert_non_null(fused);
	assert_true(add < fused);
	fused[0] = 0; /* the text of add alone */
	assert_null(strstr(add, "fma.rn.f32"));
	assert_non_null(strstr(add, "mul.rn.f32"));
	assert_non_null(strstr(add, "add.rn.f32"));
	assert_non_null(strstr(fused + 1, "fma.rn.f32"));
	tc_free(ptx);
	tc_diags_clear(&d);
}

/* A source with errors: an error naming the unit and the architecture,
 * NVRTC's log (with the line) in the message and in *log. */
static void errors_carry_the_log(void **state)
{
	tc_diags d;
	char *image = (char *)1, *log = NULL, *msg;
	size_t size = 1;
	(void)state;
	tc_diags_init(&d, NULL);
	assert_int_equal(tc_cg_nvrtc_compile("extern \"C\" __global__ void k(float *x)\n"
					     "{\n    x[0] = undeclared_name;\n}\n",
				 "broken.cu", "sm_90", 0, &image, &size, &log, &d), TC_ERR);
	assert_null(image);
	assert_int_equal(size, 0);
	assert_non_null(log);
	assert_non_null(strstr(log, "undeclared_name"));
	msg = messages(&d);
	assert_non_null(strstr(msg, "NVRTC: cannot compile broken.cu for sm_90"));
	assert_non_null(strstr(msg, "broken.cu(3)"));
	assert_non_null(strstr(msg, "undeclared_name"));
	tc_free(msg);
	tc_free(log);
	tc_diags_clear(&d);
}

/* Architectures NVRTC lacks, names that are none, a cubin of a virtual
 * architecture: errors, nothing compiled. */
static void bad_architectures_are_refused(void **state)
{
	static const struct {
		const char *arch;
		int cubin;
		const char *says;
	} cases[] = {
		{"sm_10", 0, "NVRTC cannot compile for sm_10 (it compiles for architectures "},
		{"gfx90a", 0, "'gfx90a' is not a GPU architecture"},
		{"sm_", 0, "'sm_' is not a GPU architecture"},
		{"sm_90x1", 0, "'sm_90x1' is not a GPU architecture"},
		{"compute_90", 1, "a cubin is for a real architecture (sm_XX), not compute_90"},
	};
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tc_diags d;
		char *image = NULL, *msg;
		size_t size = 0;
		tc_diags_init(&d, NULL);
		assert_int_equal(tc_cg_nvrtc_compile(add_source, "add.cu", cases[i].arch,
					 cases[i].cubin, &image, &size, NULL, &d), TC_ERR);
		assert_null(image);
		msg = messages(&d);
		if (!strstr(msg, cases[i].says))
			fail_msg("%s: expected \"%s\" in:\n%s", cases[i].arch, cases[i].says, msg);
		tc_free(msg);
		tc_diags_clear(&d);
	}
	{
		tc_diags d;
		tc_diags_init(&d, NULL);
		assert_int_equal(tc_cg_nvrtc_supports("compute_90", &d), 1);
		assert_int_equal(tc_cg_nvrtc_supports("sm_90a", &d), 1);
		assert_int_equal(d.nerrors, 0);
		tc_diags_clear(&d);
	}
}
#endif

/* TCOMP_NVRTC naming a missing file: unavailable, the path and dlerror's
 * reason in the message, compiling refused.  Run by a fresh process (this
 * program again, with --missing-library), since the library is opened
 * once per process.  Returns the exit status. */
static int missing_library_child(void)
{
	tc_diags d;
	char *image = NULL, *msg;
	size_t size;
	int ok;
	tc_diags_init(&d, NULL);
	ok = !tc_cg_nvrtc_available(&d);
	ok &= tc_cg_nvrtc_compile(add_source, "add.cu", "sm_90", 0, &image, &size, NULL, &d) ==
		      TC_ERR &&
	      !image;
	msg = messages(&d);
	ok &= strstr(msg, "NVRTC is not available (/nonexistent/libnvrtc.so.13") != NULL;
	ok &= strstr(msg, "No such file") != NULL;
	if (!ok)
		fprintf(stderr, "unexpected: %s\n", msg);
	tc_free(msg);
	tc_diags_clear(&d);
	return ok ? 0 : 1;
}

static void a_missing_library_is_a_clear_error(void **state)
{
	int status = 0;
	pid_t pid;
	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("TCOMP_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
		execl("/proc/self/exe", "test_nvrtc", "--missing-library", (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--missing-library"))
		return missing_library_child();
	const struct CMUnitTest tests[] = {
#ifdef TCOMP_HAVE_NVRTC
		cmocka_unit_test(opens_and_reports_its_version),
		cmocka_unit_test(compiles_to_ptx_and_cubin),
		cmocka_unit_test(multiply_adds_are_fused_only_where_written),
		cmocka_unit_test(errors_carry_the_log),
		cmocka_unit_test(bad_architectures_are_refused),
#endif
		cmocka_unit_test(a_missing_library_is_a_clear_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
