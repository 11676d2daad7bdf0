/* tcomp grad FILE.tc [-e NAME] [--wrt A,B] [--saves] [--per-sample B]
 * [-o OUT.tc]: print the backward def of a def (tc_module_grad, or
 * tc_module_grad_per_sample with --per-sample; README "Gradients"). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const grad_usage =
	"usage: tcomp grad FILE.tc [-e NAME] [--wrt A,B] [--saves] [--per-sample B]\n"
	"                  [-o OUT.tc]\n"
	"\n"
	"Print the backward def of a def as .tc text (reverse-mode automatic\n"
	"differentiation): a def named NAME_grad whose inputs are NAME's inputs,\n"
	"then d_O for each output O, and whose outputs are d_X for each input X\n"
	"asked for.  tcomp check, run and bench take the text as any .tc file.\n"
	"\n"
	"options:\n"
	"  -e, --entry NAME    the def (needed when FILE.tc has several)\n"
	"  --wrt A,B           the inputs to differentiate with respect to\n"
	"                      (default: every floating-point input)\n"
	"  --saves             the temporaries the backward def reads are its\n"
	"                      inputs, returned by a def NAME_fwd printed first\n"
	"                      (NAME with them as outputs); without it they are\n"
	"                      recomputed inside the backward def\n"
	"  --per-sample B      per-sample gradients over the batch size B (a size\n"
	"                      of NAME): each gradient of an input without a\n"
	"                      dimension of size B gets B as its first dimension,\n"
	"                      d_W(b,...) being sample b's, instead of the sum\n"
	"                      over the batch; NAME must treat its samples\n"
	"                      independently\n"
	"  -o FILE             write the text to FILE instead of stdout\n"
	"\n"
	"Constructs not supported yet (offset or strided subscripts, gathers,\n"
	"max=!, min=!, *=!, in-place updates, exists clauses) are errors located\n"
	"in the source; see docs/language.md \"Gradients\".\n";

enum { OPT_WRT = OPT_COMMAND, OPT_SAVES, OPT_PER_SAMPLE };

int cmd_grad(int argc, __tc_keep char **argv)
{
	static const struct option longopts[] = {CLI_HELP, CLI_ENTRY,
		{"wrt", required_argument, NULL, OPT_WRT}, {"saves", no_argument, NULL, OPT_SAVES},
		{"per-sample", required_argument, NULL, OPT_PER_SAMPLE}, CLI_END};
	const char *entry = NULL, *wrt = NULL, *out = NULL, *batch = NULL;
	tc_context *ctx;
	tc_module *m;
	char *text;
	int c, status = 0, flags = 0;

	while ((c = cli_next_opt(argc, argv, "e:o:h", longopts, grad_usage)) != -1) {
		if (take_entry_arg(&entry, NULL, NULL, c, optarg, grad_usage))
			continue;
		if (c == OPT_WRT)
			wrt = optarg;
		else if (c == OPT_SAVES)
			flags |= TC_GRAD_SAVES;
		else if (c == OPT_PER_SAMPLE)
			batch = optarg;
		else if (c == OPT_OUTPUT)
			out = optarg;
		else
			die_usage(grad_usage, "%s", "unexpected option");
	}
	if (optind != argc - 1)
		die_usage(grad_usage, "%s", "grad needs exactly one FILE.tc");
	if (!(ctx = tc_context_new()))
		return EXIT_INTERNAL;
	m = load_entry(ctx, argv[optind], &entry, grad_usage, &status);
	if (!m) {
		tc_context_free(ctx);
		return status;
	}
	text = batch ? tc_module_grad_per_sample(m, entry, wrt, batch, flags)
		     : tc_module_grad(m, entry, wrt, flags);
	status = text ? write_output(text, out) : report(ctx);
	tc_string_free(text);
	tc_module_free(m);
	tc_context_free(ctx);
	return status;
}
