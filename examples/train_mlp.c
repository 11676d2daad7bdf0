/* train_mlp: train a 784-128-10 perceptron on Fashion-MNIST with tcomp
 * kernels alone (include/tcomp.h, "training").
 *
 *   train_mlp [--epochs N] [--threads N] [--lr X] [--batch N] [--seed N]
 *             [--data DIR] [--model FILE.tc] [--save FILE] [--load FILE]
 *             [--ensemble K] [--drop-last]
 *
 * The model is examples/train_mlp.tc: a forward def (two fully connected
 * layers, ReLU) and a loss def (softmax cross-entropy).  tc_model_build
 * derives the backward defs, adds the SGD update and compiles every kernel
 * once; each step then runs five kernels on buffers allocated at build.
 * Data: the IDX files of Debian's dataset-fashion-mnist (make setup installs
 * it) in DIR (default /usr/share/datasets/fashion-mnist), batches shuffled
 * from the seed, a new order each epoch, the last one partial (469 steps an
 * epoch of 60000 images, as PyTorch's DataLoader gives by default; its 96
 * rows run through tc_model_step_rows; --drop-last skips it: 468 steps).
 * After each epoch: the mean
 * training loss, the test accuracy (the whole test set in one forward run)
 * and the epoch's time (the steps and the batch copies; not the test).
 * --load starts from parameters saved by --save (a safetensors file,
 * tc_model_save) instead of the seed's initialisation.  --ensemble K trains
 * K models at once in the same kernels (tc_model_ensemble), each from its
 * own initialisation, on the same batches: the loss printed is the mean of
 * the K models', the test accuracy the mean of theirs (and the best).
 * Exit status: 0 ok, 1 on an error (the message printed). */
#include <tcomp.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IMG 784
#define HID 128
#define CLS 10

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(tc_context *ctx, const char *what)
{
	fprintf(stderr, "train_mlp: %s: %s", what, tc_context_error(ctx));
	return 1;
}

/* The progress bar on a terminal: step i of n, the running mean loss. */
static void progress(int epoch, int64_t i, int64_t n, double loss)
{
	char bar[31];
	int full = (int)(30 * i / n);
	memset(bar, '=', (size_t)full);
	memset(bar + full, ' ', (size_t)(30 - full));
	bar[30] = '\0';
	fprintf(stderr, "\repoch %d [%s] %lld/%lld loss %.4f", epoch, bar, (long long)i,
		(long long)n, loss);
	fflush(stderr);
}

/* The share of rows of Z (n x CLS) whose largest logit is the label's
 * (one model's logits). */
static double accuracy(const float *z, const uint8_t *labels, int64_t n)
{
	int64_t right = 0;
	for (int64_t r = 0; r < n; r++) {
		int best = 0;
		for (int k = 1; k < CLS; k++)
			if (z[r * CLS + k] > z[r * CLS + best])
				best = k;
		right += best == labels[r];
	}
	return (double)right / (double)n;
}

