/* The CUDA driver API opened with dlopen (cuda_driver.h). */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	tc_rt_cuda api;
	void *lib;
	tc_cu_result (*error_name)(tc_cu_result, const char **);
	tc_cu_result (*error_string)(tc_cu_result, const char **);
	int ok;
	char why[512];
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

/* The results tcomp names itself (the driver's names; cuda.h's values),
 * for when the driver cannot: absent, or the stub. */
static const struct {
	tc_cu_result r;
	const char *name;
} known[] = {
	{0, "CUDA_SUCCESS"},
	{1, "CUDA_ERROR_INVALID_VALUE"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY"},
	{3, "CUDA_ERROR_NOT_INITIALIZED"},
	{4, "CUDA_ERROR_DEINITIALIZED"},
	{34, "CUDA_ERROR_STUB_LIBRARY"},
	{35, "CUDA_ERROR_INSUFFICIENT_DRIVER"},
	{46, "CUDA_ERROR_DEVICES_UNAVAILABLE"},
	{100, "CUDA_ERROR_NO_DEVICE"},
	{101, "CUDA_ERROR_INVALID_DEVICE"},
	{218, "CUDA_ERROR_INVALID_PTX"},
	{222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
	{304, "CUDA_ERROR_OPERATING_SYSTEM"},
	{999, "CUDA_ERROR_UNKNOWN"},
};

const char *tc_rt_cuda_result_name(tc_cu_result r, char *buf, size_t n)
{
	const char *s = NULL;
	size_t i;
	if (drv.error_name && drv.error_name(r, &s) == 0 && s)
		return s;
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i].r == r)
			return known[i].name;
	if (buf && n) {
		snprintf(buf, n, "CUDA error %d", r);
		return buf;
	}
	return "CUDA error";
}

static void open_once(void)
{
	const char *env = getenv("TCOMP_CUDA_DRIVER"), *name = env && *env ? env : "libcuda.so.1";
	tc_cu_result (*init)(unsigned), (*version)(int *), (*count)(int *);
	const char *err, *desc = NULL;
	char buf[32];
	tc_cu_result r;
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		err = dlerror();
		snprintf(drv.why, sizeof(drv.why), "no CUDA driver: %s not found (%s)", name,
			err ? err : "dlopen failed");
		return;
	}
	*(void **)&init = dlsym(lib, "cuInit");
	*(void **)&version = dlsym(lib, "cuDriverGetVersion");
	*(void **)&count = dlsym(lib, "cuDeviceGetCount");
	*(void **)&drv.api.device_get = dlsym(lib, "cuDeviceGet");
	*(void **)&drv.api.device_name = dlsym(lib, "cuDeviceGetName");
	*(void **)&drv.api.device_attribute = dlsym(lib, "cuDeviceGetAttribute");
	*(void **)&drv.api.primary_ctx_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&drv.api.ctx_push = dlsym(lib, "cuCtxPushCurrent_v2");
	*(void **)&drv.api.ctx_pop = dlsym(lib, "cuCtxPopCurrent_v2");
	*(void **)&drv.api.module_load_data = dlsym(lib, "cuModuleLoadData");
	*(void **)&drv.api.module_unload = dlsym(lib, "cuModuleUnload");
	*(void **)&drv.api.module_get_function = dlsym(lib, "cuModuleGetFunction");
	*(void **)&drv.api.launch_kernel = dlsym(lib, "cuLaunchKernel");
	*(void **)&drv.api.mem_alloc = dlsym(lib, "cuMemAlloc_v2");
	*(void **)&drv.api.mem_free = dlsym(lib, "cuMemFree_v2");
	*(void **)&drv.api.stream_synchronize = dlsym(lib, "cuStreamSynchronize");
	*(void **)&drv.api.pointer_get_attribute = dlsym(lib, "cuPointerGetAttribute");
	*(void **)&drv.api.func_get_attribute = dlsym(lib, "cuFuncGetAttribute");
	*(void **)&drv.api.memcpy_htod = dlsym(lib, "cuMemcpyHtoD_v2");
	*(void **)&drv.api.memcpy_dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
	*(void **)&drv.api.memcpy_dtod = dlsym(lib, "cuMemcpyDtoD_v2");
	*(void **)&drv.api.event_create = dlsym(lib, "cuEventCreate");
	*(void **)&drv.api.event_record = dlsym(lib, "cuEventRecord");
	*(void **)&drv.api.event_synchronize = dlsym(lib, "cuEventSynchronize");
	*(void **)&drv.api.event_elapsed_time = dlsym(lib, "cuEventElapsedTime");
	*(void **)&drv.api.event_destroy = dlsym(lib, "cuEventDestroy_v2");
	*(void **)&drv.error_name = dlsym(lib, "cuGetErrorName");
	*(void **)&drv.error_string = dlsym(lib, "cuGetErrorString");
	if (!init || !version || !count || !drv.api.device_get || !drv.api.device_name ||
		!drv.api.device_attribute) {
		snprintf(drv.why, sizeof(drv.why),
			"no CUDA driver: %s lacks the driver API's entry points", name);
		drv.error_name = NULL;
		drv.error_string = NULL;
		dlclose(lib);
		return;
	}
	drv.lib = lib;
	if ((r = init(0))) {
		/* the stub's cuGetErrorName answers the stub's error too: use
		 * tcomp's names, which need no driver */
		if (drv.error_string && drv.error_string(r, &desc))
			desc = NULL;
		drv.error_name = NULL;
		snprintf(drv.why, sizeof(drv.why), "CUDA driver (%s): cuInit failed: %s%s%s%s", name,
			tc_rt_cuda_result_name(r, buf, sizeof(buf)), desc ? " (" : "",
			desc ? desc : "", desc ? ")" : "");
		return;
	}
	if ((r = version(&drv.api.driver_version))) {
		snprintf(drv.why, sizeof(drv.why), "CUDA driver (%s): cuDriverGetVersion failed: %s",
			name, tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return;
	}
	r = count(&drv.api.ndevices);
	if (r || drv.api.ndevices < 1) {
		snprintf(drv.why, sizeof(drv.why), "no CUDA device (driver %d.%d%s%s)",
			drv.api.driver_version / 1000, drv.api.driver_version % 1000 / 10,
			r ? ": cuDeviceGetCount failed: " : "", r ? tc_rt_cuda_result_name(r, buf,
								   sizeof(buf)) : "");
		return;
	}
	drv.ok = 1;
}

