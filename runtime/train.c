/* The training runtime (include/tcomp.h, "training"): a model of a
 * forward def, a loss def and parameters; its step as a fixed sequence of
 * compiled kernels over buffers allocated once.
 *
 * Building a model (tc_model_build):
 *   1. the parameters are laid out in one arena P (each 64-byte aligned),
 *      their gradients at the same offsets in an arena G of the same size;
 *      the optimiser (runtime/optim.c) updates P as one flat vector;
 *   2. tc_module_grad derives the forward's backward with respect to the
 *      parameters and the loss's with respect to its first inputs (the
 *      forward's outputs), both with saves: "<def>_fwd" returns the
 *      temporaries "<def>_grad" reads, so nothing is computed twice;
 *   3. each def of the step is compiled for the model's shapes, its inputs
 *      bound by name to buffers (two name spaces: the forward def's names
 *      and the loss def's; forward output i is loss input i, and the loss
 *      backward's d_<loss input i> is the forward backward's d_<output i>),
 *      its outputs given new buffers or, for the gradients, views of G.
 *
 * Ownership: the model holds a reference to the user's module, owns the
 * derived modules, kernels, buffers and names; DLTensors returned by
 * tc_model_tensor are the model's. */
#include "data.h"
#include "error.h"
#include "internal.h"
#include "module.h"
#include "safetensors.h"
#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ALIGN 64

/* A tensor of the model: a DLTensor over memory the model owns (mem, the
 * unaligned block) or a view of an arena (mem NULL). */
typedef struct tbuf {
	DLTensor dl;
	int64_t shape[TC_MAX_RANK];
	void *mem;
} tbuf;

/* A name in one of the two name spaces, bound to a buffer. */
typedef struct tname {
	char *name;
	tbuf *b;
} tname;

/* A declared parameter or data input. */
typedef struct tdecl {
	char *name;
	int ndim;
	int64_t shape[TC_MAX_RANK];
	int param;
	tc_init init;
	int64_t offset; /* parameters: element offset in the arenas */
	tbuf *b;        /* after build */
	/* the shape of the model's tensor: the declared one, in an ensemble of
	 * k models k x the declared one for a parameter (set by build) */
	int endim;
	int64_t eshape[TC_MAX_RANK + 1];
	tbuf *state[2]; /* parameters: views of the optimiser's state S1, S2 */
} tdecl;

/* One kernel run of a step: what it is (for tc_model_describe), the kernel
 * and its tensors. */
typedef struct tcall {
	char *what;
	tc_kernel *k;
	int nin, nout;
	DLTensor **in, **out;
} tcall;

/* The step on the first rows rows of the data inputs (a partial batch):
 * the calls before the update, compiled for those shapes, over views of the
 * model's buffers (tc_model_step_rows). */
typedef struct tpart {
	int64_t rows;
	struct tcall *calls; /* CALL_OPT of them */
} tpart;

enum { NS_FWD, NS_LOSS };
enum { CALL_FWD, CALL_LOSS, CALL_LOSS_GRAD, CALL_FWD_GRAD, CALL_OPT, NCALLS };
enum { HP_LR, HP_DECAY, HP_MU, HP_B1, HP_B2, HP_EPS, HP_C1, HP_C2, NHP };

struct tc_model {
	tc_context *ctx;
	tc_module *m;                /* the user's (a reference) */
	/* the module the step's defs are read from: m, or in an ensemble the
	 * defs batched over the models (owned; its text etext) */
	tc_module *src;
	char *etext;
	int64_t ens; /* the ensemble's size; 0: not an ensemble */
	tc_module *mf, *ml, *mo;     /* derived: forward's backward, loss's, optimiser */
	char *fwd, *loss;            /* def names */
	char *ftext, *ltext, *otext; /* their sources */
	int nfin, nfout, nlin;       /* arities */
	tc_vec decls;                /* tdecl * */
	tc_vec bufs;                 /* tbuf *, owned */
	tc_vec names[2];             /* tname *, per name space */
	tcall calls[NCALLS];
	tcall eval[2]; /* the forward and the loss without saves */
	tc_vec parts;  /* tpart *: the step's kernels for partial batches */
	int64_t batch; /* the data inputs' first extent (0: they differ) */
	tc_options *options;
	tc_optimizer opt;
	DLDataType pdtype;
	int64_t nflat; /* elements of each arena */
	tbuf *P, *G, *S1, *S2; /* arenas and the optimiser's state */
	tbuf *hp[NHP];         /* scalar hyper-parameters */
	tbuf *lossb;
	int64_t t; /* steps taken */
	int built;
};

static tc_module *call_module(tc_model *md, int i);
static void call_free(tcall *c);

/* ---- buffers and names ---- */

static size_t dtype_size(DLDataType d)
{
	return (size_t)d.bits / 8 * d.lanes;
}

static int64_t numel(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= shape[i];
	return n;
}

/* A new buffer of md (which owns it) of this type and shape: zeroed
 * memory, so every page is touched now and not in the first step.  NULL
 * when out of memory (message set). */
static tbuf *buf_new(tc_model *md, DLDataType dtype, int ndim, const int64_t *shape)
{
	size_t bytes = dtype_size(dtype);
	tbuf *b = tc_calloc(1, sizeof(*b));
	if (!b)
		goto nomem;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0 || __builtin_mul_overflow(bytes, (size_t)shape[i], &bytes))
			goto toolarge;
		b->shape[i] = shape[i];
	}
	if (bytes > SIZE_MAX - ALIGN)
		goto toolarge;
	if (!(b->mem = tc_malloc(bytes + ALIGN)))
		goto nomem;
	b->dl.data = (void *)(((uintptr_t)b->mem + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
	memset(b->dl.data, 0, bytes);
	b->dl.device.device_type = kDLCPU;
	b->dl.ndim = ndim;
	b->dl.dtype = dtype;
	b->dl.shape = b->shape;
	if (tc_vec_push(&md->bufs, b) < 0)
		goto nomem;
	return b;
toolarge:
	tc_rt_set_error(md->ctx, "a tensor of the model is too large");
	goto error;
nomem:
	tc_rt_set_error(md->ctx, "out of memory while allocating the model's buffers");
error:
	if (b)
		tc_free(b->mem);
	tc_free(b);
	return NULL;
}

/* A view of arena a (float elements from offset) with this shape. */
static tbuf *buf_view(tc_model *md, tbuf *a, int64_t offset, int ndim, const int64_t *shape)
{
	tbuf *b = tc_calloc(1, sizeof(*b));
	if (!b || tc_vec_push(&md->bufs, b) < 0) {
		tc_free(b);
		tc_rt_set_error(md->ctx, "out of memory");
		return NULL;
	}
	memcpy(b->shape, shape, (size_t)ndim * sizeof(*shape));
	b->dl = a->dl;
	b->dl.data = (char *)a->dl.data + (size_t)offset * dtype_size(a->dl.dtype);
	b->dl.ndim = ndim;
	b->dl.shape = b->shape;
	return b;
}

static tbuf *name_find(tc_model *md, int ns, const char *name)
{
	for (int i = 0; i < md->names[ns].n; i++) {
		tname *t = md->names[ns].v[i];
		if (!strcmp(t->name, name))
			return t->b;
	}
	return NULL;
}

static tc_stat name_bind(tc_model *md, int ns, const char *name, tbuf *b)
{
	tname *t = tc_calloc(1, sizeof(*t));
	if (!t || !(t->name = tc_strdup(name)) || tc_vec_push(&md->names[ns], t) < 0) {
		if (t)
			tc_free(t->name);
		tc_free(t);
		tc_rt_set_error(md->ctx, "out of memory");
		return TC_ERR;
	}
	t->b = b;
	return TC_OK;
}

static tdecl *decl_find(tc_model *md, const char *name)
{
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		if (!strcmp(d->name, name))
			return d;
	}
	return NULL;
}

