/* NVRTC opened with dlopen (nvrtc.h).
 *
 * The few entry points tcomp calls are declared here with NVRTC's C types
 * (nvrtcResult an int, nvrtcProgram a pointer: the ABI of nvrtc.h since
 * CUDA 7), so the library builds without the toolkit's headers.  The
 * library is opened once per process (pthread_once) and never closed;
 * NVRTC itself is thread-safe for distinct programs. */
#include "nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtc_result; /* nvrtcResult: NVRTC_SUCCESS is 0 */
typedef struct nvrtc_prog *nvrtc_prog;

typedef struct nvrtc_api {
	void *lib;
	char why[1024]; /* why it could not be opened */
	const char *(*error_string)(nvrtc_result);
	nvrtc_result (*version)(int *, int *);
	nvrtc_result (*num_archs)(int *);
	nvrtc_result (*archs)(int *);
	nvrtc_result (*create)(nvrtc_prog *, const char *, const char *, int, const char *const *,
		const char *const *);
	nvrtc_result (*destroy)(nvrtc_prog *);
	nvrtc_result (*compile)(nvrtc_prog, int, const char *const *);
	nvrtc_result (*log_size)(nvrtc_prog, size_t *);
	nvrtc_result (*log)(nvrtc_prog, char *);
	nvrtc_result (*ptx_size)(nvrtc_prog, size_t *);
	nvrtc_result (*ptx)(nvrtc_prog, char *);
	nvrtc_result (*cubin_size)(nvrtc_prog, size_t *);
	nvrtc_result (*cubin)(nvrtc_prog, char *);
} nvrtc_api;

static nvrtc_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static const tc_loc noloc = {0, 0, 0, 0};

/* The files tried, in order (TCOMP_NVRTC alone when set). */
static const char *const candidates[] = {
#ifdef TCOMP_NVRTC_PATH
	TCOMP_NVRTC_PATH,
#endif
	"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
};

/* Every entry point, or the name of the first missing one. */
static const char *bind(void *lib)
{
	static const struct {
		const char *name;
		size_t off;
	} fns[] = {
		{"nvrtcGetErrorString", offsetof(nvrtc_api, error_string)},
		{"nvrtcVersion", offsetof(nvrtc_api, version)},
		{"nvrtcGetNumSupportedArchs", offsetof(nvrtc_api, num_archs)},
		{"nvrtcGetSupportedArchs", offsetof(nvrtc_api, archs)},
		{"nvrtcCreateProgram", offsetof(nvrtc_api, create)},
		{"nvrtcDestroyProgram", offsetof(nvrtc_api, destroy)},
		{"nvrtcCompileProgram", offsetof(nvrtc_api, compile)},
		{"nvrtcGetProgramLogSize", offsetof(nvrtc_api, log_size)},
		{"nvrtcGetProgramLog", offsetof(nvrtc_api, log)},
		{"nvrtcGetPTXSize", offsetof(nvrtc_api, ptx_size)},
		{"nvrtcGetPTX", offsetof(nvrtc_api, ptx)},
		{"nvrtcGetCUBINSize", offsetof(nvrtc_api, cubin_size)},
		{"nvrtcGetCUBIN", offsetof(nvrtc_api, cubin)},
	};
	size_t i;
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		void *f = dlsym(lib, fns[i].name);
		if (!f)
			return fns[i].name;
		memcpy((char *)&api + fns[i].off, &f, sizeof(f));
	}
	return NULL;
}

/* Append one reason (a failed name) to api.why, "; " between reasons,
 * truncated at its size. */
static void add_why(size_t *at, const char *name, const char *what, const char *detail)
{
	if (*at + 1 >= sizeof(api.why))
		return;
	*at += (size_t)snprintf(api.why + *at, sizeof(api.why) - *at, "%s%s%s%s",
		*at ? "; " : "", name, what, detail);
	if (*at >= sizeof(api.why))
		*at = sizeof(api.why) - 1;
}

static void open_once(void)
{
	const char *env = getenv("TCOMP_NVRTC"), *missing;
	size_t i, n = sizeof(candidates) / sizeof(candidates[0]);
	size_t at = 0;
	for (i = 0; i < (env && *env ? 1 : n); i++) {
		const char *name = env && *env ? env : candidates[i];
		void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		if (!lib) {
			const char *e = dlerror();
			add_why(&at, e ? e : name, "", "");
			continue;
		}
		if ((missing = bind(lib))) {
			add_why(&at, name, " has no ", missing);
			dlclose(lib);
			continue;
		}
		api.lib = lib;
		return;
	}
}

int tc_cg_nvrtc_available(__tc_keep tc_diags *d)
{
	pthread_once(&api_once, open_once);
	if (api.lib)
		return 1;
	tc_error(d, noloc, "NVRTC is not available (%s)%s", api.why,
		getenv("TCOMP_NVRTC") ? "" : "; set TCOMP_NVRTC to the path of libnvrtc.so");
	return 0;
}

/* NVRTC's name for result r. */
static const char *result_name(nvrtc_result r)
{
	const char *s = api.error_string ? api.error_string(r) : NULL;
	return s ? s : "unknown NVRTC error";
}

int tc_cg_nvrtc_version(int *major, int *minor, __tc_keep tc_diags *d)
{
	nvrtc_result r;
	if (!tc_cg_nvrtc_available(d))
		return -1;
	if ((r = api.version(major, minor))) {
		tc_error(d, noloc, "NVRTC: nvrtcVersion failed: %s", result_name(r));
		return -1;
	}
	return 0;
}

