/* The CUDA driver API opened with dlopen at run time (runtime/cuda_driver.c; not cuda.h, the toolkit's header's name).
 *
 * tcomp never links against libcuda: the library builds, links and runs its
 * CPU path on machines without a GPU or a driver.  The driver is opened
 * once per process, at first use, from libcuda.so.1 through the dynamic
 * linker's search, or from the file the environment variable
 * TCOMP_CUDA_DRIVER names (then no other); cuInit(0) runs then, and the
 * devices are counted.  What went wrong, if anything, is kept and given to
 * every later caller: "no CUDA driver: libcuda.so.1 not found (...)", "CUDA
 * driver: cuInit failed: CUDA_ERROR_STUB_LIBRARY (...)" (the toolkit's stub
 * library, which answers every call so), "no CUDA device".  Safe to call
 * from several threads at once.
 *
 * Only the entry points tcomp calls are bound, with the driver API's C
 * types spelled out (CUresult an int, CUdevice an int), so the toolkit's
 * headers are not needed to build. */
#ifndef TC_RT_CUDA_DRIVER_H
#define TC_RT_CUDA_DRIVER_H

#include <stddef.h>

typedef int tc_cu_result; /* CUresult: CUDA_SUCCESS is 0 */

typedef struct tc_rt_cuda {
	int driver_version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
	int ndevices;
	tc_cu_result (*device_get)(int *device, int ordinal);
	tc_cu_result (*device_name)(char *name, int len, int device);
	tc_cu_result (*device_attribute)(int *value, int attribute, int device);
} tc_rt_cuda;

/* The driver, opened and initialised, with at least one device; or NULL
 * with the reason in err (n bytes; may be NULL). */
const tc_rt_cuda *tc_rt_cuda_driver(char *err, size_t n);

/* The name of driver result r ("CUDA_ERROR_NO_DEVICE"), from the driver
 * when it is open and knows it, else from tcomp's own list, else "CUDA
 * error R"; buf (n bytes) holds it when needed. */
const char *tc_rt_cuda_result_name(tc_cu_result r, char *buf, size_t n);

#endif