/* ---- the model's defs ---- */

/* Index of def name in m, or -1 (no message). */
static int def_index(tc_module *m, const char *name)
{
	for (int i = 0; i < tc_module_num_defs(m); i++)
		if (!strcmp(tc_module_def_name(m, i), name))
			return i;
	return -1;
}

static const tc_def *def_of(tc_module *m, const char *name)
{
	int i = def_index(m, name);
	return i < 0 ? NULL : m->prog->defs[i];
}

static int is_float(tc_dtype t)
{
	DLDataType d = tc_rt_dl_dtype(t);
	return d.code == kDLFloat || d.code == kDLBfloat;
}

/* Index of input name of def, or -1. */
static int input_index(const tc_def *def, const char *name)
{
	for (int i = 0; i < def->ninputs; i++)
		if (!strcmp(def->tensors[i].name, name))
			return i;
	return -1;
}

tc_model *tc_model_new(tc_module *m, const char *forward, const char *loss)
{
	const tc_def *f, *l;
	tc_model *md = NULL;
	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	if (!forward || !loss) {
		tc_rt_set_error(m->ctx, "tc_model_new: the %s def's name is NULL",
			forward ? "loss" : "forward");
		return NULL;
	}
	if (tc_rt_find_def(m, forward) < 0 || tc_rt_find_def(m, loss) < 0)
		return NULL;
	f = def_of(m, forward);
	l = def_of(m, loss);
	if (l->noutputs != 1 || l->tensors[l->ninputs].ndim != 0 ||
		!is_float(l->tensors[l->ninputs].dtype)) {
		tc_rt_set_error(m->ctx,
			"the loss def '%s' must have one output, a float scalar (the loss), but it has %d output%s%s",
			loss, l->noutputs, l->noutputs == 1 ? "" : "s",
			l->noutputs == 1 ? (l->tensors[l->ninputs].ndim ? " of rank above 0" : ", not a float") : "");
		return NULL;
	}
	if (l->ninputs < f->noutputs) {
		tc_rt_set_error(m->ctx,
			"the loss def '%s' must take the forward def '%s''s %d output%s first, but it has %d input%s",
			loss, forward, f->noutputs, f->noutputs == 1 ? "" : "s", l->ninputs,
			l->ninputs == 1 ? "" : "s");
		return NULL;
	}
	for (int i = 0; i < f->noutputs; i++) {
		const tc_tensor_info *o = &f->tensors[f->ninputs + i], *in = &l->tensors[i];
		if (o->dtype != in->dtype || o->ndim != in->ndim || !is_float(o->dtype)) {
			tc_rt_set_error(m->ctx,
				"input %d of the loss def '%s' ('%s') must be the forward def's output '%s', a float tensor of rank %d of the same type",
				i + 1, loss, in->name, o->name, o->ndim);
			return NULL;
		}
	}
	if (!(md = tc_calloc(1, sizeof(*md))) || !(md->fwd = tc_strdup(forward)) ||
		!(md->loss = tc_strdup(loss))) {
		tc_rt_set_error(m->ctx, "out of memory");
		tc_model_free(md);
		return NULL;
	}
	md->ctx = m->ctx;
	md->nfin = f->ninputs;
	md->nfout = f->noutputs;
	md->nlin = l->ninputs;
	pthread_mutex_lock(&m->ctx->lock);
	m->refs++;
	pthread_mutex_unlock(&m->ctx->lock);
	md->m = m;
	return md;
}

/* Record a declaration (param or data) after the checks common to both. */
static int declare(tc_model *md, const char *name, int ndim, const int64_t *shape, int param,
	const tc_init *init)
{
	const char *what = param ? "tc_model_param" : "tc_model_input";
	tdecl *d;
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!name || (ndim > 0 && !shape)) {
		tc_rt_set_error(md->ctx, "%s: the %s is NULL", what, name ? "shape" : "name");
		return -1;
	}
	if (md->built) {
		tc_rt_set_error(md->ctx, "%s: the model is built already ('%s' comes too late)", what,
			name);
		return -1;
	}
	if (ndim < 0 || ndim > TC_MAX_RANK) {
		tc_rt_set_error(md->ctx, "%s: '%s' has rank %d (0 to %d)", what, name, ndim,
			TC_MAX_RANK);
		return -1;
	}
	for (int i = 0; i < ndim; i++)
		if (shape[i] < 0) {
			tc_rt_set_error(md->ctx, "%s: '%s' has a negative extent (%lld)", what, name,
				(long long)shape[i]);
			return -1;
		}
	if (decl_find(md, name)) {
		tc_rt_set_error(md->ctx, "%s: '%s' is declared twice", what, name);
		return -1;
	}
	if (!(d = tc_calloc(1, sizeof(*d))) || !(d->name = tc_strdup(name)) ||
		tc_vec_push(&md->decls, d) < 0) {
		if (d)
			tc_free(d->name);
		tc_free(d);
		tc_rt_set_error(md->ctx, "out of memory");
		return -1;
	}
	d->ndim = ndim;
	memcpy(d->shape, shape, (size_t)ndim * sizeof(*shape));
	d->param = param;
	if (init)
		d->init = *init;
	return 0;
}

int tc_model_param(tc_model *md, const char *name, int ndim, const int64_t *shape,
	const tc_init *init)
{
	const tc_def *f;
	int i;
	if (!md)
		return -1;
	f = def_of(md->m, md->fwd);
	if (name && (i = input_index(f, name)) >= 0 && !is_float(f->tensors[i].dtype)) {
		tc_rt_set_error(md->ctx, "tc_model_param: '%s' is an input of '%s' of type %s, not a float: it cannot be a parameter",
			name, md->fwd, tc_dtype_str(tc_rt_dl_dtype(f->tensors[i].dtype)));
		return -1;
	}
	if (name && i < 0) {
		tc_rt_set_error(md->ctx, "tc_model_param: '%s' is not an input of the forward def '%s'",
			name, md->fwd);
		return -1;
	}
	if (init && (init->kind < TC_INIT_ZEROS || init->kind > TC_INIT_XAVIER_NORMAL)) {
		tc_rt_set_error(md->ctx, "tc_model_param: unknown initialiser kind %d for '%s'",
			(int)init->kind, name);
		return -1;
	}
	return declare(md, name, ndim, shape, 1, init);
}

int tc_model_input(tc_model *md, const char *name, int ndim, const int64_t *shape)
{
	const tc_def *f, *l;
	if (!md)
		return -1;
	f = def_of(md->m, md->fwd);
	l = def_of(md->m, md->loss);
	if (name && input_index(f, name) < 0 &&
		(input_index(l, name) < md->nfout)) {
		tc_rt_set_error(md->ctx,
			"tc_model_input: '%s' is not a data input of the forward def '%s' nor a label input of the loss def '%s'",
			name, md->fwd, md->loss);
		return -1;
	}
	return declare(md, name, ndim, shape, 0, NULL);
}

/* ---- initialisation ---- */

/* Uniform in [0, 1): the top 53 bits. */
static double rng_unit(uint64_t *s)
{
	return (double)(tc_rt_xorshift64s(s) >> 11) * 0x1p-53;
}

