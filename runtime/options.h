/* Mapping options: one declarative table (name, type, range, default, doc)
 * read by the API, the CLI and, later, the autotuner and the kernel cache.
 *
 * Ownership: the table and its strings are static; a tc_options owns its
 * values; strings returned through a char * or char ** are the caller's
 * (tc_free). */
#ifndef TC_RT_OPTIONS_H
#define TC_RT_OPTIONS_H

#include "tcomp.h"

#include "../lang/util.h"
#include "error.h"
#include "internal.h"

/* The kinds of option values (the table's type column).  The range column
 * is a '|'-separated list of alternatives, each a word ("auto") or an
 * integer interval "LO..HI" (both ends included), e.g. "auto|1..4096".
 *   TC_OPT_ENUM  one of the words of the range ("cpu|interp")
 *   TC_OPT_INT   one decimal integer inside one of the intervals, or one of
 *                the words
 *   TC_OPT_LIST  1 to TC_OPT_LIST_MAX comma-separated integers, each inside
 *                one of the intervals ("32,32,8"), or one of the words alone
 *   TC_OPT_PERM  a TC_OPT_LIST whose n integers are 0..n-1, each once (a
 *                permutation: "2,0,1"), or one of the words alone
 * Values are stored in a canonical form (integers without leading zeros or
 * '+'), so equal settings give equal memo keys and print the same. */
typedef enum tc_opt_type {
	TC_OPT_ENUM,
	TC_OPT_INT,
	TC_OPT_LIST,
	TC_OPT_PERM,
} tc_opt_type;

#define TC_OPT_LIST_MAX 16

/* Check value against a type and range; 0 with its canonical form in *canon
 * (owned by the caller; NULL when out of memory), or -1 if it is not
 * allowed.  Exposed for the tests of the value kinds. */
int tc_rt_opt_value(tc_opt_type type, const char *range, const char *value,
	__tc_give char **canon);

/* tc_options_set and tc_options_parse without a context: 0, or -1 with
 * the message in *msg ("line 3: unknown option 'x' (...)": no "error: "
 * prefix, no newline; owned by the caller, NULL when out of memory), for
 * callers that report it their own way (the kernel cache). */
int tc_rt_options_set(__tc_keep tc_options *o, const char *name, const char *value,
	__tc_give char **msg);
int tc_rt_options_parse(__tc_keep tc_options *o, const char *text, __tc_give char **msg);


/* "name=value;..." for every option in table order (defaults filled in):
 * the options' part of a kernel's memo key, owned by the caller.  NULL
 * when out of memory. */
__tc_give char *tc_rt_options_key(__tc_keep const tc_options *o);

/* Decode o (NULL: the defaults) into out.  Values were checked when set. */
void tc_rt_opts_decode(__tc_keep const tc_options *o, __tc_keep tc_rt_opts *out);

/* ---- the table, row by row (the autotuner's option space reads it) ---- */

/* The number of options (rows of the table). */
int tc_rt_opt_count(void);
/* Column of row i (0 <= i < tc_rt_opt_count(); NULL or -1 outside): the
 * name, the value type, the range ('|'-separated words and LO..HI
 * intervals, see tc_opt_type) and the default in canonical form.  The
 * strings are static. */
const char *tc_rt_opt_name(int i);
tc_opt_type tc_rt_opt_type(int i);
const char *tc_rt_opt_range(int i);
const char *tc_rt_opt_default(int i);
/* Whether o sets option i explicitly (tc_options_set or _parse gave it a
 * value, even the default one); 0 for a NULL o or a row outside the table. */
int tc_rt_options_is_set(__tc_keep const tc_options *o, int i);

#endif
