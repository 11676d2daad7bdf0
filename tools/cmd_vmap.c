/* tcomp vmap FILE.tc [-e NAME] --batch A,B --size E [-o OUT.tc]: print a
 * def batched over a leading model dimension (tc_module_vmap;
 * docs/language.md "Batching over models"). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const vmap_usage =
	"usage: tcomp vmap FILE.tc [-e NAME] --batch A,B --size E [-o OUT.tc]\n"
	"\n"
	"Print a def batched over a new leading dimension of extent E, as .tc text:\n"
	"the def of K models that share its other inputs, run as one set of kernels\n"
	"(jax.vmap with in_dims 0 for A and B, None for the other inputs).  A and B\n"
	"get E as their first dimension, and so does every tensor computed from\n"
	"them; each statement writing one gets a model index (e) as its first\n"
	"left-hand index.  The def keeps its name.  tcomp check, run and bench take\n"
	"the text as any .tc file.\n"
	"\n"
	"options:\n"
	"  -e, --entry NAME    the def (needed when FILE.tc has several)\n"
	"  --batch A,B         the inputs that get the model dimension\n"
	"  --size E            the name of its extent, a size the def does not use\n"
	"  -o FILE             write the text to FILE instead of stdout\n"
	"\n"
	"See docs/language.md \"Batching over models\".\n";

enum { OPT_BATCH = OPT_COMMAND, OPT_SIZE };

int cmd_vmap(int argc, __tc_keep char **argv)
{
	static const struct option longopts[] = {CLI_HELP, CLI_ENTRY,
		{"batch", required_argument, NULL, OPT_BATCH},
		{"size", required_argument, NULL, OPT_SIZE}, CLI_END};
	const char *entry = NULL, *batch = NULL, *size = NULL, *out = NULL;
	tc_context *ctx;
	tc_module *m;
	char *text;
	int c, status = 0;

	while ((c = cli_next_opt(argc, argv, "e:o:h", longopts, vmap_usage)) != -1) {
		if (take_entry_arg(&entry, NULL, NULL, c, optarg, vmap_usage))
			continue;
		if (c == OPT_BATCH)
			batch = optarg;
		else if (c == OPT_SIZE)
			size = optarg;
		else if (c == OPT_OUTPUT)
			out = optarg;
		else
			die_usage(vmap_usage, "%s", "unexpected option");
	}
	if (optind != argc - 1)
		die_usage(vmap_usage, "%s", "vmap needs exactly one FILE.tc");
	if (!batch)
		die_usage(vmap_usage, "%s", "vmap needs --batch A,B (the inputs to batch)");
	if (!size)
		die_usage(vmap_usage, "%s", "vmap needs --size E (the name of the new size)");
	if (!(ctx = tc_context_new()))
		return EXIT_INTERNAL;
	m = load_entry(ctx, argv[optind], &entry, vmap_usage, &status);
	if (!m) {
		tc_context_free(ctx);
		return status;
	}
	text = tc_module_vmap(m, entry, batch, size);
	status = text ? write_output(text, out) : report(ctx);
	tc_string_free(text);
	tc_module_free(m);
	tc_context_free(ctx);
	return status;
}