/* Standard normal: Box-Muller, one value per pair of draws. */
static double rng_normal(uint64_t *s)
{
	double u1 = 1.0 - rng_unit(s), u2 = rng_unit(s); /* u1 in (0, 1] */
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Fill parameter d (in P) from its initialiser. */
static void init_param(tc_model *md, tdecl *d, uint64_t *s)
{
	const tc_init *in = &d->init;
	/* fans from the declared shape; in an ensemble each model's values
	 * follow the previous one's in the stream */
	int64_t n = numel(d->endim, d->eshape), fan_in, fan_out, rest = 1;
	double lo = 0, hi = 0, mean = 0, sd = 0, gain = in->a;
	int normal = 0;
	for (int i = 2; i < d->ndim; i++)
		rest *= d->shape[i];
	fan_in = d->ndim <= 1 ? (d->ndim ? d->shape[0] : 1) : d->shape[1] * rest;
	fan_out = d->ndim <= 1 ? (d->ndim ? d->shape[0] : 1) : d->shape[0] * rest;
	if (in->fan_in > 0)
		fan_in = in->fan_in;
	if (in->fan_out > 0)
		fan_out = in->fan_out;
	if (fan_in < 1)
		fan_in = 1;
	if (fan_out < 1)
		fan_out = 1;
	switch (in->kind) {
	case TC_INIT_ZEROS:
		break;
	case TC_INIT_CONSTANT:
		lo = hi = in->a;
		break;
	case TC_INIT_UNIFORM:
		lo = in->a;
		hi = in->b;
		break;
	case TC_INIT_NORMAL:
		normal = 1;
		mean = in->a;
		sd = in->b;
		break;
	case TC_INIT_KAIMING_UNIFORM:
		hi = (gain != 0 ? gain : sqrt(2.0)) * sqrt(3.0 / (double)fan_in);
		lo = -hi;
		break;
	case TC_INIT_KAIMING_NORMAL:
		normal = 1;
		sd = (gain != 0 ? gain : sqrt(2.0)) / sqrt((double)fan_in);
		break;
	case TC_INIT_XAVIER_UNIFORM:
		hi = (gain != 0 ? gain : 1.0) * sqrt(6.0 / (double)(fan_in + fan_out));
		lo = -hi;
		break;
	case TC_INIT_XAVIER_NORMAL:
		normal = 1;
		sd = (gain != 0 ? gain : 1.0) * sqrt(2.0 / (double)(fan_in + fan_out));
		break;
	}
	for (int64_t i = 0; i < n; i++) {
		double v = normal ? mean + sd * rng_normal(s) : lo + (hi - lo) * rng_unit(s);
		if (in->kind == TC_INIT_ZEROS)
			v = 0;
		if (md->pdtype.bits == 32)
			((float *)d->b->dl.data)[i] = (float)v;
		else
			((double *)d->b->dl.data)[i] = v;
	}
}

/* ---- building ---- */

/* The tensors of def entry of mod (name space ns) as an array of n
 * pointers into the model's buffers: inputs looked up by name (a missing
 * one is an internal error: the derivation named a tensor the model does
 * not have). */
static DLTensor **bind_inputs(tc_model *md, tc_module *mod, const char *entry, int ns, int n)
{
	DLTensor **in = tc_calloc((size_t)n + 1, sizeof(*in));
	if (!in) {
		tc_rt_set_error(md->ctx, "out of memory");
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		const char *name = tc_module_tensor_name(mod, entry, i);
		tbuf *b = name ? name_find(md, ns, name) : NULL;
		if (!b) {
			tc_rt_set_error(md->ctx,
				"internal error: the model has no tensor '%s' for input %d of '%s'",
				name ? name : "?", i + 1, entry);
			tc_free(in);
			return NULL;
		}
		in[i] = &b->dl;
	}
	return in;
}

/* Compile entry of mod with its inputs bound in name space ns and its
 * outputs given buffers: a name already bound (a gradient's view of G, a
 * forward output the loss shares) keeps its buffer, whose shape must be
 * the output's; any other gets a new buffer, bound to its name.  The call
 * is c. */
static tc_stat add_call(tc_model *md, tcall *c, tc_module *mod, const char *entry, int ns)
{
	int nin, nout;
	if (tc_module_def_arity(mod, entry, &nin, &nout) < 0)
		return TC_ERR;
	if (!(c->what = tc_strdup(entry))) {
		tc_rt_set_error(md->ctx, "out of memory");
		return TC_ERR;
	}
	c->nin = nin;
	c->nout = nout;
	if (!(c->in = bind_inputs(md, mod, entry, ns, nin)))
		return TC_ERR;
	if (!(c->k = tc_compile(mod, entry, (const DLTensor *const *)c->in, nin, md->options)))
		return TC_ERR;
	if (!(c->out = tc_calloc((size_t)nout + 1, sizeof(*c->out)))) {
		tc_rt_set_error(md->ctx, "out of memory");
		return TC_ERR;
	}
	for (int j = 0; j < nout; j++) {
		const char *name = tc_module_tensor_name(mod, entry, nin + j);
		int64_t shape[TC_MAX_RANK];
		DLDataType dt;
		int nd;
		tbuf *b;
		if (!name || tc_kernel_output_shape(c->k, j, &dt, &nd, shape) < 0)
			return TC_ERR;
		if ((b = name_find(md, ns, name))) {
			if (b->dl.ndim != nd || memcmp(b->shape, shape, (size_t)nd * sizeof(*shape)) ||
				b->dl.dtype.code != dt.code || b->dl.dtype.bits != dt.bits) {
				tc_rt_set_error(md->ctx,
					"'%s' (output %d of '%s') does not have the shape or type of the model's tensor of that name",
					name, j + 1, entry);
				return TC_ERR;
			}
		} else if (!(b = buf_new(md, dt, nd, shape)) || name_bind(md, ns, name, b) < 0)
			return TC_ERR;
		c->out[j] = &b->dl;
	}
	return TC_OK;
}

/* Parse derived text (of def what) into a module, its errors as internal
 * errors: the derivation promises text that checks. */
static tc_module *parse_derived(tc_model *md, const char *text, const char *what)
{
	char fname[160];
	tc_module *mod;
	snprintf(fname, sizeof(fname), "%s (derived)", what);
	if (!(mod = tc_module_parse(md->ctx, text, fname)))
		tc_rt_set_error(md->ctx, "internal error: the derived text of %s does not check: %s",
			what, tc_context_error(md->ctx));
	return mod;
}

/* Lay the parameters out in the arenas P and G and bind them (and their
 * gradients' views) in the forward's name space; every parameter the same
 * float type. */
static tc_stat layout_params(tc_model *md, const tc_def *f)
{
	int64_t off = 0, per = 0;
	int first = 1;
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		const tc_tensor_info *t;
		int k;
		if (!d->param)
			continue;
		t = &f->tensors[k = input_index(f, d->name)];
		if (t->ndim != d->endim) {
			tc_rt_set_error(md->ctx, "parameter '%s' is declared with rank %d, but '%s' reads it with rank %d",
				d->name, d->ndim, md->fwd, t->ndim - (d->endim - d->ndim));
			return TC_ERR;
		}
		if (first) {
			md->pdtype = tc_rt_dl_dtype(t->dtype);
			if (md->pdtype.code != kDLFloat || (md->pdtype.bits != 32 && md->pdtype.bits != 64)) {
				tc_rt_set_error(md->ctx, "parameter '%s' is %s: the training runtime takes float32 or float64 parameters",
					d->name, tc_dtype_str(md->pdtype));
				return TC_ERR;
			}
			per = ALIGN / (md->pdtype.bits / 8);
			first = 0;
		} else if (tc_rt_dl_dtype(t->dtype).bits != md->pdtype.bits) {
			tc_rt_set_error(md->ctx, "parameter '%s' is %s, but the first parameter is %s: every parameter must have the same type",
				d->name, tc_dtype_str(tc_rt_dl_dtype(t->dtype)), tc_dtype_str(md->pdtype));
			return TC_ERR;
		}
		d->offset = off;
		off += (numel(d->endim, d->eshape) + per - 1) / per * per;
	}
	if (first) {
		tc_rt_set_error(md->ctx, "the model has no parameters (declare them with tc_model_param)");
		return TC_ERR;
	}
	md->nflat = off;
	if (!(md->P = buf_new(md, md->pdtype, 1, &off)) || !(md->G = buf_new(md, md->pdtype, 1, &off)))
		return TC_ERR;
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		char gname[256];
		tbuf *g;
		if (!d->param)
			continue;
		snprintf(gname, sizeof(gname), "d_%s", d->name);
		if (!(d->b = buf_view(md, md->P, d->offset, d->endim, d->eshape)) ||
			name_bind(md, NS_FWD, d->name, d->b) < 0 ||
			!(g = buf_view(md, md->G, d->offset, d->endim, d->eshape)) ||
			name_bind(md, NS_FWD, gname, g) < 0)
			return TC_ERR;
	}
	return TC_OK;
}

