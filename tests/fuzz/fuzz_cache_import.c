/* libFuzzer target for the kernel cache's import (runtime/cache_json.c,
 * tc_cache_import: what `tcomp cache import` reads).
 *
 * Each input is the text of an export (JSON lines).  It is imported into a
 * cache file of the fuzzing process (under $TMPDIR, removed at exit, and
 * made afresh every 32 inputs so that listing it stays fast), which then
 * must still answer a listing and an export.  The target aborts when
 * the documented contract breaks: a database error on text (malformed lines
 * are skipped with a warning, never an error), counts that do not add up. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cache.h"
#include "runtime/cache_ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tc_cache *cache;
static char path[256];

static void contract_failed(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_cache_import: contract violated: %s (%s)\n", what,
		detail ? detail : "");
	abort();
}

static void remove_cache(void)
{
	char p[300];
	tc_cache_close(cache);
	cache = NULL;
	unlink(path);
	snprintf(p, sizeof p, "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof p, "%s-shm", path);
	unlink(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, *msg = NULL;
	int added = -1, present = -1, skipped = -1;
	static int uses, registered;
	tc_buf b;
	if (cache && ++uses % 32 == 0)
		remove_cache(); /* afresh, so that listing stays fast */
	if (!cache) {
		const char *tmp = getenv("TMPDIR");
		snprintf(path, sizeof path, "%s/fuzz_cache_import-%d.sqlite", tmp ? tmp : "/tmp",
			(int)getpid());
		cache = tc_cache_open(path, TC_CACHE_WRITE, &msg);
		if (!cache)
			contract_failed("cannot open a fresh cache", msg);
		if (!registered)
			atexit(remove_cache);
		registered = 1;
	}
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (tc_cache_import(cache, text, &added, &present, &skipped) != 0)
		contract_failed("import failed on text", tc_cache_error(cache));
	if (added < 0 || present < 0 || skipped < 0)
		contract_failed("negative counts", NULL);
	free(text);
	tc_buf_init(&b);
	if (tc_cache_list(cache, &b) != 0 || tc_cache_export(cache, &b) != 0)
		contract_failed("list or export failed after an import", tc_cache_error(cache));
	tc_buf_free(&b);
	return 0;
}
