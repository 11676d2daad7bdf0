/* The CUDA emulator's runner (cuda_emu.h): CUDA text + launchers -> the
 * system C++ compiler with the emulation header -> a shared object opened
 * with dlopen.
 *
 * Owns: the launchers' text (one extern "C" function per kernel that
 * builds the checked tensors from the arrays of pointers and element
 * counts and runs the grid), the compiler's command line, the temporary
 * folder, and the process-wide lock around launches. */
#include "cuda_emu.h"

#include "../lang/diag.h"
#include "../lang/util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The emulation header (codegen/cuda_emu.hpp), embedded at build time. */
static const char emu_header[] = {
#include "cuda_emu_hpp.inc"
};

/* The flags of every compile: C++17 as NVRTC takes it, a shared object,
 * no warnings (the text is generated), -O0 (codegen/README.md, "CUDA
 * emulator", has the measurements behind it). */
static const char *const cxx_flags[] = {"-std=c++17", "-O0", "-fPIC", "-shared", "-w",
	"-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics"};

/* A launcher of the shared object: 0, or -1 with the message in msg. */
typedef int (*emu_run_fn)(void *const *buf, const int64_t *nelem, char *msg, size_t size);

/* One kernel of a compiled module. */
typedef struct emu_kernel {
	char name[64];
	emu_run_fn run;
} emu_kernel;

/* A shared object kept for reuse in the process (the memo below). */
typedef struct emu_module {
	struct emu_module *next;
	char *id;   /* the unit's text, the compiler command and the extra flags */
	size_t len; /* id's bytes */
	void *so;
	void (*release)(void);
	int refs;      /* the tc_cg_emu using it */
	uint64_t used; /* memo_clock when last taken */
} emu_module;

/* A compiled module: the shared object and its kernels (owned, or the
 * memo's entry mod's). */
struct tc_cg_emu {
	void *so;
	void (*release)(void);
	int nkernels;
	emu_kernel *kernels;
	emu_module *mod;
};

/* The memo of compiled modules: a compile of a unit whose text, compiler
 * command and extra flags ($TCOMP_EMU_CXXFLAGS) equal an earlier one's in
 * the process takes that one's shared object instead of running the
 * compiler again (test_corpus_cuda compiled 752 units, 606 of them
 * different).  An object no tc_cg_emu uses keeps its handle with its
 * stacks freed, at most MEMO_KEEP of them, the used longest ago closed
 * first; launches of modules sharing one object are serialised by
 * run_lock as any.  A module's state between launches is its stacks'
 * (tc_emu_release frees them, the next launch makes them again). */
#define MEMO_KEEP 32
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static emu_module *memo;
static uint64_t memo_clock;

static const tc_loc noloc = {0, 0, 0, 0};
/* Launches run one at a time in the process (cuda_emu.h). */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;

const char *tc_cg_emu_cxx(void)
{
	const char *env = getenv("TCOMP_CXX");
	if (env && *env)
		return env;
#ifdef TCOMP_EMU_CXX
	if (TCOMP_EMU_CXX[0])
		return TCOMP_EMU_CXX;
#endif
	return "c++";
}