/* Buffers for the data inputs: every forward input is a parameter or
 * declared data; the loss's inputs after the forward's outputs are
 * declared data.  A name both defs read as data is one buffer. */
static tc_stat bind_data(tc_model *md, const tc_def *f, const tc_def *l)
{
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		int fi, li;
		const tc_tensor_info *t;
		if (d->param)
			continue;
		fi = input_index(f, d->name);
		li = input_index(l, d->name);
		t = fi >= 0 ? &f->tensors[fi] : &l->tensors[li];
		if (t->ndim != d->ndim) {
			tc_rt_set_error(md->ctx, "input '%s' is declared with rank %d, but '%s' reads it with rank %d",
				d->name, d->ndim, fi >= 0 ? md->fwd : md->loss, t->ndim);
			return TC_ERR;
		}
		if (!(d->b = buf_new(md, tc_rt_dl_dtype(t->dtype), d->ndim, d->shape)))
			return TC_ERR;
		if ((fi >= 0 && name_bind(md, NS_FWD, d->name, d->b) < 0) ||
			(li >= md->nfout && name_bind(md, NS_LOSS, d->name, d->b) < 0))
			return TC_ERR;
	}
	for (int i = 0; i < f->ninputs; i++)
		if (!decl_find(md, f->tensors[i].name)) {
			tc_rt_set_error(md->ctx,
				"input '%s' of the forward def '%s' is neither a parameter nor a data input: declare it with tc_model_param or tc_model_input",
				f->tensors[i].name, md->fwd);
			return TC_ERR;
		}
	for (int i = md->nfout; i < l->ninputs; i++)
		if (!decl_find(md, l->tensors[i].name)) {
			tc_rt_set_error(md->ctx,
				"input '%s' of the loss def '%s' is a label input without a shape: declare it with tc_model_input",
				l->tensors[i].name, md->loss);
			return TC_ERR;
		}
	return TC_OK;
}

/* A comma-separated list of names: the parameters (which != 0) or the
 * loss's first nfout inputs. */
static char *wrt_list(tc_model *md, const tc_def *l, int params)
{
	tc_buf b;
	tc_buf_init(&b);
	if (params) {
		for (int i = 0; i < md->decls.n; i++) {
			tdecl *d = md->decls.v[i];
			if (d->param)
				tc_buf_printf(&b, "%s%s", b.len ? "," : "", d->name);
		}
	} else {
		for (int i = 0; i < md->nfout; i++)
			tc_buf_printf(&b, "%s%s", i ? "," : "", l->tensors[i].name);
	}
	return tc_buf_take(&b);
}

/* The name "<def>_<suffix>", in buf. */
static const char *derived_name(char *buf, size_t n, const char *def, const char *suffix)
{
	snprintf(buf, n, "%s_%s", def, suffix);
	return buf;
}

/* The backward of def with respect to the names in wrt (taken; NULL: out
 * of memory), with saves: its text in *text, parsed in *mod. */
static tc_stat derive(tc_model *md, const char *def, char *wrt, char **text, tc_module **mod)
{
	if (!wrt) {
		tc_rt_set_error(md->ctx, "out of memory");
		return TC_ERR;
	}
	*text = tc_module_grad(md->src, def, wrt, TC_GRAD_SAVES);
	tc_free(wrt);
	return *text && (*mod = parse_derived(md, *text, def)) ? TC_OK : TC_ERR;
}

/* Call c runs "<def>_fwd" of the derived module mod (the def with saves)
 * when the derivation made one, else def of the user's module. */
static tc_stat add_forward_call(tc_model *md, tcall *c, tc_module *mod, const char *def, int ns)
{
	char name[300];
	derived_name(name, sizeof(name), def, "fwd");
	return def_index(mod, name) >= 0 ? add_call(md, c, mod, name, ns)
					 : add_call(md, c, md->src, def, ns);
}

/* The step's kernels of the forward and the loss (with saves when the
 * derivation made a "<def>_fwd"), their backward kernels, and the
 * evaluation kernels (the defs as written). */
static tc_stat build_step(tc_model *md, const tc_def *l)
{
	char name[300], gname[300];
	tbuf *one;
	/* derive */
	if (derive(md, md->fwd, wrt_list(md, l, 1), &md->ftext, &md->mf) < 0 ||
		derive(md, md->loss, wrt_list(md, l, 0), &md->ltext, &md->ml) < 0)
		return TC_ERR;
	/* forward (with saves), then the loss reading its outputs */
	if (add_forward_call(md, &md->calls[CALL_FWD], md->mf, md->fwd, NS_FWD) < 0)
		return TC_ERR;
	for (int i = 0; i < md->nfout; i++) {
		tbuf *b = name_find(md, NS_FWD, tc_module_tensor_name(md->src, md->fwd, md->nfin + i));
		if (!TC_ASSERT(b) || name_bind(md, NS_LOSS, l->tensors[i].name, b) < 0)
			return TC_ERR;
	}
	if (add_forward_call(md, &md->calls[CALL_LOSS], md->ml, md->loss, NS_LOSS) < 0)
		return TC_ERR;
	md->lossb = name_find(md, NS_LOSS, l->tensors[l->ninputs].name);
	/* the loss's backward from d_loss = 1 (in an ensemble, 1 for each
	 * model's loss: the models' gradients are independent) */
	if (!TC_ASSERT(md->lossb) ||
		!(one = buf_new(md, md->lossb->dl.dtype, md->lossb->dl.ndim, md->lossb->shape)))
		return TC_ERR;
	for (int64_t e = 0; e < numel(one->dl.ndim, one->shape); e++) {
		if (one->dl.dtype.bits == 32)
			((float *)one->dl.data)[e] = 1.0f;
		else
			((double *)one->dl.data)[e] = 1.0;
	}
	derived_name(gname, sizeof(gname), "d", l->tensors[l->ninputs].name);
	if (name_bind(md, NS_LOSS, gname, one) < 0)
		return TC_ERR;
	derived_name(name, sizeof(name), md->loss, "grad");
	if (add_call(md, &md->calls[CALL_LOSS_GRAD], md->ml, name, NS_LOSS) < 0)
		return TC_ERR;
	/* d_<loss input i> is d_<forward output i> */
	for (int i = 0; i < md->nfout; i++) {
		tbuf *b;
		derived_name(gname, sizeof(gname), "d", l->tensors[i].name);
		b = name_find(md, NS_LOSS, gname);
		derived_name(gname, sizeof(gname), "d",
			tc_module_tensor_name(md->src, md->fwd, md->nfin + i));
		if (!TC_ASSERT(b) || name_bind(md, NS_FWD, gname, b) < 0)
			return TC_ERR;
	}
	derived_name(name, sizeof(name), md->fwd, "grad");
	return add_call(md, &md->calls[CALL_FWD_GRAD], md->mf, name, NS_FWD);
}

