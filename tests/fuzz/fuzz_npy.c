/* libFuzzer target for the .npy reader (tools/npy.c, tc_npy_parse).
 *
 * Each input is the bytes of a .npy file.  The target decodes it and, when
 * it decodes, reads every element byte (so ASan checks the data buffer is
 * as large as the shape says) and checks the reader's contract: a failure
 * has a message and leaves the struct zeroed, a success has a known dtype
 * and a buffer for its elements.  It aborts when the contract is broken. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned fuzz_sink;

static void contract_failed(const char *what)
{
	fprintf(stderr, "fuzz_npy: contract violated: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tc_npy a;
	char *err = NULL;
	static const tc_npy zero;
	if (tc_npy_parse(data, size, "fuzz.npy", &a, &err) != 0) {
		if (!err || !*err)
			contract_failed("a failed parse without a message");
		if (memcmp(&a, &zero, sizeof a))
			contract_failed("a failed parse left the struct set");
		fuzz_sink += (unsigned char)err[strlen(err) - 1];
		tc_free(err);
		return 0;
	}
	if (err)
		contract_failed("a message after a successful parse");
	{
		const unsigned char *p = a.data;
		size_t n = a.nbytes;
		int64_t numel = 1;
		if (!p)
			contract_failed("a successful parse without a buffer");
		int overflow = 0;
		if (a.ndim < 0 || a.ndim > TC_NPY_MAX_RANK)
			contract_failed("a rank out of range");
		/* a zero extent anywhere gives 0, whatever the others hold */
		for (int d = 0; d < a.ndim; d++)
			if (a.shape[d] == 0)
				numel = 0;
		for (int d = 0; d < a.ndim && numel; d++)
			overflow |= __builtin_mul_overflow(numel, a.shape[d], &numel);
		if (overflow || numel != a.numel)
			contract_failed("the element count is not the shape's");
		for (size_t i = 0; i < n; i++)
			fuzz_sink += p[i];
	}
	tc_npy_free(&a);
	return 0;
}
