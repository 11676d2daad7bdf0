/* Checks of imported kernel cache rows (runtime/cache_check.h): is a
 * row's key one tc_cache_key_init could have made?  Pure functions of the
 * text, used by the storage's import (runtime/cache.c); they know the
 * dtype names (include/tcomp.h) and nothing of SQLite.
 * Entry point: tc_cache_check_key. */
#include "cache_check.h"

#include "tcomp.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Is s a decimal integer without sign or leading zeros (up to 2^62)?  Its
 * value into *v. */
static int plain_int(const char *s, const char *end, int64_t *v)
{
	int64_t x = 0;
	if (s == end || (*s == '0' && end - s > 1))
		return 0;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || x > ((int64_t)1 << 62) / 10)
			return 0;
		x = x * 10 + (*s - '0');
	}
	*v = x;
	return 1;
}

/* The number of commas in s. */
static int commas(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == ',';
	return n;
}

/* The next comma-separated item of *p (which moves past it): [*b, *e). */
static void next_item(const char **p, const char **b, const char **e)
{
	const char *c = strchr(*p, ',');
	*b = *p;
	*e = c ? c : *p + strlen(*p);
	*p = c ? c + 1 : *e;
}

/* Is t a machine part of a key (runtime/cache_key.c): the CPU's
 * "TRIPLE;CPU;FEATURES" (three fields, the first not empty), cuda's
 * "cuda;GPU NAME;sm_N;driver N", or cuda-emu's "cuda-emu;" and a CPU's? */
static int target_ok(const char *t)
{
	const char *p;
	int n = 0, len = -1;
	unsigned sm, drv;
	if (!strncmp(t, "cuda-emu;", 9))
		t += 9;
	else if (!strncmp(t, "cuda;", 5)) {
		p = strchr(t + 5, ';');
		return p && p > t + 5 && sscanf(p, ";sm_%u;driver %u%n", &sm, &drv, &len) == 2 &&
			len == (int)strlen(p);
	}
	p = strchr(t, ';');
	if (!p || p == t)
		return 0;
	for (; *t; t++)
		n += *t == ';';
	return n == 2;
}

int tc_cache_check_key(const char *entry, const char *types, const char *shapes,
	const char *strides, const char *target, const char *version, char *msg, size_t size)
{
	const char *t = types, *sh = shapes, *sd = strides, *p;
	int n = 0;
	msg[0] = 0;
	for (p = entry; *p; p++)
		if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (p > entry && *p >= '0' && *p <= '9')))
			break;
	if (!*entry || *p) {
		snprintf(msg, size, "entry \"%.64s\" is not a def name", entry);
		goto bad;
	}
	if (commas(t) != commas(sh) || commas(t) != commas(sd) || (!*t && (*sh || *sd))) {
		snprintf(msg, size, "%s", "not as many shapes and strides as types");
		goto bad;
	}
	while (*t) {
		const char *tb, *te, *sb, *se, *db, *de, *slash;
		char name[32];
		int64_t rank, ext[8], str[8], stride = 1;
		int k, ne = 0, ns = 0;
		DLDataType dt;
		const char *canon;
		n++;
		next_item(&t, &tb, &te);
		slash = memchr(tb, '/', (size_t)(te - tb));
		if (!slash || slash - tb >= (long)sizeof(name) || !plain_int(slash + 1, te, &rank) ||
			rank > 8) {
			snprintf(msg, size, "input %d: type \"%.*s\" is not DTYPE/RANK", n,
				(int)(te - tb > 64 ? 64 : te - tb), tb);
			goto bad;
		}
		memcpy(name, tb, (size_t)(slash - tb));
		name[slash - tb] = 0;
		if (tc_dtype_parse(name, &dt) < 0 || !(canon = tc_dtype_str(dt)) ||
			strcmp(canon, name)) {
			snprintf(msg, size, "input %d: unknown dtype \"%s\"", n, name);
			goto bad;
		}
		next_item(&sh, &sb, &se);
		next_item(&sd, &db, &de);
		while (sb < se) {
			const char *x = memchr(sb, 'x', (size_t)(se - sb));
			if (!x)
				x = se;
			if (ne == 8 || !plain_int(sb, x, &ext[ne]) || ext[ne] < 1) {
				snprintf(msg, size, "input %d: shape \"%.*s\" is not "
							   "extents of at least 1 joined by x", n,
					(int)(se - sb > 64 ? 64 : se - sb), sb);
				goto bad;
			}
			ne++;
			sb = x < se ? x + 1 : se;
			if (x < se && sb == se)
				ne = 9; /* a trailing x */
		}
		while (db < de) {
			const char *x = memchr(db, 'x', (size_t)(de - db));
			if (!x)
				x = de;
			if (ns == 8 || !plain_int(db, x, &str[ns])) {
				ns = 9;
				break;
			}
			ns++;
			db = x < de ? x + 1 : de;
		}
		if (ne != rank) {
			snprintf(msg, size, "input %d: a shape of rank %d for type %s/%d", n,
				ne, name, (int)rank);
			goto bad;
		}
		for (k = ne - 1; k >= 0 && ns == ne; k--) {
			if (str[k] != stride)
				ns = -1;
			if (stride > ((int64_t)1 << 62) / ext[k]) {
				snprintf(msg, size, "input %d: the shape has too many elements", n);
				goto bad;
			}
			stride *= ext[k];
		}
		if (ns != ne) {
			snprintf(msg, size, "input %d: strides are not the compact row-major "
						   "strides of the shape", n);
			goto bad;
		}
	}
	if (!target_ok(target)) {
		snprintf(msg, size, "target \"%.64s\" is not TRIPLE;CPU;FEATURES, "
				    "cuda;GPU;sm_N;driver N or cuda-emu;TRIPLE;CPU;FEATURES", target);
		goto bad;
	}
	{
		int a, b, d, len = -1;
		if (sscanf(version, "%d.%d.%d%n", &a, &b, &d, &len) != 3 ||
			len != (int)strlen(version) || version[0] < '0' ||
			version[0] > '9') {
			snprintf(msg, size, "version \"%.32s\" is not N.N.N", version);
			goto bad;
		}
	}
	return 0;
bad:
	return -1;
}