/* The evaluation calls (the defs as written, into the step's buffers: every
 * name they write is bound already), compiled on the first
 * tc_model_eval rather than at build (examples/train_mlp.tc: the build
 * took 3.05 s with them, 1.7 without); on an error nothing is kept. */
static tc_stat add_eval_calls(tc_model *md)
{
	if (md->eval[1].k)
		return TC_OK;
	if (add_call(md, &md->eval[0], md->src, md->fwd, NS_FWD) == TC_OK &&
		add_call(md, &md->eval[1], md->src, md->loss, NS_LOSS) == TC_OK)
		return TC_OK;
	for (int i = 0; i < 2; i++) {
		call_free(&md->eval[i]);
		memset(&md->eval[i], 0, sizeof(md->eval[i]));
	}
	return TC_ERR;
}

/* The optimiser's kernel over the flat arenas: inputs G and the scalar
 * hyper-parameters, outputs P and the state, updated in place. */
static tc_stat build_opt(tc_model *md)
{
	static const char *const hp_names[NHP] = {"lr", "decay", "mu", "b1", "b2", "eps", "c1", "c2"};
	const char *entry = md->opt.kind == TC_OPT_SGD ? "sgd"
		: md->opt.kind == TC_OPT_MOMENTUM       ? "sgd_momentum"
							: "adam";
	tcall *c = &md->calls[CALL_OPT];
	int nin, nout;
	if (!(md->otext = tc_optimizer_source(&md->opt, md->pdtype))) {
		tc_rt_set_error(md->ctx, "unknown optimiser kind %d", (int)md->opt.kind);
		return TC_ERR;
	}
	if (!(md->mo = parse_derived(md, md->otext, entry)) ||
		tc_module_def_arity(md->mo, entry, &nin, &nout) < 0)
		return TC_ERR;
	if (!(c->what = tc_strdup(entry)) || !(c->in = tc_calloc((size_t)nin, sizeof(*c->in))) ||
		!(c->out = tc_calloc((size_t)nout, sizeof(*c->out)))) {
		tc_rt_set_error(md->ctx, "out of memory");
		return TC_ERR;
	}
	c->nin = nin;
	c->nout = nout;
	for (int i = 0; i < nin; i++) {
		const char *name = tc_module_tensor_name(md->mo, entry, i);
		int h;
		if (!strcmp(name, "G")) {
			c->in[i] = &md->G->dl;
			continue;
		}
		for (h = 0; h < NHP && strcmp(hp_names[h], name); h++)
			;
		if (!TC_ASSERT(h < NHP) || !(md->hp[h] = buf_new(md, md->pdtype, 0, NULL)))
			return TC_ERR;
		c->in[i] = &md->hp[h]->dl;
	}
	for (int j = 0; j < nout; j++) {
		const char *name = tc_module_tensor_name(md->mo, entry, nin + j);
		tbuf *b = md->P;
		if (strcmp(name, "P")) {
			if (!(b = buf_new(md, md->pdtype, 1, &md->nflat)))
				return TC_ERR;
			if (md->S1)
				md->S2 = b;
			else
				md->S1 = b;
		}
		c->out[j] = &b->dl;
	}
	c->k = tc_compile(md->mo, entry, (const DLTensor *const *)c->in, nin, md->options);
	return c->k ? TC_OK : TC_ERR;
}

/* Each parameter's views of the optimiser's state arenas (tdecl.state),
 * for checkpoints. */
static tc_stat state_views(tc_model *md)
{
	tbuf *arena[2] = {md->S1, md->S2};
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		for (int k = 0; k < 2 && d->param && arena[k]; k++)
			if (!(d->state[k] = buf_view(md, arena[k], d->offset, d->endim, d->eshape)))
				return TC_ERR;
	}
	return TC_OK;
}

/* Each declaration's model shape (tdecl.eshape): the declared one, with
 * the ensemble's size first for a parameter of an ensemble. */
static tc_stat shape_params(tc_model *md)
{
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		int lead = md->ens && d->param;
		if (d->ndim + lead > TC_MAX_RANK) {
			tc_rt_set_error(md->ctx,
				"parameter '%s' has rank %d: in an ensemble it gets a leading dimension, and a tensor has at most %d",
				d->name, d->ndim, TC_MAX_RANK);
			return TC_ERR;
		}
		d->endim = d->ndim + lead;
		d->eshape[0] = md->ens;
		memcpy(d->eshape + lead, d->shape, (size_t)d->ndim * sizeof(*d->shape));
	}
	return TC_OK;
}

/* md->src: the user's module, or for an ensemble a module of the forward
 * def batched over the parameters and the loss def over its first inputs
 * (the forward's outputs), tc_module_vmap with a size name neither def
 * uses (the first of a few that vmap accepts). */
static tc_stat make_src(tc_model *md)
{
	static const char *const sizes[] = {"E", "Ens", "Models", "Ensemble", "EnsembleSize"};
	const tc_def *l = def_of(md->m, md->loss);
	char *params = NULL, *outs = NULL, *ft = NULL, *lt = NULL;
	tc_buf b;
	if (!md->ens) {
		md->src = md->m;
		return TC_OK;
	}
	if (!(params = wrt_list(md, l, 1)) || !(outs = wrt_list(md, l, 0))) {
		tc_free(params);
		tc_rt_set_error(md->ctx, "out of memory");
		return TC_ERR;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes) && !lt; i++) {
		tc_string_free(ft);
		lt = (ft = tc_module_vmap(md->m, md->fwd, params, sizes[i]))
			? tc_module_vmap(md->m, md->loss, outs, sizes[i])
			: NULL;
	}
	tc_free(params);
	tc_free(outs);
	if (!lt) {
		tc_string_free(ft);
		tc_rt_set_error(md->ctx, "tc_model_build: the ensemble of %lld models: %s",
			(long long)md->ens, tc_context_error(md->ctx));
		return TC_ERR;
	}
	tc_buf_init(&b);
	tc_buf_printf(&b, "%s\n%s", ft, lt);
	tc_string_free(ft);
	tc_string_free(lt);
	if (!(md->etext = tc_buf_take(&b))) {
		tc_rt_set_error(md->ctx, "out of memory");
		return TC_ERR;
	}
	return (md->src = parse_derived(md, md->etext, "the ensemble")) ? TC_OK : TC_ERR;
}

int tc_model_ensemble(tc_model *md, int64_t k)
{
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (md->built) {
		tc_rt_set_error(md->ctx, "tc_model_ensemble: the model is built already");
		return -1;
	}
	if (k < 1) {
		tc_rt_set_error(md->ctx, "tc_model_ensemble: %lld models (at least 1)", (long long)k);
		return -1;
	}
	md->ens = k;
	return 0;
}

