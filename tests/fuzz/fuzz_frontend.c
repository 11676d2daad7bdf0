/* libFuzzer target for the front end, through the public API only.
 *
 * Each input is .tc text.  tc_module_parse takes a NUL-terminated string,
 * so the input is parsed as the C string it starts with (the text up to the
 * first NUL, copied into a buffer of exactly its size so that reading past
 * the terminator is caught by ASan); an input with embedded NULs is parsed a
 * second time with every NUL turned into a newline, so no mutation is
 * wasted.  For every def of a module that parses, the target asks for the
 * signature, the "syntax", "ir" and "canonical" texts and the hash, and reads
 * every string it gets back in full.
 *
 * Besides the sanitizers' findings (crashes, overflows, leaks, undefined
 * behaviour), the target aborts when the library breaks its documented
 * contract: a failed parse without an error message, a def of a parsed
 * module whose signature, stage text or hash cannot be produced, a hash that
 * is not 16 hex digits. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcomp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Sum of the bytes of s: reads the whole string, so ASan checks it all, and
 * gives the optimiser a use for the result. */
static volatile unsigned fuzz_sink;

static void consume(const char *s)
{
	unsigned h = 0;
	if (!s)
		return;
	while (*s)
		h += (unsigned char)*s++;
	fuzz_sink += h;
}

static void contract_failed(const char *what, const char *entry, const char *text)
{
	fprintf(stderr, "fuzz_frontend: contract violated: %s (def '%s')\n--- input ---\n%s\n",
		what, entry ? entry : "", text);
	abort();
}

static int is_hash(const char *h)
{
	int i;
	for (i = 0; i < 16; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f') ||
			    (h[i] >= 'A' && h[i] <= 'F')))
			return 0;
	return h[16] == '\0';
}

/* Everything the public API can tell about def number i of m. */
static void exercise_def(tc_context *ctx, tc_module *m, int i, const char *text)
{
	static const char *const stages[] = {"syntax", "ir", "canonical"};
	const char *borrowed = tc_module_def_name(m, i);
	char *name, *s, hash[17];
	size_t k;

	if (!borrowed)
		contract_failed("tc_module_def_name returned NULL for an index in range", NULL,
			text);
	/* Borrowed strings last until the next call on m: keep a copy. */
	name = malloc(strlen(borrowed) + 1);
	if (!name)
		return;
	strcpy(name, borrowed);

	s = tc_module_signature(m, name);
	if (!s)
		contract_failed("no signature for a def of a parsed module", name, text);
	consume(s);
	tc_string_free(s);

	for (k = 0; k < sizeof stages / sizeof stages[0]; k++) {
		s = tc_module_emit(m, name, stages[k]);
		consume(tc_context_error(ctx));
		if (!s)
			contract_failed(stages[k], name, text);
		consume(s);
		tc_string_free(s);
	}

	memset(hash, 'x', sizeof hash);
	if (tc_module_hash(m, name, hash) != 0)
		contract_failed("tc_module_hash failed for a def of a parsed module", name, text);
	if (!is_hash(hash))
		contract_failed("tc_module_hash wrote something else than 16 hex digits", name,
			text);

	/* Unknown entries and stages are errors, not crashes. */
	s = tc_module_emit(m, name, "no-such-stage");
	if (s)
		contract_failed("tc_module_emit accepted an unknown stage", name, text);
	consume(tc_context_error(ctx));
	free(name);
}

/* Parse one NUL-terminated text and exercise every def of the result. */
static void exercise_text(const char *text)
{
	tc_context *ctx = tc_context_new();
	tc_module *m;
	int i, n;

	if (!ctx)
		return;
	m = tc_module_parse(ctx, text, "fuzz.tc");
	consume(tc_context_warnings(ctx));
	if (!m) {
		const char *err = tc_context_error(ctx);
		if (!err || !*err)
			contract_failed("tc_module_parse failed without an error message", NULL,
				text);
		consume(err);
		tc_context_free(ctx);
		return;
	}
	n = tc_module_num_defs(m);
	for (i = 0; i < n; i++)
		exercise_def(ctx, m, i, text);
	if (tc_module_signature(m, "") != NULL)
		contract_failed("a signature for the empty def name", "", text);
	consume(tc_context_error(ctx));
	tc_module_free(m);
	tc_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const void *nul = memchr(data, 0, size);
	size_t len = nul ? (size_t)((const uint8_t *)nul - data) : size;
	char *text;

	/* The C string the input starts with, in a buffer of exactly its size. */
	text = malloc(len + 1);
	if (!text)
		return 0;
	memcpy(text, data, len);
	text[len] = '\0';
	exercise_text(text);
	free(text);

	/* The whole input, NULs turned into newlines. */
	if (nul) {
		size_t i;
		text = malloc(size + 1);
		if (!text)
			return 0;
		for (i = 0; i < size; i++)
			text[i] = data[i] ? (char)data[i] : '\n';
		text[size] = '\0';
		exercise_text(text);
		free(text);
	}
	return 0;
}