/* Whether s is a C identifier. */
static int is_ident(const char *s)
{
	size_t i;
	if (!s || !*s || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (i = 0; s[i]; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
			    (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* Whether code's kernels can be emulated: TC_OK, or TC_ERR with why in d. */
static tc_stat check_code(const tc_cg_cuda *code, tc_diags *d)
{
	static const unsigned grid_max[3] = {2147483647u, 65535u, 65535u};
	static const unsigned block_max[3] = {1024u, 1024u, 64u};
	int k, i, j;
	if (!code || !code->source || code->nkernels < 0 || (code->nkernels && !code->kernels)) {
		tc_error(d, noloc, "CUDA emulator: no CUDA code to compile");
		return TC_ERR;
	}
	for (k = 0; k < code->nkernels; k++) {
		const tc_cg_cuda_kernel *kn = &code->kernels[k];
		unsigned long threads = 1;
		if (!is_ident(kn->name)) {
			tc_error(d, noloc, "CUDA emulator: kernel %d has no valid name", k);
			return TC_ERR;
		}
		for (j = 0; j < 3; j++) {
			if (kn->grid[j] < 1 || kn->grid[j] > grid_max[j] || kn->block[j] < 1 ||
				kn->block[j] > block_max[j]) {
				tc_error(d, noloc,
					"CUDA emulator: kernel %s: grid (%u,%u,%u) or block (%u,%u,%u) "
					"out of CUDA's limits",
					kn->name, kn->grid[0], kn->grid[1], kn->grid[2], kn->block[0],
					kn->block[1], kn->block[2]);
				return TC_ERR;
			}
			threads *= kn->block[j];
		}
		if (threads > 1024) {
			tc_error(d, noloc, "CUDA emulator: kernel %s: %lu threads per block (at most 1024)",
				kn->name, threads);
			return TC_ERR;
		}
		if (kn->shared_bytes) {
			tc_error(d, noloc,
				"CUDA emulator: kernel %s: dynamic shared memory (%zu bytes) is not "
				"supported",
				kn->name, kn->shared_bytes);
			return TC_ERR;
		}
		if (kn->nparams < 0 || (kn->nparams && !kn->params)) {
			tc_error(d, noloc, "CUDA emulator: kernel %s: bad parameter list", kn->name);
			return TC_ERR;
		}
		for (i = 0; i < kn->nparams; i++) {
			const tc_cg_cuda_param *p = &kn->params[i];
			if (p->tensor < 0 || p->tensor >= code->ntensors || !is_ident(p->name) ||
				!p->ctype || !*p->ctype || strpbrk(p->ctype, "\"\\\n;{}")) {
				tc_error(d, noloc,
					"CUDA emulator: kernel %s: parameter %d (tensor %d of %d) is "
					"malformed",
					kn->name, i, p->tensor, code->ntensors);
				return TC_ERR;
			}
		}
	}
	return TC_OK;
}

/* The translation unit: code's text, then a launcher per kernel,
 * tc_emu_run_K, which makes the checked tensors (one per tensor number,
 * named as in the text) and runs the grid. */
static void put_unit(const tc_cg_cuda *code, tc_buf *b)
{
	int k, i, j;
	tc_buf_puts(b, "#line 1 \"cuda.cu\"\n");
	tc_buf_puts(b, code->source);
	tc_buf_puts(b, "\n#line 1 \"emulator-launchers\"\n");
	for (k = 0; k < code->nkernels; k++) {
		const tc_cg_cuda_kernel *kn = &code->kernels[k];
		tc_buf_printf(b,
			"extern \"C\" int tc_emu_run_%d(void *const *buf, const int64_t *nelem, "
			"char *msg, size_t size)\n{\n",
			k);
		for (i = 0; i < kn->nparams; i++) {
			const tc_cg_cuda_param *p = &kn->params[i];
			for (j = 0; j < i && kn->params[j].tensor != p->tensor; j++)
				;
			if (j < i)
				continue; /* one shadow per tensor */
			tc_buf_printf(b,
				"\ttc_emu::tensor t%d(buf[%d], nelem[%d], \"%s\");\n"
				"\tif (!t%d.ok()) {\n"
				"\t\tsnprintf(msg, size, \"out of memory for the shadow of %s\");\n"
				"\t\treturn -1;\n\t}\n",
				p->tensor, p->tensor, p->tensor, p->name, p->tensor, p->name);
		}
		tc_buf_puts(b, "\tauto go = [&]() { ");
		tc_buf_printf(b, "%s(", kn->name);
		for (i = 0; i < kn->nparams; i++)
			tc_buf_printf(b, "%stc_emu::gptr<%s%s>{&t%d.a}", i ? ", " : "",
				kn->params[i].is_const ? "const " : "", kn->params[i].ctype,
				kn->params[i].tensor);
		tc_buf_printf(b,
			"); };\n"
			"\treturn tc_emu::launch({%uu, %uu, %uu}, {%uu, %uu, %uu}, "
			"tc_emu::thunk<decltype(go)>, &go, msg, size);\n}\n",
			kn->grid[0], kn->grid[1], kn->grid[2], kn->block[0], kn->block[1],
			kn->block[2]);
	}
}

/* Write n bytes of text to path: TC_OK, or TC_ERR with why in d. */
static tc_stat write_file(const char *path, const char *text, size_t n, tc_diags *d)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(text, 1, n, f) != n) {
		tc_error(d, noloc, "CUDA emulator: cannot write %s: %s", path, strerror(errno));
		if (f)
			fclose(f);
		return TC_ERR;
	}
	if (fclose(f) != 0) {
		tc_error(d, noloc, "CUDA emulator: cannot write %s: %s", path, strerror(errno));
		return TC_ERR;
	}
	return TC_OK;
}

/* The first 40 lines of the file at path (tc_free), or NULL. */
static char *read_head(const char *path)
{
	FILE *f = fopen(path, "rb");
	tc_buf b;
	int c, lines = 0;
	if (!f)
		return NULL;
	tc_buf_init(&b);
	while ((c = fgetc(f)) != EOF) {
		tc_buf_putc(&b, (char)c);
		if (c == '\n' && ++lines == 40) {
			if (fgetc(f) != EOF)
				tc_buf_puts(&b, "...\n");
			break;
		}
	}
	fclose(f);
	return tc_buf_take(&b);
}

/* Split the command cmd at spaces and tabs into argv (words are copied
 * into words, which must hold strlen(cmd) + 1 bytes); the number of
 * words. */
static int split_words(const char *cmd, char *words, char **argv, int max)
{
	int n = 0;
	strcpy(words, cmd);
	for (char *p = words; *p && n < max;) {
		while (*p == ' ' || *p == '\t')
			*p++ = 0;
		if (!*p)
			break;
		argv[n++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
	return n;
}

/* Run the compiler, its output to dir/cxx.log: with header set, on
 * dir/cuda_emu.hpp into the precompiled header dir/cuda_emu.hpp.gch;
 * else on dir/unit.cpp into dir/unit.so, with the emulation header hpp
 * (NULL: dir/cuda_emu.hpp) included first.  TC_OK, or TC_ERR with the
 * command's output in d. */
static tc_stat run_compiler(const char *dir, const char *hpp_in, int header, tc_diags *d)
{
	const char *cxx = tc_cg_emu_cxx(), *extra = getenv("TCOMP_EMU_CXXFLAGS");
	size_t nflags = sizeof(cxx_flags) / sizeof(cxx_flags[0]);
	char *words = NULL, *xwords = NULL, *argv[96], hpp[4400], cpp[4200], so[4200], log[4200];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int argc, err, status = 0, i;
	tc_stat r = TC_ERR;

	if (hpp_in)
		snprintf(hpp, sizeof hpp, "%s", hpp_in);
	else
		snprintf(hpp, sizeof hpp, "%s/cuda_emu.hpp", dir);
	snprintf(cpp, sizeof cpp, "%s/unit.cpp", dir);
	snprintf(so, sizeof so, header ? "%s/cuda_emu.hpp.gch" : "%s/unit.so", dir);
	snprintf(log, sizeof log, "%s/cxx.log", dir);
	words = tc_malloc(strlen(cxx) + 1);
	xwords = tc_malloc(extra ? strlen(extra) + 1 : 1);
	if (!words || !xwords) {
		tc_error(d, noloc, "CUDA emulator: out of memory");
		goto error;
	}
	argc = split_words(cxx, words, argv, 16);
	if (argc == 0) {
		tc_error(d, noloc, "CUDA emulator: the C++ compiler command (TCOMP_CXX) is empty");
		goto error;
	}
	for (i = 0; i < (int)nflags; i++)
		if (!header || strcmp(cxx_flags[i], "-shared"))
			argv[argc++] = (char *)cxx_flags[i];
	if (extra)
		argc += split_words(extra, xwords, argv + argc, 32);
	if (header) {
		argv[argc++] = "-x";
		argv[argc++] = "c++-header";
		argv[argc++] = hpp;
		argv[argc++] = "-o";
		argv[argc++] = so;
	} else {
		argv[argc++] = "-include";
		argv[argc++] = hpp;
		argv[argc++] = "-o";
		argv[argc++] = so;
		argv[argc++] = cpp;
	}
	argv[argc] = NULL;

	if (posix_spawn_file_actions_init(&fa) != 0) {
		tc_error(d, noloc, "CUDA emulator: out of memory");
		goto error;
	}
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (err != 0) {
		tc_error(d, noloc,
			"CUDA emulator: cannot run the C++ compiler '%s' (%s): %s", argv[0],
			getenv("TCOMP_CXX") && *getenv("TCOMP_CXX") ? "from TCOMP_CXX"
								    : "set TCOMP_CXX to name one",
			strerror(err));
		goto error;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			tc_error(d, noloc, "CUDA emulator: waiting for the C++ compiler: %s",
				strerror(errno));
			goto error;
		}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char *out = read_head(log);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
			tc_error(d, noloc,
				"CUDA emulator: cannot run the C++ compiler '%s' (exit status 127)%s%s",
				argv[0], out && *out ? ":\n" : "", out ? out : "");
		else
			tc_error(d, noloc, "CUDA emulator: the C++ compiler '%s' failed (%s %d):\n%s",
				argv[0], WIFEXITED(status) ? "exit status" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
				out ? out : "(no output)");
		tc_free(out);
		goto error;
	}
	r = TC_OK;
error:
	tc_free(words);
	tc_free(xwords);
	return r;
}

/* Remove dir and the files the compile may have left in it. */
static void remove_dir(const char *dir)
{
	static const char *const files[] = {"cuda_emu.hpp", "cuda_emu.hpp.gch", "unit.cpp",
		"unit.so", "cxx.log"};
	char path[4400];
	size_t i;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* ---- the precompiled emulation header ----
 *
 * Most compiles are a process's only one (a tcomp command), and the
 * header's includes are most of a small compile's time (0.20 s of 0.36 s,
 * g++ 12), so the precompiled header is kept between processes, in a
 * store: $TCOMP_EMU_STORE when set (a folder; "off": no store; the older
 * name $TCOMP_EMU_PCH is read when it is not set), else
 * $XDG_CACHE_HOME/tcomp/emu, else ~/.cache/tcomp/emu.  Each entry is a
 * folder pch-<key> holding cuda_emu.hpp and cuda_emu.hpp.gch, <key> a hash
 * of the header's text, the compiler command with its flags
 * ($TCOMP_EMU_CXXFLAGS) and the compiler program's file (size, time,
 * inode: an upgrade gets an entry of its own).  The first compile that
 * finds no entry makes it (0.44 s of CPU, once) in a temporary folder of
 * the store and renames it into place; a process that loses that race
 * uses the winner's.  Using an entry refreshes its time; the store keeps
 * the PCH_KEEP entries used last (each is about 15 MB) and removes
 * temporary folders an hour old (a process killed while making one).
 *
 * Without a usable store (no HOME, a folder that cannot be written,
 * "off"), a process makes its own from its second compile on (one compile
 * would pay more for it than it saves), in a folder of its own under
 * $TMPDIR removed when the library is unloaded or the process exits.
 *
 * Either way correctness never depends on it: the compiler reads the
 * header's text where the precompiled one does not fit (gcc checks its
 * compiler and flags), and a compile with it that fails (an entry removed
 * meanwhile) is run again with the unit's own copy of the header. */
enum { PCH_KEEP = 4, STALE_TMP_S = 3600 };
#define OBJ_KEEP_BYTES ((int64_t)256 << 20) /* the compiled units' (below) */

static pthread_mutex_t pch_lock = PTHREAD_MUTEX_INITIALIZER;
static int pch_compiles, pch_tried, pch_ready;
static char pch_dir[4096]; /* the process's own, when pch_ready */

/* The store's folder into buf: 0, or -1 when there is none. */
static int pch_store_dir(char *buf, size_t n)
{
	const char *v = getenv("TCOMP_EMU_STORE");
	int w;
	if (!v || !*v)
		v = getenv("TCOMP_EMU_PCH"); /* the variable's older name */
	if (v && *v) {
		if (!strcmp(v, "off"))
			return -1;
		w = snprintf(buf, n, "%s", v);
	} else if ((v = getenv("XDG_CACHE_HOME")) && *v == '/')
		w = snprintf(buf, n, "%s/tcomp/emu", v);
	else if ((v = getenv("HOME")) && *v)
		w = snprintf(buf, n, "%s/.cache/tcomp/emu", v);
	else
		return -1;
	return w > 0 && (size_t)w < n - 64 ? 0 : -1; /* room for the entry's name */
}

/* Precompile the emulation header in folder dir (dir/cuda_emu.hpp and
 * dir/cuda_emu.hpp.gch): 1, or 0 when that failed (why is not kept: the
 * caller compiles without it). */
static int make_pch(const char *dir)
{
	char path[4400];
	tc_diags scratch;
	int ok;
	tc_diags_init(&scratch, NULL);
	snprintf(path, sizeof path, "%s/cuda_emu.hpp", dir);
	ok = write_file(path, emu_header, sizeof emu_header - 1, &scratch) == TC_OK &&
		run_compiler(dir, NULL, 1, &scratch) == TC_OK;
	tc_diags_clear(&scratch);
	return ok;
}

/* The file the compiler command's program runs (its first word, looked up
 * on the PATH) into st: 0, or -1 when not found. */
static int compiler_file(const char *cxx, struct stat *st)
{
	char prog[1024], path[4200];
	const char *p = cxx, *dirs = getenv("PATH");
	size_t n = 0;
	while (*p == ' ' || *p == '\t')
		p++;
	while (p[n] && p[n] != ' ' && p[n] != '\t' && n + 1 < sizeof prog)
		n++;
	memcpy(prog, p, n);
	prog[n] = 0;
	if (!n)
		return -1;
	if (strchr(prog, '/'))
		return stat(prog, st);
	for (p = dirs ? dirs : "/usr/bin:/bin"; *p;) {
		size_t len = strcspn(p, ":");
		snprintf(path, sizeof path, "%.*s/%s", (int)(len ? len : 1), len ? p : ".", prog);
		if (access(path, X_OK) == 0 && stat(path, st) == 0)
			return 0;
		p += len + (p[len] == ':');
	}
	return -1;
}

/* The entry's key: a hash of what makes a precompiled header fit. */
static uint64_t pch_key(void)
{
	const char *cxx = tc_cg_emu_cxx(), *extra = getenv("TCOMP_EMU_CXXFLAGS");
	uint64_t h = tc_hash_bytes(TC_HASH_INIT, emu_header, sizeof emu_header - 1);
	struct stat st;
	size_t i;
	h = tc_hash_bytes(h, cxx, strlen(cxx) + 1);
	h = tc_hash_bytes(h, extra ? extra : "", extra ? strlen(extra) + 1 : 1);
	for (i = 0; i < sizeof(cxx_flags) / sizeof(cxx_flags[0]); i++)
		h = tc_hash_bytes(h, cxx_flags[i], strlen(cxx_flags[i]) + 1);
	if (compiler_file(cxx, &st) == 0) {
		int64_t id[3] = {(int64_t)st.st_size, (int64_t)st.st_mtime, (int64_t)st.st_ino};
		h = tc_hash_bytes(h, id, sizeof id);
	}
	return h;
}

/* An entry of the store (a folder), as pruning sees it. */
typedef struct store_entry {
	char name[64];
	time_t t;      /* used last */
	int64_t bytes; /* its files' */
} store_entry;

/* qsort's order of store entries: the used last first. */
static int newest_first(const void *a, const void *b)
{
	time_t x = ((const store_entry *)a)->t, y = ((const store_entry *)b)->t;
	return (x < y) - (x > y);
}

/* Prune the store: the precompiled headers beyond the PCH_KEEP used last
 * (keep, the one in use, counts as one; NULL: none), the compiled units
 * beyond OBJ_KEEP_BYTES, the used longest ago first, and the temporary
 * folders left an hour ago (a process killed while making an entry). */
static void store_prune(const char *store, const char *keep)
{
	store_entry *e = NULL, *grown;
	size_t n = 0, cap = 0, i;
	char entry[4200], path[4400];
	time_t now = time(NULL);
	int64_t bytes = 0;
	int pchs = keep != NULL;
	DIR *dir = opendir(store);
	struct dirent *de;
	struct stat st;
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		static const char *const files[] = {"unit.cpp", "unit.so"};
		int tmp = !strncmp(de->d_name, ".tmp-", 5);
		store_entry x;
		size_t f;
		if ((strncmp(de->d_name, "pch-", 4) && strncmp(de->d_name, "obj-", 4) && !tmp) ||
			strlen(de->d_name) >= sizeof x.name || (keep && !strcmp(de->d_name, keep)))
			continue;
		snprintf(entry, sizeof entry, "%s/%s", store, de->d_name);
		if (stat(entry, &st) < 0)
			continue;
		if (tmp) {
			if (now - st.st_mtime > STALE_TMP_S)
				remove_dir(entry);
			continue;
		}
		snprintf(x.name, sizeof x.name, "%.63s", de->d_name);
		x.t = st.st_mtime;
		x.bytes = 0;
		for (f = 0; f < 2 && x.name[0] == 'o'; f++) {
			snprintf(path, sizeof path, "%s/%s", entry, files[f]);
			if (stat(path, &st) == 0)
				x.bytes += st.st_size;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			if (!(grown = tc_realloc(e, cap * sizeof *e)))
				break;
			e = grown;
		}
		e[n++] = x;
	}
	closedir(dir);
	if (n)
		qsort(e, n, sizeof *e, newest_first);
	for (i = 0; i < n; i++) {
		int drop = e[i].name[0] == 'p' ? ++pchs > PCH_KEEP : (bytes += e[i].bytes) > OBJ_KEEP_BYTES;
		if (drop) {
			snprintf(entry, sizeof entry, "%s/%s", store, e[i].name);
			remove_dir(entry);
		}
	}
	tc_free(e);
}

/* The store's header for this compiler and flags (made when missing)
 * into hdr: 0, or -1 when the store cannot be used.  Called with pch_lock
 * held. */
static int pch_from_store(char *hdr, size_t n)
{
	static uint64_t failed_key; /* an entry this process could not make */
	static int failed;
	char store[4096], entry[4200], tmp[4200], path[4400];
	uint64_t key = pch_key();
	int ok = 0;
	if (pch_store_dir(store, sizeof store) < 0)
		return -1;
	snprintf(entry, sizeof entry, "%s/pch-%016llx", store, (unsigned long long)key);
	snprintf(path, sizeof path, "%s/cuda_emu.hpp.gch", entry);
	if (access(path, R_OK) == 0) {
		utimes(entry, NULL); /* used last */
		snprintf(hdr, n, "%s/cuda_emu.hpp", entry);
		return 0;
	}
	if (failed && failed_key == key)
		return -1;
	snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", store);
	if (tc_make_parent_dirs(tmp) == 0 && mkdtemp(tmp)) {
		if (make_pch(tmp)) {
			snprintf(path, sizeof path, "%s/cxx.log", tmp);
			unlink(path);
			ok = rename(tmp, entry) == 0 || errno == EEXIST || errno == ENOTEMPTY;
		}
		if (access(tmp, F_OK) == 0)
			remove_dir(tmp); /* failed, or another process made the entry first */
	}
	snprintf(path, sizeof path, "%s/cuda_emu.hpp.gch", entry);
	if (!ok || access(path, R_OK) < 0) {
		failed = 1;
		failed_key = key;
		return -1;
	}
	snprintf(hdr, n, "%s/cuda_emu.hpp", entry);
	store_prune(store, strrchr(entry, '/') + 1);
	return 0;
}

/* The header to include (its .gch beside it) into path, or NULL: the
 * unit's own. */
static const char *pch_header(char *path, size_t n)
{
	const char *tmp = getenv("TMPDIR");
	const char *r = NULL;
	pthread_mutex_lock(&pch_lock);
	if (pch_from_store(path, n) == 0) {
		pthread_mutex_unlock(&pch_lock);
		return path;
	}
	if (++pch_compiles >= 2 && !pch_tried) {
		pch_tried = 1;
		if (!tmp || !*tmp)
			tmp = "/tmp";
		if (snprintf(pch_dir, sizeof pch_dir, "%s/tcomp-emu-pch-XXXXXX", tmp) <
			    (int)sizeof pch_dir && mkdtemp(pch_dir)) {
			pch_ready = make_pch(pch_dir);
			if (!pch_ready)
				remove_dir(pch_dir);
		}
	}
	if (pch_ready) {
		snprintf(path, n, "%s/cuda_emu.hpp", pch_dir);
		r = path;
	}
	pthread_mutex_unlock(&pch_lock);
	return r;
}

__attribute__((destructor)) static void pch_remove(void)
{
	if (pch_ready)
		remove_dir(pch_dir);
}

/* The memo's id of text under the current compiler and flags (owned; NULL
 * when out of memory), its bytes in *len. */
static char *memo_id(const char *text, size_t *len)
{
	const char *cxx = tc_cg_emu_cxx(), *extra = getenv("TCOMP_EMU_CXXFLAGS");
	size_t nt = strlen(text) + 1, nc = strlen(cxx) + 1, nx = extra ? strlen(extra) + 1 : 1;
	char *id = tc_malloc(nt + nc + nx);
	if (!id)
		return NULL;
	memcpy(id, text, nt);
	memcpy(id + nt, cxx, nc);
	memcpy(id + nt + nc, extra ? extra : "", nx);
	*len = nt + nc + nx;
	return id;
}

/* The memo's entry of id, or NULL (under memo_lock). */
static emu_module *memo_find(const char *id, size_t len)
{
	emu_module *m;
	for (m = memo; m && (m->len != len || memcmp(m->id, id, len)); m = m->next)
		;
	return m;
}

/* The memo's entry of id (taken: one more reference), or NULL. */
static emu_module *memo_take(const char *id, size_t len)
{
	emu_module *m;
	pthread_mutex_lock(&memo_lock);
	if ((m = memo_find(id, len))) {
		m->refs++;
		m->used = ++memo_clock;
	}
	pthread_mutex_unlock(&memo_lock);
	return m;
}

/* Keep e's shared object in the memo under id (taken; freed when not
 * kept: out of memory, or another thread kept the same unit first, whose
 * entry e then leaves alone). */
static void memo_keep(tc_cg_emu *e, char *id, size_t len)
{
	emu_module *m = tc_calloc(1, sizeof *m);
	if (!m) {
		tc_free(id);
		return;
	}
	pthread_mutex_lock(&memo_lock);
	if (memo_find(id, len)) {
		pthread_mutex_unlock(&memo_lock);
		tc_free(m);
		tc_free(id);
		return;
	}
	m->id = id;
	m->len = len;
	m->so = e->so;
	m->release = e->release;
	m->refs = 1;
	m->used = ++memo_clock;
	m->next = memo;
	memo = m;
	e->mod = m;
	pthread_mutex_unlock(&memo_lock);
}

/* Drop a reference to m: with none left its stacks are freed, and the
 * idle entries beyond MEMO_KEEP used longest ago are closed. */
static void memo_drop(emu_module *m)
{
	emu_module **pp, **oldest;
	int idle;
	pthread_mutex_lock(&memo_lock);
	if (--m->refs == 0 && m->release)
		m->release();
	for (;;) {
		idle = 0;
		oldest = NULL;
		for (pp = &memo; *pp; pp = &(*pp)->next)
			if ((*pp)->refs == 0) {
				idle++;
				if (!oldest || (*pp)->used < (*oldest)->used)
					oldest = pp;
			}
		if (idle <= MEMO_KEEP)
			break;
		m = *oldest;
		*oldest = m->next;
		dlclose(m->so);
		tc_free(m->id);
		tc_free(m);
	}
	pthread_mutex_unlock(&memo_lock);
}

/* e's launchers from its shared object, as code names its kernels: 0, or
 * -1 with an error in d. */
static int find_kernels(tc_cg_emu *e, const tc_cg_cuda *code, tc_diags *d)
{
	int k;
	e->nkernels = code->nkernels;
	for (k = 0; k < code->nkernels; k++) {
		char sym[32];
		snprintf(sym, sizeof sym, "tc_emu_run_%d", k);
		snprintf(e->kernels[k].name, sizeof e->kernels[k].name, "%s", code->kernels[k].name);
		*(void **)&e->kernels[k].run = dlsym(e->so, sym);
		if (!e->kernels[k].run || !e->release) {
			tc_error(d, noloc, "CUDA emulator: the compiled kernels lack %s", sym);
			return -1;
		}
	}
	return 0;
}

/* Open the shared object at path into e and find its launchers as code
 * names its kernels: 0, or -1 with an error in d (nothing left open). */
static int load_object(tc_cg_emu *e, const char *path, const tc_cg_cuda *code, tc_diags *d)
{
	if (!(e->so = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		tc_error(d, noloc, "CUDA emulator: cannot load the compiled kernels: %s", dlerror());
		return -1;
	}
	*(void **)&e->release = dlsym(e->so, "tc_emu_release");
	if (find_kernels(e, code, d) < 0) {
		dlclose(e->so);
		e->so = NULL;
		e->release = NULL;
		return -1;
	}
	return 0;
}

/* ---- the store of compiled units ----
 *
 * A unit compiled once is compiled again by every later process that
 * emulates the same code (the CI's sanitizer run repeats the release run's
 * test_corpus_cuda and test_cuda_files: about 800 compiles of 0.3 s), so
 * the shared objects are kept in the same store as the precompiled header:
 * a folder obj-<key> per unit, holding unit.cpp (the unit's text) and
 * unit.so, <key> a hash of the text and of pch_key's compiler, flags and
 * header.  An entry is used only when its unit.cpp equals the text whole
 * (a hash never decides alone) and its object loads with every launcher;
 * one that does not is removed and the unit compiled.  A compile with a
 * store runs in a temporary folder of it that is renamed into place once
 * its object loaded (an entry is never seen half-written; a process that
 * loses the race keeps its own object and removes its folder).  Using an
 * entry refreshes its time; a process's first new entry, and every 16th
 * after, prunes the store (store_prune: the units beyond OBJ_KEEP_BYTES,
 * the used longest ago first; a unit is about 32 KB). */

/* The store's entry for text into buf: 0, or -1 when there is no store. */
static int obj_entry(const char *text, char *buf, size_t n)
{
	char store[4096];
	uint64_t key;
	if (pch_store_dir(store, sizeof store) < 0)
		return -1;
	key = tc_hash_bytes(pch_key(), text, strlen(text));
	return snprintf(buf, n, "%s/obj-%016llx", store, (unsigned long long)key) < (int)n ? 0 : -1;
}

/* Whether the file at path holds exactly the n bytes of text. */
static int file_is(const char *path, const char *text, size_t n)
{
	struct stat st;
	char *buf;
	FILE *f;
	int same = 0;
	if (stat(path, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size != n || !(f = fopen(path, "rb")))
		return 0;
	if ((buf = tc_malloc(n + 1))) {
		same = fread(buf, 1, n + 1, f) == n && memcmp(buf, text, n) == 0;
		tc_free(buf);
	}
	fclose(f);
	return same;
}

/* The store's object of text, its entry entry (obj_entry), loaded into e:
 * 1, or 0 when there is none that fits (a bad entry is removed). */
static int obj_from_store(tc_cg_emu *e, const tc_cg_cuda *code, const char *text,
	const char *entry)
{
	char path[4400];
	tc_diags scratch;
	int ok;
	snprintf(path, sizeof path, "%s/unit.cpp", entry);
	if (!file_is(path, text, strlen(text))) {
		if (access(path, F_OK) == 0)
			remove_dir(entry); /* another text of the same hash: this one's now */
		return 0;
	}
	snprintf(path, sizeof path, "%s/unit.so", entry);
	tc_diags_init(&scratch, NULL);
	ok = load_object(e, path, code, &scratch) == 0;
	tc_diags_clear(&scratch);
	if (!ok) {
		remove_dir(entry);
		return 0;
	}
	utimes(entry, NULL); /* used last */
	return 1;
}

/* The folder to compile in into dir (made): beside the store's entry entry
 * (NULL: no store) when it can be made there (1), else under $TMPDIR (0);
 * -1 with an error in d. */
static int obj_compile_dir(const char *entry, char *dir, size_t n, tc_diags *d)
{
	const char *tmp = getenv("TMPDIR");
	if (entry && snprintf(dir, n, "%.*s/.tmp-XXXXXX", (int)(strrchr(entry, '/') - entry),
			     entry) < (int)n && tc_make_parent_dirs(dir) == 0 && mkdtemp(dir))
		return 1;
	if (!tmp || !*tmp)
		tmp = "/tmp";
	if (snprintf(dir, n, "%s/tcomp-emu-XXXXXX", tmp) >= (int)n) {
		tc_error(d, noloc, "CUDA emulator: TMPDIR is too long");
		return -1;
	}
	if (!mkdtemp(dir)) {
		tc_error(d, noloc, "CUDA emulator: cannot make a temporary folder under %s: %s", tmp,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* Keep the compile folder dir (in the store) as the entry entry, or
 * remove it (another process kept the unit first); prune the store at
 * the process's first entry and every 16th after. */
static void obj_keep(const char *dir, const char *entry)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static pid_t pruned_by; /* a fork's first entry prunes too */
	static unsigned kept;
	char path[4400];
	int prune = 0;
	snprintf(path, sizeof path, "%s/cuda_emu.hpp", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/cxx.log", dir);
	unlink(path);
	if (rename(dir, entry) == 0) {
		pthread_mutex_lock(&lock);
		prune = pruned_by != getpid() || ++kept % 16 == 0;
		pruned_by = getpid();
		pthread_mutex_unlock(&lock);
	} else {
		remove_dir(dir);
	}
	if (prune) {
		snprintf(path, sizeof path, "%.*s", (int)(strrchr(entry, '/') - entry), entry);
		store_prune(path, NULL);
	}
}

tc_cg_emu *tc_cg_emu_compile(const tc_cg_cuda *code, tc_diags *d)
{
	char pch[4400], entry[4200];
	const char *hdr;
	char dir[4200], path[4400];
	tc_cg_emu *e = NULL;
	tc_buf unit;
	char *text = NULL, *id = NULL;
	size_t idlen = 0;
	emu_module *m;
	int made = 0, in_store = 0, stored;

	if (check_code(code, d) < 0)
		return NULL;
	tc_buf_init(&unit);
	put_unit(code, &unit);
	text = tc_buf_take(&unit);
	e = tc_calloc(1, sizeof *e);
	if (!text || !e || !(id = memo_id(text, &idlen)) || (code->nkernels &&
			       !(e->kernels = tc_calloc((size_t)code->nkernels, sizeof *e->kernels)))) {
		tc_error(d, noloc, "CUDA emulator: out of memory");
		goto error;
	}
	if ((m = memo_take(id, idlen))) { /* compiled before: its shared object */
		e->mod = m;
		e->so = m->so;
		e->release = m->release;
		if (find_kernels(e, code, d) < 0)
			goto error;
		tc_free(id);
		tc_free(text);
		return e;
	}
	stored = obj_entry(text, entry, sizeof entry) == 0;
	if (stored && obj_from_store(e, code, text, entry)) { /* an earlier process's */
		memo_keep(e, id, idlen);
		tc_free(text);
		return e;
	}
	if ((in_store = obj_compile_dir(stored ? entry : NULL, dir, sizeof dir, d)) < 0)
		goto error;
	made = 1;
	snprintf(path, sizeof path, "%s/cuda_emu.hpp", dir);
	if (write_file(path, emu_header, sizeof emu_header - 1, d) < 0)
		goto error;
	snprintf(path, sizeof path, "%s/unit.cpp", dir);
	if (write_file(path, text, strlen(text), d) < 0)
		goto error;
	hdr = pch_header(pch, sizeof pch);
	if (hdr) { /* a failure with it runs again without it (above) */
		tc_diags scratch;
		tc_diags_init(&scratch, NULL);
		if (run_compiler(dir, hdr, 0, &scratch) < 0)
			hdr = NULL;
		tc_diags_clear(&scratch);
	}
	if (!hdr && run_compiler(dir, NULL, 0, d) < 0)
		goto error;
	snprintf(path, sizeof path, "%s/unit.so", dir);
	if (load_object(e, path, code, d) < 0)
		goto error;
	if (in_store)
		obj_keep(dir, entry);
	else
		remove_dir(dir);
	tc_free(text);
	memo_keep(e, id, idlen);
	return e;
error:
	if (made)
		remove_dir(dir);
	tc_free(id);
	tc_free(text);
	tc_cg_emu_free(e);
	return NULL;
}

tc_stat tc_cg_emu_run(tc_cg_emu *e, int kernel, void *const *buf, const int64_t *nelem, tc_diags *d)
{
	char msg[1200];
	int rc;
	if (!e || kernel < 0 || kernel >= e->nkernels || !buf || !nelem) {
		tc_error(d, noloc, "CUDA emulator: no kernel %d to run", kernel);
		return TC_ERR;
	}
	msg[0] = 0;
	pthread_mutex_lock(&run_lock);
	rc = e->kernels[kernel].run(buf, nelem, msg, sizeof msg);
	pthread_mutex_unlock(&run_lock);
	if (rc != 0) {
		tc_error(d, noloc, "CUDA emulator: kernel %s: %s", e->kernels[kernel].name, msg);
		return TC_ERR;
	}
	return TC_OK;
}

int tc_cg_emu_nkernels(const tc_cg_emu *e)
{
	return e ? e->nkernels : 0;
}

void tc_cg_emu_free(tc_cg_emu *e)
{
	if (!e)
		return;
	if (e->mod)
		memo_drop(e->mod);
	else if (e->so) {
		if (e->release)
			e->release();
		dlclose(e->so);
	}
	tc_free(e->kernels);
	tc_free(e);
}