int tc_model_build(tc_model *md, const tc_optimizer *opt, const tc_options *options,
	uint64_t seed)
{
	const tc_def *f, *l;
	uint64_t s = seed ? seed : 0x9E3779B97F4A7C15ULL;
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!opt) {
		tc_rt_set_error(md->ctx, "tc_model_build: the optimiser is NULL");
		return -1;
	}
	if (md->built) {
		tc_rt_set_error(md->ctx, "tc_model_build: %s",
			md->built > 0 ? "the model is built already"
				      : "its build failed: a model is built once, make a new one");
		return -1;
	}
	if (opt->kind != TC_OPT_SGD && opt->kind != TC_OPT_MOMENTUM && opt->kind != TC_OPT_ADAM) {
		tc_rt_set_error(md->ctx, "tc_model_build: unknown optimiser kind %d", (int)opt->kind);
		return -1;
	}
	md->built = -1; /* a failed build is not retried: buffers may be half made */
	md->opt = *opt;
	if (options && !(md->options = tc_options_copy(options))) {
		tc_rt_set_error(md->ctx, "out of memory");
		return -1;
	}
	if (shape_params(md) < 0 || make_src(md) < 0)
		return -1;
	f = def_of(md->src, md->fwd);
	l = def_of(md->src, md->loss);
	md->batch = -1; /* the data inputs' common first extent, else 0 */
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		int64_t first = d->ndim ? d->shape[0] : 0;
		if (!d->param)
			md->batch = md->batch < 0 || md->batch == first ? first : 0;
	}
	if (md->batch < 0)
		md->batch = 0;
	if (layout_params(md, f) < 0 || bind_data(md, f, l) < 0 || build_step(md, l) < 0 ||
		build_opt(md) < 0 || state_views(md) < 0)
		return -1;
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		if (d->param)
			init_param(md, d, &s);
	}
	md->built = 1;
	return 0;
}

/* ---- running ---- */

static tc_stat run_call(tcall *c)
{
	return tc_kernel_run(c->k, (const DLTensor *const *)c->in, c->nin, c->out, c->nout);
}

/* The loss; in an ensemble, the mean of the models' losses. */
static double read_loss(const tc_model *md)
{
	const tbuf *b = md->lossb;
	int64_t n = numel(b->dl.ndim, b->shape);
	double sum = 0;
	for (int64_t e = 0; e < n; e++)
		sum += b->dl.dtype.bits == 32 ? ((const float *)b->dl.data)[e]
					      : ((const double *)b->dl.data)[e];
	return n ? sum / (double)n : 0;
}

static void write_scalar(tbuf *b, double v)
{
	if (!b)
		return;
	if (b->dl.dtype.bits == 32)
		*(float *)b->dl.data = (float)v;
	else
		*(double *)b->dl.data = v;
}

/* Whether md is built; a message if not. */
static int built(tc_model *md, const char *what)
{
	if (md->built == 1)
		return 1;
	tc_rt_set_error(md->ctx, "%s: the model is not built%s", what,
		md->built ? " (its build failed)" : " (call tc_model_build first)");
	return 0;
}

/* The update's hyper-parameters for the next step (its number md->t + 1). */
static void set_hparams(tc_model *md)
{
	const tc_optimizer *o = &md->opt;
	double t = (double)++md->t;
	write_scalar(md->hp[HP_LR], o->lr);
	write_scalar(md->hp[HP_DECAY], 1.0 - o->lr * o->weight_decay);
	write_scalar(md->hp[HP_MU], o->momentum);
	write_scalar(md->hp[HP_B1], o->beta1);
	write_scalar(md->hp[HP_B2], o->beta2);
	write_scalar(md->hp[HP_EPS], o->eps);
	write_scalar(md->hp[HP_C1], 1.0 - pow(o->beta1, t));
	write_scalar(md->hp[HP_C2], 1.0 - pow(o->beta2, t));
}

/* Run the calls before the update (calls: md->calls or a partial batch's),
 * then the update; the loss into *loss. */
static int run_step(tc_model *md, tcall *calls, double *loss)
{
	set_hparams(md);
	for (int i = 0; i < CALL_OPT; i++) {
		if (run_call(&calls[i]) < 0)
			return -1;
		if (i == CALL_LOSS && loss)
			*loss = read_loss(md);
	}
	return run_call(&md->calls[CALL_OPT]) < 0 ? -1 : 0;
}

int tc_model_step(tc_model *md, double *loss)
{
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!built(md, "tc_model_step"))
		return -1;
	return run_step(md, md->calls, loss);
}

/* A view of t (a model's tensor) with shape[nd], which holds no more
 * elements: the first elements of t's memory, laid out compactly. */
static DLTensor *dl_view(tc_model *md, DLTensor *t, int nd, const int64_t *shape)
{
	tbuf *b;
	if (numel(nd, shape) > numel(t->ndim, t->shape)) {
		tc_rt_set_error(md->ctx, "internal error: a tensor of a partial batch is larger than the whole batch's");
		return NULL;
	}
	if (!(b = tc_calloc(1, sizeof(*b))) || tc_vec_push(&md->bufs, b) < 0) {
		tc_free(b);
		tc_rt_set_error(md->ctx, "out of memory");
		return NULL;
	}
	memcpy(b->shape, shape, (size_t)nd * sizeof(*shape));
	b->dl = *t;
	b->dl.ndim = nd;
	b->dl.shape = b->shape;
	return &b->dl;
}

/* The tensor that stands for t in a partial batch: its view in map (n
 * pairs full, view), else t itself. */
static DLTensor *mapped(DLTensor **map, int n, DLTensor *t)
{
	for (int i = 0; i < n; i++)
		if (map[2 * i] == t)
			return map[2 * i + 1];
	return t;
}

/* The step's calls before the update compiled for the first rows rows of
 * the data inputs: each data input viewed with rows as its first extent,
 * each call compiled for the tensors that stand for its inputs, each output
 * whose shape changes viewed in its buffer with the new shape (so that the
 * calls after it read the view).  NULL with a message. */
static void part_free(tpart *pt)
{
	if (!pt)
		return;
	for (int j = 0; pt->calls && j < CALL_OPT; j++)
		call_free(&pt->calls[j]);
	tc_free(pt->calls);
	tc_free(pt);
}

