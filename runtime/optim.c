/* The optimisers of the training runtime (include/tcomp.h, "training"):
 * each update is a .tc def, printed here and compiled like any other.
 *
 * The def sees every parameter as one flat vector (the model's parameter
 * arena) and updates it, and the optimiser's state, in place: the outputs
 * P, V and M accumulate into their existing contents (`*=` and `+=`
 * without '!', docs/language.md 5.4), so the parameters never move and no
 * copy follows the update.  The hyper-parameters are scalar inputs, so one
 * compiled kernel serves every learning rate and Adam's bias corrections
 * change per step without a recompile. */
#include "error.h"
#include "internal.h"

#include <string.h>

void tc_optimizer_init(tc_optimizer *o, tc_opt_kind kind, double lr)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->lr = lr;
	o->momentum = 0.9;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
}

char *tc_optimizer_source(const tc_optimizer *o, DLDataType dtype)
{
	const char *t;
	tc_buf b;
	if (!o || dtype.code != kDLFloat || dtype.lanes != 1)
		return NULL;
	if (dtype.bits == 32)
		t = "float32";
	else if (dtype.bits == 64)
		t = "float64";
	else
		return NULL;
	tc_buf_init(&b);
	switch (o->kind) {
	case TC_OPT_SGD:
		tc_buf_printf(&b,
			"# p -= lr * g over the flat parameter vector P, in place\n"
			"def sgd(%s(N) G, %s lr, %s decay) -> (%s(N) P) {\n", t, t, t, t);
		break;
	case TC_OPT_MOMENTUM:
		tc_buf_printf(&b,
			"# v = mu * v + g; p -= lr * v (dampening 0), in place\n"
			"def sgd_momentum(%s(N) G, %s lr, %s decay, %s mu) -> (%s(N) P, %s(N) V) {\n"
			"    V(i) *= mu\n"
			"    V(i) += G(i)\n",
			t, t, t, t, t, t);
		break;
	case TC_OPT_ADAM:
		tc_buf_printf(&b,
			"# Adam: c1 = 1 - b1^t and c2 = 1 - b2^t (the bias corrections) are\n"
			"# inputs, computed per step; m, v and p in place\n"
			"def adam(%s(N) G, %s lr, %s decay, %s b1, %s b2, %s eps, %s c1, %s c2) "
			"-> (%s(N) P, %s(N) M, %s(N) V) {\n"
			"    M(i) *= b1\n"
			"    M(i) += (1 - b1) * G(i)\n"
			"    V(i) *= b2\n"
			"    V(i) += (1 - b2) * G(i) * G(i)\n",
			t, t, t, t, t, t, t, t, t, t, t);
		break;
	default:
		return NULL;
	}
	/* decoupled weight decay first (p *= 1 - lr * wd); a statement only
	 * when there is a decay, so plain updates read P once */
	if (o->weight_decay != 0)
		tc_buf_printf(&b, "    P(i) *= decay\n");
	switch (o->kind) {
	case TC_OPT_SGD:
		tc_buf_printf(&b, "    P(i) += -lr * G(i)\n");
		break;
	case TC_OPT_MOMENTUM:
		tc_buf_printf(&b, "    P(i) += -lr * V(i)\n");
		break;
	case TC_OPT_ADAM:
		tc_buf_printf(&b, "    P(i) += -lr * (M(i) / c1) / (sqrt(V(i) / c2) + eps)\n");
		break;
	}
	tc_buf_printf(&b, "}\n");
	return tc_buf_take(&b);
}