static DLManagedTensor *read_idx(tc_context *ctx, const char *dir, const char *file)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return tc_idx_read(ctx, path);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"epochs", required_argument, 0, 'e'},
		{"threads", required_argument, 0, 't'}, {"lr", required_argument, 0, 'l'},
		{"batch", required_argument, 0, 'b'}, {"seed", required_argument, 0, 's'},
		{"data", required_argument, 0, 'd'}, {"model", required_argument, 0, 'm'},
		{"save", required_argument, 0, 'S'}, {"load", required_argument, 0, 'L'},
		{"ensemble", required_argument, 0, 'E'}, {"drop-last", no_argument, 0, 'D'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0}};
	const char *dir = "/usr/share/datasets/fashion-mnist", *model = NULL, *save = NULL,
		   *load = NULL;
	int epochs = 5, threads = 0, opt, rc = 1, tty = isatty(2), drop_last = 0;
	int64_t batch = 128, ntest, ens = 0;
	double lr = 0.1;
	uint64_t seed = 42;
	char model_default[4096];
	tc_context *ctx = tc_context_new();
	tc_module *m = NULL;
	tc_model *md = NULL;
	tc_batches *batches = NULL;
	DLManagedTensor *train_x = NULL, *train_y = NULL, *test_x = NULL, *test_y = NULL;
	float *test_in = NULL, *test_z = NULL;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'e': epochs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'l': lr = atof(optarg); break;
		case 'b': batch = atoll(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 10); break;
		case 'd': dir = optarg; break;
		case 'm': model = optarg; break;
		case 'S': save = optarg; break;
		case 'L': load = optarg; break;
		case 'E': ens = atoll(optarg); break;
		case 'D': drop_last = 1; break;
		default:
			fprintf(stderr, "usage: train_mlp [--epochs N] [--threads N] [--lr X] [--batch N] "
					"[--seed N] [--data DIR] [--model FILE.tc] [--save FILE] "
					"[--load FILE] [--ensemble K] [--drop-last]\n");
			return opt == 'h' ? 0 : 1;
		}
	}
	if (!ctx)
		return 1;
	if (epochs < 1 || batch < 1 || threads < 0 || ens < 0) {
		fprintf(stderr, "train_mlp: --epochs and --batch must be at least 1, --threads and "
				"--ensemble at least 0\n");
		goto out;
	}
	if (threads && tc_context_set_threads(ctx, threads) < 0) {
		rc = fail(ctx, "--threads");
		goto out;
	}
	if (!model) { /* beside the program's source: examples/train_mlp.tc */
		snprintf(model_default, sizeof(model_default), "%s", TC_EXAMPLES_DIR "/train_mlp.tc");
		model = model_default;
	}

	/* data */
	if (!(train_x = read_idx(ctx, dir, "train-images-idx3-ubyte.gz")) ||
		!(train_y = read_idx(ctx, dir, "train-labels-idx1-ubyte.gz")) ||
		!(test_x = read_idx(ctx, dir, "t10k-images-idx3-ubyte.gz")) ||
		!(test_y = read_idx(ctx, dir, "t10k-labels-idx1-ubyte.gz"))) {
		rc = fail(ctx, "reading the data (make setup installs dataset-fashion-mnist)");
		goto out;
	}
	{
		const DLTensor *data[2] = {&train_x->dl_tensor, &train_y->dl_tensor};
		if (!(batches = tc_batches_new(ctx, data, 2, batch, seed)) ||
			tc_batches_set_partial(batches, !drop_last) < 0) {
			rc = fail(ctx, "batches");
			goto out;
		}
	}

	/* the model */
	{
		int64_t w1[2] = {HID, IMG}, b1[1] = {HID}, w2[2] = {CLS, HID}, b2[1] = {CLS};
		int64_t x[2] = {batch, IMG}, y[1] = {batch};
		/* torch.nn.Linear's initialisation */
		tc_init wi = {TC_INIT_KAIMING_UNIFORM, sqrt(1.0 / 3), 0, 0, 0};
		tc_init bi1 = {TC_INIT_UNIFORM, -1 / sqrt((double)IMG), 1 / sqrt((double)IMG), 0, 0};
		tc_init bi2 = {TC_INIT_UNIFORM, -1 / sqrt((double)HID), 1 / sqrt((double)HID), 0, 0};
		tc_optimizer sgd;
		tc_optimizer_init(&sgd, TC_OPT_SGD, lr);
		double t0 = now();
		if (!(m = tc_module_load(ctx, model)) || !(md = tc_model_new(m, "mlp", "xent")) ||
			tc_model_param(md, "W1", 2, w1, &wi) < 0 ||
			tc_model_param(md, "B1", 1, b1, &bi1) < 0 ||
			tc_model_param(md, "W2", 2, w2, &wi) < 0 ||
			tc_model_param(md, "B2", 1, b2, &bi2) < 0 || tc_model_input(md, "X", 2, x) < 0 ||
			tc_model_input(md, "Y", 1, y) < 0 || (ens && tc_model_ensemble(md, ens) < 0) ||
			tc_model_build(md, &sgd, NULL, seed) < 0) {
			rc = fail(ctx, "building the model");
			goto out;
		}
		int nt = tc_context_threads(ctx) ? tc_context_threads(ctx)
						 : (int)sysconf(_SC_NPROCESSORS_ONLN);
		char what[64] = "";
		if (ens)
			snprintf(what, sizeof(what), " (an ensemble of %lld)", (long long)ens);
		printf("model %s: 784-128-10%s, batch %lld, SGD lr %g, %d thread%s; built in %.2f s "
		       "(derived, compiled or read from the kernel cache)\n",
			model, what, (long long)batch, lr, nt, nt == 1 ? "" : "s", now() - t0);
	}

	/* the partial last batch's kernels, compiled now rather than in the
	 * middle of the first epoch */
	if (!drop_last && train_x->dl_tensor.shape[0] % batch &&
		tc_model_prepare_rows(md, train_x->dl_tensor.shape[0] % batch) < 0) {
		rc = fail(ctx, "the partial batch");
		goto out;
	}
	if (load && tc_model_load(md, load) < 0) {
		rc = fail(ctx, "--load");
		goto out;
	}

	/* the test set as float32 in [0, 1], one forward run per epoch */
	ntest = test_x->dl_tensor.shape[0];
	if (!(test_in = malloc((size_t)ntest * IMG * sizeof(float))) ||
		!(test_z = malloc((size_t)(ens ? ens : 1) * ntest * CLS * sizeof(float)))) {
		fprintf(stderr, "train_mlp: out of memory\n");
		goto out;
	}
	for (int64_t i = 0; i < ntest * IMG; i++)
		test_in[i] = ((const uint8_t *)test_x->dl_tensor.data)[i] / 255.0f;

	for (int epoch = 1; epoch <= epochs; epoch++) {
		DLTensor *out[2] = {tc_model_tensor(md, "X"), tc_model_tensor(md, "Y")};
		double scale[2] = {1 / 255.0, 1}, sum = 0, t0 = now(), t1;
		int64_t steps = 0, n = tc_batches_per_epoch(batches);
		int got;
		int64_t tshape[2] = {ntest, IMG}, zshape[3] = {ens, ntest, CLS};
		double acc = 0, best = 0;
		DLTensor tin = {test_in, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, tshape, NULL, 0};
		/* an ensemble's logits: ens x ntest x CLS */
		DLTensor tz = {test_z, {kDLCPU, 0}, ens ? 3 : 2, {kDLFloat, 32, 1},
			ens ? zshape : zshape + 1, NULL, 0};
		const DLTensor *fin[1] = {&tin};
		DLTensor *fout[1] = {&tz};
		while ((got = tc_batches_next(batches, out, 2, scale)) == 1) {
			double loss;
			if (tc_model_step_rows(md, tc_batches_rows(batches), &loss) < 0) {
				rc = fail(ctx, "step");
				goto out;
			}
			sum += loss;
			steps++;
			if (tty && (steps % 16 == 0 || steps == n))
				progress(epoch, steps, n, sum / (double)steps);
		}
		t1 = now();
		if (got < 0) {
			rc = fail(ctx, "batches");
			goto out;
		}
		if (tty)
			fprintf(stderr, "\r\033[K");
		if (tc_model_forward(md, fin, 1, fout, 1) < 0) {
			rc = fail(ctx, "test");
			goto out;
		}
		for (int64_t e = 0; e < (ens ? ens : 1); e++) {
			double a = accuracy(test_z + e * ntest * CLS, test_y->dl_tensor.data, ntest);
			acc += a / (double)(ens ? ens : 1);
			best = a > best ? a : best;
		}
		printf("epoch %d: loss %.4f, test accuracy %.2f%%, %.3f s (%lld steps, %.1f us each)",
			epoch, sum / (double)steps, 100 * acc, t1 - t0, (long long)steps,
			1e6 * (t1 - t0) / (double)steps);
		if (ens)
			printf("; the mean of %lld models, the best %.2f%%", (long long)ens, 100 * best);
		printf("\n");
		fflush(stdout);
	}
	if (save) {
		if (tc_model_save(md, save) < 0) {
			rc = fail(ctx, "--save");
			goto out;
		}
		printf("parameters saved to %s (safetensors)\n", save);
	}
	rc = 0;
out:
	free(test_in);
	free(test_z);
	tc_batches_free(batches);
	tc_model_free(md);
	tc_module_free(m);
	if (train_x)
		train_x->deleter(train_x);
	if (train_y)
		train_y->deleter(train_y);
	if (test_x)
		test_x->deleter(test_x);
	if (test_y)
		test_y->deleter(test_y);
	tc_context_free(ctx);
	return rc;
}