static tpart *build_part(tc_model *md, int64_t rows)
{
	tpart *pt = tc_calloc(1, sizeof(*pt));
	DLTensor **map = NULL;
	int n = 0, cap = md->bufs.n + 1;
	if (!pt || !(pt->calls = tc_calloc(CALL_OPT, sizeof(*pt->calls))) ||
		!(map = tc_calloc((size_t)cap * 2, sizeof(*map)))) {
		tc_rt_set_error(md->ctx, "out of memory");
		goto error;
	}
	pt->rows = rows;
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		int64_t shape[TC_MAX_RANK];
		if (d->param)
			continue;
		memcpy(shape, d->shape, (size_t)d->ndim * sizeof(*shape));
		shape[0] = rows;
		map[2 * n] = &d->b->dl;
		if (!(map[2 * n++ + 1] = dl_view(md, &d->b->dl, d->ndim, shape)))
			goto error;
	}
	for (int i = 0; i < CALL_OPT; i++) {
		tcall *c = &md->calls[i], *pc = &pt->calls[i];
		pc->nin = c->nin;
		pc->nout = c->nout;
		if (!(pc->what = tc_strdup(c->what)) ||
			!(pc->in = tc_calloc((size_t)c->nin + 1, sizeof(*pc->in))) ||
			!(pc->out = tc_calloc((size_t)c->nout + 1, sizeof(*pc->out)))) {
			tc_rt_set_error(md->ctx, "out of memory");
			goto error;
		}
		for (int k = 0; k < c->nin; k++)
			pc->in[k] = mapped(map, n, c->in[k]);
		if (!(pc->k = tc_compile(call_module(md, i), c->what,
			      (const DLTensor *const *)pc->in, pc->nin, md->options)))
			goto error;
		for (int j = 0; j < c->nout; j++) {
			int64_t shape[TC_MAX_RANK];
			DLDataType dt;
			int nd;
			if (tc_kernel_output_shape(pc->k, j, &dt, &nd, shape) < 0)
				goto error;
			pc->out[j] = c->out[j];
			if (nd == c->out[j]->ndim &&
				!memcmp(shape, c->out[j]->shape, (size_t)nd * sizeof(*shape)))
				continue;
			if (n == cap) {
				tc_rt_set_error(md->ctx, "internal error: too many views for a partial batch");
				goto error;
			}
			map[2 * n] = c->out[j];
			if (!(pc->out[j] = map[2 * n++ + 1] = dl_view(md, c->out[j], nd, shape)))
				goto error;
		}
	}
	tc_free(map);
	map = NULL;
	if (tc_vec_push(&md->parts, pt) < 0) { /* kept only when whole */
		tc_rt_set_error(md->ctx, "out of memory");
		goto error;
	}
	return pt;
error:
	tc_free(map);
	part_free(pt);
	return NULL;
}

/* The calls of a step on rows rows (what: the API function, for
 * messages): md->calls for the whole batch, else the partial batch's,
 * compiled on first use.  NULL with a message. */
static tcall *rows_calls(tc_model *md, int64_t rows, const char *what)
{
	tpart *pt = NULL;
	if (!built(md, what))
		return NULL;
	if (!md->batch) {
		tc_rt_set_error(md->ctx, "%s: the data inputs' first extents differ: there is no batch of rows",
			what);
		return NULL;
	}
	if (rows < 1 || rows > md->batch) {
		tc_rt_set_error(md->ctx, "%s: %lld rows of a batch of %lld (1 to %lld)", what,
			(long long)rows, (long long)md->batch, (long long)md->batch);
		return NULL;
	}
	if (rows == md->batch)
		return md->calls;
	for (int i = 0; i < md->parts.n && !pt; i++)
		if (((tpart *)md->parts.v[i])->rows == rows)
			pt = md->parts.v[i];
	if (!pt && !(pt = build_part(md, rows)))
		return NULL;
	return pt->calls;
}

int tc_model_step_rows(tc_model *md, int64_t rows, double *loss)
{
	tcall *calls;
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!(calls = rows_calls(md, rows, "tc_model_step_rows")))
		return -1;
	return run_step(md, calls, loss);
}

int tc_model_prepare_rows(tc_model *md, int64_t rows)
{
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	return rows_calls(md, rows, "tc_model_prepare_rows") ? 0 : -1;
}

int tc_model_eval(tc_model *md, double *loss)
{
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!built(md, "tc_model_eval") || add_eval_calls(md) < 0 || run_call(&md->eval[0]) < 0 ||
		run_call(&md->eval[1]) < 0)
		return -1;
	if (loss)
		*loss = read_loss(md);
	return 0;
}

int tc_model_forward(tc_model *md, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs)
{
	const DLTensor *all[64];
	tc_kernel *k;
	int ndata = 0, j = 0, rc;
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!built(md, "tc_model_forward"))
		return -1;
	for (int i = 0; i < md->nfin; i++) {
		tdecl *d = decl_find(md, tc_module_tensor_name(md->m, md->fwd, i));
		ndata += !d->param;
	}
	if (n_inputs != ndata || n_outputs != md->nfout || (ndata && !inputs) || !outputs) {
		tc_rt_set_error(md->ctx,
			"tc_model_forward: '%s' takes %d data input%s and gives %d output%s (got %d and %d%s)",
			md->fwd, ndata, ndata == 1 ? "" : "s", md->nfout, md->nfout == 1 ? "" : "s",
			n_inputs, n_outputs, (ndata && !inputs) || !outputs ? ", or a NULL array" : "");
		return -1;
	}
	if (md->nfin > (int)(sizeof(all) / sizeof(*all))) {
		tc_rt_set_error(md->ctx, "tc_model_forward: '%s' has more than %d inputs", md->fwd,
			(int)(sizeof(all) / sizeof(*all)));
		return -1;
	}
	for (int i = 0; i < md->nfin; i++) {
		tdecl *d = decl_find(md, tc_module_tensor_name(md->m, md->fwd, i));
		all[i] = d->param ? &d->b->dl : inputs[j++];
	}
	if (!(k = tc_compile(md->src, md->fwd, all, md->nfin, md->options)))
		return -1;
	rc = tc_kernel_run(k, all, md->nfin, outputs, n_outputs);
	tc_kernel_free(k);
	return rc;
}

DLTensor *tc_model_tensor(tc_model *md, const char *name)
{
	tbuf *b;
	if (!md)
		return NULL;
	tc_rt_clear_error(md->ctx);
	if (!name) {
		tc_rt_set_error(md->ctx, "tc_model_tensor: the name is NULL");
		return NULL;
	}
	if (!built(md, "tc_model_tensor"))
		return NULL;
	if (!(b = name_find(md, NS_FWD, name)) && !(b = name_find(md, NS_LOSS, name))) {
		tc_rt_set_error(md->ctx, "tc_model_tensor: the model has no tensor '%s'", name);
		return NULL;
	}
	return &b->dl;
}

/* The parameters' names and tensors, in the order declared, into names[]
 * and t[] (room for md->decls.n); their number. */
static int param_list(tc_model *md, const char **names, DLTensor **t)
{
	int n = 0;
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		if (d->param) {
			names[n] = d->name;
			t[n++] = &d->b->dl;
		}
	}
	return n;
}

/* The names of the optimiser's state tensors of a parameter, PyTorch's
 * (torch.optim's state_dict keys), per state arena; NULL where none. */
static const char *state_suffix(const tc_model *md, int k)
{
	switch (md->opt.kind) {
	case TC_OPT_MOMENTUM: return k == 0 ? "momentum_buffer" : NULL;
	case TC_OPT_ADAM: return k == 0 ? "exp_avg" : "exp_avg_sq";
	default: return NULL;
	}
}

/* Save (save != 0) or load the parameters in one safetensors file; with
 * ckpt, a checkpoint: their state tensors "<name>.<suffix>" and
 * "optimizer.step", a uint64 scalar, too. */
