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
	/* Running kernels (NULL where the driver lacks one; backend_cuda.c
	 * says so): contexts, modules, launches, memory.  A CUdeviceptr is an
	 * unsigned long long; contexts, modules, functions and streams are
	 * pointers. */
	tc_cu_result (*primary_ctx_retain)(void **ctx, int device);
	tc_cu_result (*ctx_push)(void *ctx);
	tc_cu_result (*ctx_pop)(void **ctx);
	tc_cu_result (*module_load_data)(void **module, const void *image);
	tc_cu_result (*module_unload)(void *module);
	tc_cu_result (*module_get_function)(void **fn, void *module, const char *name);
	tc_cu_result (*launch_kernel)(void *fn, unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
		void **extra);
	tc_cu_result (*mem_alloc)(unsigned long long *ptr, size_t bytes);
	tc_cu_result (*mem_free)(unsigned long long ptr);
	tc_cu_result (*stream_synchronize)(void *stream);
	tc_cu_result (*pointer_get_attribute)(void *data, int attribute, unsigned long long ptr);
	tc_cu_result (*func_get_attribute)(int *value, int attribute, void *fn);
	/* Copies (synchronous for the host, ordered on the legacy default
	 * stream) and events (timing on a stream). */
	tc_cu_result (*memcpy_htod)(unsigned long long dst, const void *src, size_t bytes);
	tc_cu_result (*memcpy_dtoh)(void *dst, unsigned long long src, size_t bytes);
	tc_cu_result (*memcpy_dtod)(unsigned long long dst, unsigned long long src, size_t bytes);
	tc_cu_result (*event_create)(void **event, unsigned flags);
	tc_cu_result (*event_record)(void *event, void *stream);
	tc_cu_result (*event_synchronize)(void *event);
	tc_cu_result (*event_elapsed_time)(float *ms, void *start, void *end);
	tc_cu_result (*event_destroy)(void *event);
} tc_rt_cuda;

/* The driver API's constants tcomp uses (cuda.h's values). */
#define TC_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define TC_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define TC_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define TC_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define TC_CU_MEMORYTYPE_DEVICE 2
#define TC_CU_MEMORYTYPE_UNIFIED 4
#define TC_CU_FUNC_ATTRIBUTE_NUM_REGS 4

/* The driver, opened and initialised, with at least one device; or NULL
 * with the reason in err (n bytes; may be NULL). */
const tc_rt_cuda *tc_rt_cuda_driver(char *err, size_t n);

/* The device tcomp runs CUDA kernels on: ordinal 0 of the driver, its
 * primary context (retained once, kept for the process) and its compute
 * capability (major * 10 + minor).  Opened once per process, at first use,
 * after tc_rt_cuda_driver; NULL with the reason in err (n bytes; may be
 * NULL): the driver's ("no CUDA driver: ...", "no CUDA device"), or a
 * driver that lacks an entry point tcomp needs, or a device that does not
 * open.  Safe to call from several threads at once. */
typedef struct tc_rt_cuda_dev {
	const tc_rt_cuda *cu;
	int device;
	void *ctx;
	int arch;
} tc_rt_cuda_dev;
const tc_rt_cuda_dev *tc_rt_cuda_device(char *err, size_t n);

/* The name of driver result r ("CUDA_ERROR_NO_DEVICE"), from the driver
 * when it is open and knows it, else from tcomp's own list, else "CUDA
 * error R"; buf (n bytes) holds it when needed. */
const char *tc_rt_cuda_result_name(tc_cu_result r, char *buf, size_t n);

#endif