/* The number of "sm_XX"/"compute_XX" at s, or -1. */
static int arch_number(const char *s)
{
	const char *p = !strncmp(s, "sm_", 3) ? s + 3 : !strncmp(s, "compute_", 8) ? s + 8 : NULL;
	char *end;
	long v;
	if (!p || *p < '0' || *p > '9')
		return -1;
	v = strtol(p, &end, 10);
	/* a letter suffix (sm_90a, sm_100f) names a family of the same number */
	while (*end >= 'a' && *end <= 'z')
		end++;
	return *end || v <= 0 || v > 10000 ? -1 : (int)v;
}

int tc_cg_nvrtc_supports(__tc_keep const char *arch, __tc_keep tc_diags *d)
{
	int n = 0, i, want = arch ? arch_number(arch) : -1, *archs;
	tc_buf b;
	if (!tc_cg_nvrtc_available(d))
		return 0;
	if (want < 0) {
		tc_error(d, noloc, "'%s' is not a GPU architecture (sm_XX or compute_XX, as sm_90)",
			arch ? arch : "(null)");
		return 0;
	}
	if (api.num_archs(&n) || n <= 0 || !(archs = tc_calloc((size_t)n, sizeof(int)))) {
		tc_error(d, noloc, "NVRTC: cannot list the architectures it compiles for");
		return 0;
	}
	if (api.archs(archs)) {
		tc_free(archs);
		tc_error(d, noloc, "NVRTC: cannot list the architectures it compiles for");
		return 0;
	}
	for (i = 0; i < n; i++)
		if (archs[i] == want) {
			tc_free(archs);
			return 1;
		}
	tc_buf_init(&b);
	for (i = 0; i < n; i++)
		tc_buf_printf(&b, "%s%d", i ? ", " : "", archs[i]);
	tc_error(d, noloc, "NVRTC cannot compile for %s (it compiles for architectures %s)", arch,
		b.s ? b.s : "");
	tc_buf_free_diag(&b, d);
	tc_free(archs);
	return 0;
}

/* The program's log, NULL if it is empty or cannot be read. */
static char *program_log(nvrtc_prog prog)
{
	size_t n = 0;
	char *s;
	if (api.log_size(prog, &n) || n <= 1 || !(s = tc_malloc(n + 1)))
		return NULL;
	if (api.log(prog, s)) {
		tc_free(s);
		return NULL;
	}
	s[n] = 0;
	return s;
}

tc_stat tc_cg_nvrtc_compile(__tc_keep const char *source, __tc_keep const char *name,
	__tc_keep const char *arch, int cubin, __tc_give char **image, size_t *size,
	__tc_give char **log, __tc_keep tc_diags *d)
{
	nvrtc_prog prog = NULL;
	nvrtc_result r;
	char opt_arch[64], *text = NULL, *out = NULL;
	const char *opts[3];
	size_t n = 0;
	int nopts = 0;
	*image = NULL;
	*size = 0;
	if (log)
		*log = NULL;
	if (!tc_cg_nvrtc_supports(arch, d))
		return TC_ERR;
	if (cubin && strncmp(arch, "sm_", 3)) {
		tc_error(d, noloc, "NVRTC: a cubin is for a real architecture (sm_XX), not %s", arch);
		return TC_ERR;
	}
	snprintf(opt_arch, sizeof(opt_arch), "--gpu-architecture=%s", arch);
	opts[nopts++] = opt_arch;
	/* no multiply-add contraction of NVRTC's own: the source spells out
	 * every fmaf the IR's rule asks for (ir/ir.h, tc_ir_fma), so the GPU
	 * rounds as the interpreter and the CPU code do */
	opts[nopts++] = "--fmad=false";
	if (cubin && log) /* ptxas's report of registers, spills, shared memory */
		opts[nopts++] = "--ptxas-options=--verbose";
	if ((r = api.create(&prog, source, name, 0, NULL, NULL))) {
		tc_error(d, noloc, "NVRTC: cannot create a program for %s: %s", name, result_name(r));
		return TC_ERR;
	}
	r = api.compile(prog, nopts, opts);
	text = program_log(prog);
	if (r) {
		tc_error(d, noloc, "NVRTC: cannot compile %s for %s: %s%s%s", name, arch,
			result_name(r), text ? "\n" : "", text ? text : "");
		goto fail;
	}
	if ((r = cubin ? api.cubin_size(prog, &n) : api.ptx_size(prog, &n)) || !n) {
		tc_error(d, noloc, "NVRTC: cannot read the %s of %s: %s", cubin ? "cubin" : "PTX",
			name, r ? result_name(r) : "it is empty");
		goto fail;
	}
	if (!(out = tc_malloc(n))) {
		tc_error(d, noloc, "out of memory for the %s of %s (%zu bytes)",
			cubin ? "cubin" : "PTX", name, n);
		goto fail;
	}
	if ((r = cubin ? api.cubin(prog, out) : api.ptx(prog, out))) {
		tc_error(d, noloc, "NVRTC: cannot read the %s of %s: %s", cubin ? "cubin" : "PTX",
			name, result_name(r));
		goto fail;
	}
	api.destroy(&prog);
	*image = out;
	*size = n;
	if (log)
		*log = text;
	else
		tc_free(text);
	return TC_OK;
fail:
	api.destroy(&prog);
	tc_free(out);
	if (log)
		*log = text;
	else
		tc_free(text);
	return TC_ERR;
}
