/* Tests of the CUDA driver opened at run time (runtime/cuda_driver.c).
 *
 * The driver is opened once per process, so each case runs this program
 * again in a fresh process (--open EXPECTED, with TCOMP_CUDA_DRIVER set or
 * not), which opens the driver twice and checks that both calls give the
 * same answer: a missing file, a library that is no driver, the toolkit's
 * stub libcuda.so (where CMake found the toolkit: TCOMP_CUDA_STUB), and the
 * machine's own driver (a GPU machine opens it and sees a device; others
 * get one of the documented messages). */
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

#include "runtime/cuda_driver.h"

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

/* Run this program with --open expected, TCOMP_CUDA_DRIVER set to driver
 * (NULL: unset); its exit status must be 0. */
static void run_open(const char *driver, const char *expected)
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
		execl("/proc/self/exe", "test_cuda_driver", "--open", expected, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("TCOMP_CUDA_DRIVER=%s: see the message above", driver ? driver : "(unset)");
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

#ifdef TCOMP_CUDA_STUB
/* The toolkit's stub answers CUDA_ERROR_STUB_LIBRARY to cuInit. */
static void the_toolkits_stub_is_a_clear_error(void **state)
{
	(void)state;
	run_open(TCOMP_CUDA_STUB, "cuInit failed: CUDA_ERROR_STUB_LIBRARY");
}
#endif

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
#ifdef TCOMP_CUDA_STUB
		cmocka_unit_test(the_toolkits_stub_is_a_clear_error),
#endif
		cmocka_unit_test(the_machines_own_driver),
		cmocka_unit_test(result_names),
	};
	if (argc > 2 && !strcmp(argv[1], "--open"))
		return open_child(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
