/* The option table and tc_options objects. */
#include "options.h"

#include "../lang/util.h"

#include <stdarg.h>
#include <string.h>

typedef enum opt_type {
	OPT_ENUM, /* one of a '|'-separated list of words */
} opt_type;

typedef struct opt_def {
	const char *name;
	opt_type type;
	const char *values; /* OPT_ENUM: the allowed words */
	const char *def;
	const char *doc;
} opt_def;

/* The option table.  Every option of tcomp is one row here. */
static const opt_def opt_table[] = {
	{"target", OPT_ENUM, "cpu|interp", "cpu",
		"where kernels run: cpu compiles through isl and LLVM; interp is the reference interpreter (bounds-checked)"},
};
#define NOPTS ((int)(sizeof(opt_table) / sizeof(opt_table[0])))

struct tc_options {
	char *value[NOPTS];
};

tc_options *tc_options_new(void)
{
	return tc_calloc(1, sizeof(tc_options));
}

void tc_options_free(tc_options *o)
{
	int i;
	if (!o)
		return;
	for (i = 0; i < NOPTS; i++)
		tc_free(o->value[i]);
	tc_free(o);
}

tc_options *tc_options_copy(const tc_options *o)
{
	tc_options *c = tc_options_new();
	int i;
	for (i = 0; c && i < NOPTS; i++)
		if (o->value[i] && !(c->value[i] = tc_strdup(o->value[i]))) {
			tc_options_free(c);
			return NULL;
		}
	return c;
}

static int find_opt(const char *name)
{
	int i;
	for (i = 0; name && i < NOPTS; i++)
		if (!strcmp(opt_table[i].name, name))
			return i;
	return -1;
}

static int enum_has(const char *values, const char *v)
{
	size_t n = strlen(v);
	const char *p = values;
	while (*p) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && !strncmp(p, v, n))
			return 1;
		p += len + (bar ? 1 : 0);
	}
	return 0;
}

int tc_options_set(tc_options *o, const char *name, const char *value, tc_context *ctx)
{
	int i;
	char *v;
	if (!o || !name || !value) {
		tc_rt_set_error(ctx, "tc_options_set: NULL argument");
		return -1;
	}
	i = find_opt(name);
	if (i < 0) {
		tc_rt_set_error(ctx, "unknown option '%s' (options: see tc_options_describe or tcomp --help-options)",
			name);
		return -1;
	}
	if (opt_table[i].type == OPT_ENUM && !enum_has(opt_table[i].values, value)) {
		tc_rt_set_error(ctx, "option '%s' cannot be '%s' (allowed: %s)", name, value,
			opt_table[i].values);
		return -1;
	}
	v = tc_strdup(value);
	if (!v) {
		tc_rt_set_error(ctx, "out of memory");
		return -1;
	}
	tc_free(o->value[i]);
	o->value[i] = v;
	return 0;
}

const char *tc_options_get(const tc_options *o, const char *name)
{
	int i = find_opt(name);
	if (i < 0)
		return NULL;
	return o && o->value[i] ? o->value[i] : opt_table[i].def;
}

char *tc_options_describe(void)
{
	tc_buf b;
	int i;
	tc_buf_init(&b);
	for (i = 0; i < NOPTS; i++)
		tc_buf_printf(&b, "%-10s %-16s default %-8s %s\n", opt_table[i].name,
			opt_table[i].values, opt_table[i].def, opt_table[i].doc);
	return tc_buf_take(&b);
}

char *tc_rt_options_key(const tc_options *o)
{
	tc_buf b;
	int i;
	tc_buf_init(&b);
	for (i = 0; i < NOPTS; i++)
		tc_buf_printf(&b, "%s%s=%s", i ? ";" : "", opt_table[i].name,
			tc_options_get(o, opt_table[i].name));
	return tc_buf_take(&b);
}