const tc_rt_cuda *tc_rt_cuda_driver(char *err, size_t n)
{
	pthread_once(&drv_once, open_once);
	if (drv.ok)
		return &drv.api;
	if (err && n)
		snprintf(err, n, "%s", drv.why);
	return NULL;
}

static tc_rt_cuda_dev dev;
static char dev_why[640];
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

static void dev_open(void)
{
	char why[512], buf[32];
	const tc_rt_cuda *cu = tc_rt_cuda_driver(why, sizeof(why));
	int major = 0, minor = 0;
	tc_cu_result r;
	if (!cu) {
		snprintf(dev_why, sizeof(dev_why), "%s", why);
		return;
	}
	if (!cu->primary_ctx_retain || !cu->ctx_push || !cu->ctx_pop || !cu->module_load_data ||
		!cu->module_unload || !cu->module_get_function || !cu->launch_kernel ||
		!cu->mem_alloc || !cu->mem_free || !cu->stream_synchronize ||
		!cu->pointer_get_attribute || !cu->memcpy_htod || !cu->memcpy_dtoh ||
		!cu->memcpy_dtod || !cu->event_create || !cu->event_record ||
		!cu->event_synchronize || !cu->event_elapsed_time || !cu->event_destroy) {
		snprintf(dev_why, sizeof(dev_why), "the CUDA driver lacks entry points tcomp needs "
			"(cuLaunchKernel, cuMemAlloc_v2, cuEventElapsedTime, ...): a driver for CUDA 11 "
			"or later");
		return;
	}
	if ((r = cu->device_get(&dev.device, 0)) ||
		(r = cu->device_attribute(&major, TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
			 dev.device)) ||
		(r = cu->device_attribute(&minor, TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
			 dev.device)) ||
		(r = cu->primary_ctx_retain(&dev.ctx, dev.device))) {
		snprintf(dev_why, sizeof(dev_why), "opening CUDA device 0 failed: %s",
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return;
	}
	dev.arch = major * 10 + minor;
	dev.cu = cu; /* the primary context stays with the process */
}

const tc_rt_cuda_dev *tc_rt_cuda_device(char *err, size_t n)
{
	pthread_once(&dev_once, dev_open);
	if (dev.cu)
		return &dev;
	if (err && n)
		snprintf(err, n, "%s", dev_why);
	return NULL;
}