static int params_file(tc_model *md, const char *path, int save, int ckpt)
{
	static const char *const api[2][2] = {{"tc_model_load", "tc_model_save"},
		{"tc_model_load_checkpoint", "tc_model_save_checkpoint"}};
	const char *what = api[ckpt][save];
	int cap, n = 0, rc = -1;
	const char **names = NULL;
	char **owned = NULL;
	DLTensor **t = NULL, step;
	uint64_t steps;
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!path) {
		tc_rt_set_error(md->ctx, "%s: the path is NULL", what);
		return -1;
	}
	if (!built(md, what))
		return -1;
	steps = (uint64_t)md->t;
	cap = 3 * md->decls.n + 1;
	names = tc_calloc((size_t)cap, sizeof(*names));
	owned = tc_calloc((size_t)cap, sizeof(*owned));
	t = tc_calloc((size_t)cap, sizeof(*t));
	if (!names || !owned || !t)
		goto nomem;
	n = param_list(md, names, t);
	for (int i = 0; i < md->decls.n && ckpt; i++) {
		tdecl *d = md->decls.v[i];
		for (int k = 0; k < 2 && d->param; k++) {
			const char *suffix = state_suffix(md, k);
			tc_buf b;
			if (!suffix || !d->state[k])
				continue;
			tc_buf_init(&b);
			tc_buf_printf(&b, "%s.%s", d->name, suffix);
			if (!(owned[n] = tc_buf_take(&b)))
				goto nomem;
			names[n] = owned[n];
			t[n++] = &d->state[k]->dl;
		}
	}
	if (ckpt) {
		memset(&step, 0, sizeof(step));
		step.data = &steps;
		step.device.device_type = kDLCPU;
		step.dtype = (DLDataType){kDLUInt, 64, 1};
		names[n] = "optimizer.step";
		t[n++] = &step;
	}
	if (save)
		rc = tc_rt_safetensors_write(md->ctx, path, n, names, (const DLTensor *const *)t);
	else if (!(rc = tc_rt_safetensors_read(md->ctx, path, n, names, t)) && ckpt)
		md->t = steps > INT64_MAX ? INT64_MAX : (int64_t)steps;
	goto out;
nomem:
	tc_rt_set_error(md->ctx, "out of memory");
out:
	for (int i = 0; owned && i < cap; i++)
		tc_free(owned[i]);
	tc_free(owned);
	tc_free(names);
	tc_free(t);
	return rc;
}

int tc_model_save(tc_model *md, const char *path)
{
	return params_file(md, path, 1, 0);
}

int tc_model_load(tc_model *md, const char *path)
{
	return params_file(md, path, 0, 0);
}

int tc_model_save_checkpoint(tc_model *md, const char *path)
{
	return params_file(md, path, 1, 1);
}

int tc_model_load_checkpoint(tc_model *md, const char *path)
{
	return params_file(md, path, 0, 1);
}

/* The module each call of the step runs a def of. */
static tc_module *call_module(tc_model *md, int i)
{
	switch (i) {
	case CALL_FWD: return strcmp(md->calls[i].what, md->fwd) ? md->mf : md->src;
	case CALL_LOSS: return strcmp(md->calls[i].what, md->loss) ? md->ml : md->src;
	case CALL_LOSS_GRAD: return md->ml;
	case CALL_FWD_GRAD: return md->mf;
	default: return md->mo;
	}
}

int tc_model_num_kernels(const tc_model *md)
{
	return md && md->built == 1 ? NCALLS : -1;
}

int tc_model_kernel(tc_model *md, int i, tc_module **module, const char **entry,
	const DLTensor *const **inputs, int *n_inputs)
{
	if (!md)
		return -1;
	tc_rt_clear_error(md->ctx);
	if (!built(md, "tc_model_kernel"))
		return -1;
	if (!module || !entry || !inputs || !n_inputs) {
		tc_rt_set_error(md->ctx, "tc_model_kernel: an out-parameter is NULL");
		return -1;
	}
	if (i < 0 || i >= NCALLS) {
		tc_rt_set_error(md->ctx, "tc_model_kernel: no kernel %d (a step has %d)", i, NCALLS);
		return -1;
	}
	*module = call_module(md, i);
	*entry = md->calls[i].what;
	*inputs = (const DLTensor *const *)md->calls[i].in;
	*n_inputs = md->calls[i].nin;
	return 0;
}

/* Append "name float32[4x5]" for each of n tensors. */
static void describe_tensors(tc_buf *b, tc_module *mod, const char *entry, int first, int n,
	DLTensor **t)
{
	for (int i = 0; i < n; i++) {
		tc_buf_printf(b, "%s%s %s[", i ? ", " : "", tc_module_tensor_name(mod, entry, first + i),
			tc_dtype_str(t[i]->dtype));
		for (int d = 0; d < t[i]->ndim; d++)
			tc_buf_printf(b, "%s%lld", d ? "x" : "", (long long)t[i]->shape[d]);
		tc_buf_printf(b, "]");
	}
}

char *tc_model_describe(tc_model *md)
{
	static const char *const role[NCALLS] = {"forward", "loss", "loss backward",
		"forward backward", "update"};
	tc_buf b;
	if (!md)
		return NULL;
	tc_rt_clear_error(md->ctx);
	if (!built(md, "tc_model_describe"))
		return NULL;
	tc_buf_init(&b);
	tc_buf_printf(&b, "# a step: %d kernels; parameters: %lld elements of %s in one arena\n",
		NCALLS, (long long)md->nflat, tc_dtype_str(md->pdtype));
	for (int i = 0; i < NCALLS; i++) {
		tcall *c = &md->calls[i];
		tc_buf_printf(&b, "# %d. %s: %s(", i + 1, role[i], c->what);
		describe_tensors(&b, call_module(md, i), c->what, 0, c->nin, c->in);
		tc_buf_printf(&b, ") -> (");
		describe_tensors(&b, call_module(md, i), c->what, c->nin, c->nout, c->out);
		tc_buf_printf(&b, ")\n");
	}
	if (md->ens)
		tc_buf_printf(&b, "\n# an ensemble of %lld models: '%s' batched over its parameters, '%s' over its first %d input%s (tc_module_vmap)\n%s",
			(long long)md->ens, md->fwd, md->loss, md->nfout, md->nfout == 1 ? "" : "s",
			md->etext);
	tc_buf_printf(&b, "\n# derived from '%s'\n%s\n# derived from '%s'\n%s\n# the update\n%s",
		md->fwd, md->ftext, md->loss, md->ltext, md->otext);
	return tc_buf_take(&b);
}

static void call_free(tcall *c)
{
	tc_kernel_free(c->k);
	tc_free(c->in);
	tc_free(c->out);
	tc_free(c->what);
}

void tc_model_free(tc_model *md)
{
	if (!md)
		return;
	for (int i = 0; i < NCALLS; i++)
		call_free(&md->calls[i]);
	call_free(&md->eval[0]);
	call_free(&md->eval[1]);
	for (int i = 0; i < md->parts.n; i++)
		part_free(md->parts.v[i]);
	tc_vec_free(&md->parts);
	for (int ns = 0; ns < 2; ns++) {
		for (int i = 0; i < md->names[ns].n; i++) {
			tname *t = md->names[ns].v[i];
			tc_free(t->name);
			tc_free(t);
		}
		tc_vec_free(&md->names[ns]);
	}
	for (int i = 0; i < md->bufs.n; i++) {
		tbuf *b = md->bufs.v[i];
		tc_free(b->mem);
		tc_free(b);
	}
	tc_vec_free(&md->bufs);
	for (int i = 0; i < md->decls.n; i++) {
		tdecl *d = md->decls.v[i];
		tc_free(d->name);
		tc_free(d);
	}
	tc_vec_free(&md->decls);
	tc_options_free(md->options);
	tc_module_free(md->mf);
	tc_module_free(md->ml);
	tc_module_free(md->mo);
	if (md->src != md->m)
		tc_module_free(md->src);
	tc_module_free(md->m);
	tc_string_free(md->etext);
	tc_string_free(md->ftext);
	tc_string_free(md->ltext);
	tc_string_free(md->otext);
	tc_free(md->fwd);
	tc_free(md->loss);
	tc_free(md);
}
