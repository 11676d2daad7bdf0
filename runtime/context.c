/* Contexts (include/tcomp.h): what a program creates first and frees last:
 * the lock, the thread count for parallel loops, the kernel cache's path,
 * the warnings of the last parse, and each backend's state (the JIT). */
#include "backend.h"
#include "error.h"
#include "internal.h"

#include <pthread.h>

tc_context *tc_context_new(void)
{
	tc_context *ctx = tc_calloc(1, sizeof(tc_context));
	pthread_mutexattr_t attr;
	if (!ctx)
		return NULL;
	/* recursive: tc_compile holds it while lowering, which takes it too */
	if (pthread_mutexattr_init(&attr) != 0 ||
		pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) != 0 ||
		pthread_mutex_init(&ctx->lock, &attr) != 0) {
		tc_free(ctx);
		return NULL;
	}
	pthread_mutexattr_destroy(&attr);
	ctx->serial = tc_rt_error_serial();
	return ctx;
}

void tc_context_free(tc_context *ctx)
{
	if (!ctx)
		return;
	tc_rt_error_forget(ctx); /* the calling thread's message about ctx */
	tc_rt_backend_states_free(ctx);
	pthread_mutex_destroy(&ctx->lock);
	tc_free(ctx->cache_path);
	tc_free(ctx->warnings);
	tc_free(ctx);
}

const char *tc_context_warnings(const tc_context *ctx)
{
	return ctx && ctx->warnings ? ctx->warnings : "";
}

int tc_context_set_threads(tc_context *ctx, int threads)
{
	if (!ctx)
		return -1;
	if (threads < 0 || threads > 256) {
		tc_rt_set_error(ctx, "thread count %d is out of range (0 for one per CPU this process may run on, or 1 to 256)",
			threads);
		return -1;
	}
	tc_rt_clear_error(ctx);
	__atomic_store_n(&ctx->threads, threads, __ATOMIC_RELAXED);
	return 0;
}

int tc_context_threads(const tc_context *ctx)
{
	return ctx ? __atomic_load_n(&ctx->threads, __ATOMIC_RELAXED) : -1;
}

void tc_string_free(char *s)
{
	tc_free(s);
}
