/* The parser: tokens to AST, by recursive descent with precedence climbing
 * for expressions.  Each function is named after the grammar rule it parses
 * (docs/language.md, "Grammar").
 *
 * Errors: the first syntax error in a def is reported ("expected X but found
 * Y") and the parser skips to the next 'def', so one run reports errors in
 * several defs.  Expression nesting is bounded (TC_MAX_DEPTH) so that
 * pathological input yields an error rather than a stack overflow. */
#include "ast.h"
#include "lex.h"

#include <stdio.h>
#include <string.h>

#define TC_MAX_DEPTH 200
/* Bound on the height of an expression tree: every later pass recurses over
 * it, and a chain a + b + c + ... builds height without parser recursion. */
#define TC_MAX_TREE 1000

typedef struct parser {
	const tc_source *src;
	tc_diags *d;
	tc_arena *ar;
	tc_token *toks;
	int ntoks, pos;
	int failed; /* a syntax error in the current def */
	int depth;
	int nlex;      /* the first nlex diagnostics are the lexer's */
	int def_start; /* offset where the current def starts */
} parser;

static const tc_token *peek(parser *p)
{
	return &p->toks[p->pos];
}

static tc_loc tok_loc(parser *p, const tc_token *t)
{
	return tc_source_loc(p->src, t->off, t->len ? t->len : 1);
}

static const tc_token *next(parser *p)
{
	const tc_token *t = &p->toks[p->pos];
	if (t->kind != TK_EOF)
		p->pos++;
	return t;
}

/* Describe a token for "but found ..." */
static void found(parser *p, const tc_token *t, char *buf, size_t n)
{
	if (t->kind == TK_EOF)
		snprintf(buf, n, "end of file");
	else if (t->kind == TK_IDENT)
		snprintf(buf, n, "identifier '%.*s'", t->len > 40 ? 40 : t->len,
			p->src->text + t->off);
	else
		snprintf(buf, n, "'%.*s'", t->len > 40 ? 40 : t->len,
			p->src->text + t->off);
}

static int lex_error_in(const tc_diags *d, int nlex, int a, int b);

static void syntax_error(parser *p, const char *expected)
{
	char buf[64];
	if (p->failed)
		return;
	p->failed = 1;
	/* a lexical error in this def already explains what follows */
	if (lex_error_in(p->d, p->nlex, p->def_start, peek(p)->off + 1))
		return;
	found(p, peek(p), buf, sizeof(buf));
	tc_error(p->d, tok_loc(p, peek(p)), "expected %s but found %s", expected, buf);
}

/* After a syntax error at a missing closing bracket: point at the opener. */
static void unclosed(parser *p, const tc_token *open)
{
	if (p->d->n && p->d->v[p->d->n - 1].sev == TC_SEV_ERROR &&
		!lex_error_in(p->d, p->nlex, p->def_start, peek(p)->off + 1))
		tc_note(p->d, tok_loc(p, open), "to match this '%.*s'", open->len,
			p->src->text + open->off);
}

static int accept(parser *p, tc_tok_kind k)
{
	if (peek(p)->kind != k)
		return 0;
	next(p);
	return 1;
}

static const tc_token *expect(parser *p, tc_tok_kind k, const char *what)
{
	if (peek(p)->kind != k) {
		syntax_error(p, what ? what : tc_tok_kind_name(k));
		return NULL;
	}
	return next(p);
}

static const char *tok_str(parser *p, const tc_token *t)
{
	return tc_arena_strndup(p->ar, p->src->text + t->off, (size_t)t->len);
}

static tc_loc loc_from(parser *p, int start_tok)
{
	const tc_token *a = &p->toks[start_tok];
	const tc_token *b = &p->toks[p->pos > start_tok ? p->pos - 1 : start_tok];
	return tc_source_loc(p->src, a->off, b->off + b->len - a->off);
}

static tc_expr *new_expr(parser *p, tc_ast_kind kind, int nargs)
{
	tc_expr *e = tc_arena_alloc(p->ar, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = kind;
	e->nargs = nargs;
	if (nargs) {
		e->args = tc_arena_alloc(p->ar, (size_t)nargs * sizeof(tc_expr *));
		if (!e->args)
			return NULL;
	}
	return e;
}

static tc_expr *parse_exp(parser *p);

/* Set e's height from its operands; NULL (with an error) when too high. */
static tc_expr *finish(parser *p, tc_expr *e)
{
	int i;
	if (!e)
		return NULL;
	e->depth = 1;
	for (i = 0; i < e->nargs; i++)
		if (e->args[i]->depth + 1 > e->depth)
			e->depth = e->args[i]->depth + 1;
	if (e->depth > TC_MAX_TREE) {
		if (!p->failed)
			tc_error(p->d, e->loc,
				"expression too deep (its tree is more than %d levels high); split it over several statements through a temporary",
				TC_MAX_TREE);
		p->failed = 1;
		return NULL;
	}
	return e;
}

/* args ::= '(' [exp {',' exp}] ')'   (the '(' already consumed) */
static tc_expr *parse_call_args(parser *p, tc_expr *e)
{
	const tc_token *open = &p->toks[p->pos - 1];
	tc_vec args = {0};
	int i, ok = 1;

	if (!accept(p, TK_RPAREN)) {
		do {
			tc_expr *a = parse_exp(p);
			if (!a || tc_vec_push(&args, a) < 0) {
				if (a)
					p->d->oom = 1;
				ok = 0;
				break;
			}
		} while (accept(p, TK_COMMA));
		if (ok && !expect(p, TK_RPAREN, "',' or ')'")) {
			unclosed(p, open);
			ok = 0;
		}
	}
	if (ok) {
		e->nargs = args.n;
		e->args = tc_arena_alloc(p->ar, (size_t)(args.n ? args.n : 1) * sizeof(tc_expr *));
		if (!e->args)
			ok = 0;
		for (i = 0; ok && i < args.n; i++)
			e->args[i] = args.v[i];
	}
	tc_vec_free(&args);
	return ok ? e : NULL;
}

/* base ::= NUMBER | '(' exp ')' | scalar '(' exp ')'
 *        | ('min'|'max') '(' exp ',' exp ')' | IDENT '(' [exp {',' exp}] ')' | IDENT */
static tc_expr *parse_base(parser *p)
{
	int start = p->pos;
	const tc_token *t = peek(p);
	tc_expr *e;

	switch (t->kind) {
	case TK_INT:
	case TK_FLOAT:
		e = new_expr(p, t->kind == TK_INT ? TC_AST_INT : TC_AST_FLOAT, 0);
		if (!e)
			return NULL;
		e->ival = t->ival;
		e->fval = t->kind == TK_INT ? (double)t->ival : t->fval;
		next(p);
		break;
	case TK_LPAREN:
		next(p);
		e = parse_exp(p);
		if (!e)
			return NULL;
		if (!expect(p, TK_RPAREN, "')'")) {
			unclosed(p, t);
			return NULL;
		}
		/* keep the inner node; widen its location to the parentheses */
		e->loc = loc_from(p, start);
		return e;
	case TK_TYPE:
		e = new_expr(p, TC_AST_CAST, 1);
		if (!e)
			return NULL;
		e->cast_type = t->dtype;
		e->name_loc = tok_loc(p, t);
		next(p);
		if (!expect(p, TK_LPAREN, "'(' after a type name (a cast is written float32(x))"))
			return NULL;
		if (!(e->args[0] = parse_exp(p)))
			return NULL;
		if (!expect(p, TK_RPAREN, "')'"))
			return NULL;
		break;
	case TK_MIN:
	case TK_MAX:
	case TK_IDENT:
		e = new_expr(p, TC_AST_IDENT, 0);
		if (!e)
			return NULL;
		e->name = tok_str(p, t);
		e->name_loc = tok_loc(p, t);
		next(p);
		if (accept(p, TK_LPAREN)) {
			e->kind = TC_AST_CALL;
			if (!parse_call_args(p, e))
				return NULL;
		} else if (t->kind != TK_IDENT) {
			syntax_error(p, "'(' after min/max");
			return NULL;
		}
		break;
	default:
		syntax_error(p, "an expression");
		return NULL;
	}
	e->loc = loc_from(p, start);
	return finish(p, e);
}

/* unary ::= ('-'|'!') unary | base */
static tc_expr *parse_unary(parser *p)
{
	int start = p->pos;
	tc_expr *e;
	tc_ast_op op;

	if (peek(p)->kind != TK_MINUS && peek(p)->kind != TK_BANG)
		return parse_base(p);
	op = peek(p)->kind == TK_MINUS ? TC_AOP_NEG : TC_AOP_NOT;
	next(p);
	if (++p->depth > TC_MAX_DEPTH) {
		if (!p->failed)
			tc_error(p->d, tok_loc(p, peek(p)),
				"expression nested too deeply (more than %d levels)",
				TC_MAX_DEPTH);
		p->failed = 1;
		return NULL;
	}
	e = new_expr(p, TC_AST_UNARY, 1);
	if (!e || !(e->args[0] = parse_unary(p)))
		return NULL;
	p->depth--;
	e->op = op;
	e->loc = loc_from(p, start);
	return finish(p, e);
}

/* Binary operator precedence levels, lowest first. */
static int binop_prec(tc_tok_kind k, tc_ast_op *op)
{
	switch (k) {
	case TK_OROR: *op = TC_AOP_OR; return 1;
	case TK_ANDAND: *op = TC_AOP_AND; return 2;
	case TK_LT: *op = TC_AOP_LT; return 3;
	case TK_GT: *op = TC_AOP_GT; return 3;
	case TK_LE: *op = TC_AOP_LE; return 3;
	case TK_GE: *op = TC_AOP_GE; return 3;
	case TK_EQEQ: *op = TC_AOP_EQ; return 3;
	case TK_NE: *op = TC_AOP_NE; return 3;
	case TK_PLUS: *op = TC_AOP_ADD; return 4;
	case TK_MINUS: *op = TC_AOP_SUB; return 4;
	case TK_STAR: *op = TC_AOP_MUL; return 5;
	case TK_SLASH: *op = TC_AOP_DIV; return 5;
	case TK_PERCENT: *op = TC_AOP_MOD; return 5;
	default: return 0;
	}
}

/* binary ::= unary {binop unary}, by precedence climbing (left associative) */
static tc_expr *parse_binary(parser *p, int min_prec)
{
	int start = p->pos;
	tc_expr *lhs = parse_unary(p);
	tc_ast_op op;
	int prec;

	while (lhs && (prec = binop_prec(peek(p)->kind, &op)) >= min_prec && prec) {
		tc_expr *e, *rhs;
		next(p);
		rhs = parse_binary(p, prec + 1);
		if (!rhs)
			return NULL;
		e = new_expr(p, TC_AST_BINARY, 2);
		if (!e)
			return NULL;
		e->op = op;
		e->args[0] = lhs;
		e->args[1] = rhs;
		e->loc = loc_from(p, start);
		lhs = finish(p, e);
	}
	return lhs;
}

/* exp ::= binary ['?' exp ':' exp]   (right associative, lowest) */
static tc_expr *parse_exp(parser *p)
{
	int start = p->pos;
	tc_expr *c, *e;

	if (++p->depth > TC_MAX_DEPTH) {
		if (!p->failed)
			tc_error(p->d, tok_loc(p, peek(p)),
				"expression nested too deeply (more than %d levels)",
				TC_MAX_DEPTH);
		p->failed = 1;
		return NULL;
	}
	c = parse_binary(p, 1);
	if (c && accept(p, TK_QUESTION)) {
		e = new_expr(p, TC_AST_TERNARY, 3);
		if (!e)
			return NULL;
		e->args[0] = c;
		if (!(e->args[1] = parse_exp(p)) ||
			!expect(p, TK_COLON, "':' of a conditional expression") ||
			!(e->args[2] = parse_exp(p)))
			return NULL;
		e->loc = loc_from(p, start);
		c = finish(p, e);
	}
	p->depth--;
	return c;
}

/* dim ::= IDENT | INT | exp (an extent expression of sizes, N - K + 1) */
static int parse_dims(parser *p, tc_decl *decl)
{
	tc_dim tmp[64];
	int n = 0;

	decl->has_shape = 1;
	if (!accept(p, TK_RPAREN)) {
		do {
			const tc_token *t = peek(p);
			if (n == 64) {
				syntax_error(p, "at most 64 dimensions");
				return -1;
			}
			const tc_token *after = p->pos + 1 < p->ntoks ? &p->toks[p->pos + 1] : t;
			tmp[n].expr = NULL;
			tmp[n].name = NULL;
			tmp[n].loc = tok_loc(p, t);
			if ((t->kind == TK_IDENT || t->kind == TK_INT) &&
				(after->kind == TK_COMMA || after->kind == TK_RPAREN)) {
				if (t->kind == TK_IDENT)
					tmp[n].name = tok_str(p, t);
				else
					tmp[n].value = t->ival;
				next(p);
			} else if (t->kind == TK_IDENT || t->kind == TK_INT || t->kind == TK_LPAREN ||
				t->kind == TK_MINUS || t->kind == TK_MIN || t->kind == TK_MAX) {
				if (!(tmp[n].expr = parse_exp(p)))
					return -1;
				tmp[n].loc = tmp[n].expr->loc;
			} else {
				syntax_error(p, "a size name, a constant extent or an extent expression");
				return -1;
			}
			n++;
		} while (accept(p, TK_COMMA));
		if (!expect(p, TK_RPAREN, "',' or ')'"))
			return -1;
	}
	decl->ndims = n;
	decl->dims = tc_arena_alloc(p->ar, (size_t)(n ? n : 1) * sizeof(tc_dim));
	if (!decl->dims)
		return -1;
	memcpy(decl->dims, tmp, (size_t)n * sizeof(tc_dim));
	return 0;
}

/* param ::= type IDENT;  ret ::= [type] IDENT;  type ::= scalar ['(' dims ')'] */
static int parse_decl(parser *p, tc_decl *decl, int is_ret)
{
	int start = p->pos;
	const tc_token *t = peek(p);

	if (t->kind == TK_TYPE) {
		decl->dtype = t->dtype;
		decl->type_loc = tok_loc(p, t);
		next(p);
		if (accept(p, TK_LPAREN) && parse_dims(p, decl) < 0)
			return -1;
	} else if (!is_ret) {
		syntax_error(p, t->kind == TK_IDENT
				? "a type before the parameter name (inputs must be typed, e.g. float(N) A)"
				: "a parameter type");
		return -1;
	}
	t = expect(p, TK_IDENT, is_ret ? "an output name" : "a parameter name");
	if (!t)
		return -1;
	decl->name = tok_str(p, t);
	decl->name_loc = tok_loc(p, t);
	decl->loc = loc_from(p, start);
	return 0;
}

static int parse_decl_list(parser *p, tc_decl **out, int *nout, int is_ret)
{
	tc_decl tmp[256];
	int n = 0;

	if (!expect(p, TK_LPAREN, "'('"))
		return -1;
	if (!accept(p, TK_RPAREN)) {
		do {
			if (n == 256) {
				syntax_error(p, "at most 256 parameters");
				return -1;
			}
			memset(&tmp[n], 0, sizeof(tmp[n]));
			if (parse_decl(p, &tmp[n], is_ret) < 0)
				return -1;
			n++;
		} while (accept(p, TK_COMMA));
		if (!expect(p, TK_RPAREN, "',' or ')'"))
			return -1;
	}
	*nout = n;
	*out = tc_arena_alloc(p->ar, (size_t)(n ? n : 1) * sizeof(tc_decl));
	if (!*out)
		return -1;
	memcpy(*out, tmp, (size_t)n * sizeof(tc_decl));
	return 0;
}

/* clause ::= IDENT 'in' exp ':' exp | IDENT '=' exp | 'exists' exp */
static int parse_clause(parser *p, tc_where *w)
{
	int start = p->pos;
	const tc_token *t = peek(p);

	if (accept(p, TK_EXISTS)) {
		w->kind = TC_WHERE_EXISTS;
		if (!(w->val = parse_exp(p)))
			return -1;
	} else if (t->kind == TK_IDENT) {
		w->name = tok_str(p, t);
		w->name_loc = tok_loc(p, t);
		next(p);
		if (accept(p, TK_IN)) {
			w->kind = TC_WHERE_RANGE;
			if (!(w->lo = parse_exp(p)) ||
				!expect(p, TK_COLON, "':' between the bounds of a range (i in lo:hi)") ||
				!(w->hi = parse_exp(p)))
				return -1;
		} else if (accept(p, TK_ASSIGN)) {
			w->kind = TC_WHERE_LET;
			if (!(w->val = parse_exp(p)))
				return -1;
		} else {
			syntax_error(p, "'in' or '=' in a where clause");
			return -1;
		}
	} else {
		syntax_error(p, "a where clause (i in lo:hi, x = exp or exists exp)");
		return -1;
	}
	w->loc = loc_from(p, start);
	return 0;
}

/* lhs_sub ::= IDENT | exp: an index name (*name, *sub NULL) when the
 * subscript is a lone name, else the expression (*name NULL, *sub set);
 * *loc is the subscript's.  -1 after a syntax error. */
static int parse_lhs_sub(parser *p, const char **name, tc_loc *loc, tc_expr **sub)
{
	tc_expr *e = parse_exp(p);
	if (!e)
		return -1;
	*loc = e->loc;
	if (e->kind == TC_AST_IDENT) {
		*name = e->name;
		*sub = NULL;
	} else {
		*name = NULL;
		*sub = e;
	}
	return 0;
}

static int stmt_op(tc_tok_kind k, tc_red *red, int *init)
{
	switch (k) {
	case TK_ASSIGN: *red = TC_RED_ASSIGN; *init = 0; return 1;
	case TK_PLUS_EQ: *red = TC_RED_ADD; *init = 0; return 1;
	case TK_STAR_EQ: *red = TC_RED_MUL; *init = 0; return 1;
	case TK_MIN_EQ: *red = TC_RED_MIN; *init = 0; return 1;
	case TK_MAX_EQ: *red = TC_RED_MAX; *init = 0; return 1;
	case TK_PLUS_EQ_B: *red = TC_RED_ADD; *init = 1; return 1;
	case TK_STAR_EQ_B: *red = TC_RED_MUL; *init = 1; return 1;
	case TK_MIN_EQ_B: *red = TC_RED_MIN; *init = 1; return 1;
	case TK_MAX_EQ_B: *red = TC_RED_MAX; *init = 1; return 1;
	default: return 0;
	}
}

/* stmt ::= IDENT ['(' [lhs_sub {',' lhs_sub}] ')'] op exp ['<=>' call]
 *          ['where' clause {',' clause}]
 * lhs_sub ::= IDENT | exp   (an index name, or a gather such as I(i): sema
 *                           checks that such an expression reads a tensor) */
static tc_stmt *parse_stmt(parser *p)
{
	int start = p->pos;
	tc_stmt *s = tc_arena_alloc(p->ar, sizeof(*s));
	const tc_token *t;
	const char *names[TC_MAX_RANK * 8];
	tc_loc locs[TC_MAX_RANK * 8];
	tc_expr *subs[TC_MAX_RANK * 8];
	tc_where wtmp[64];
	int n = 0, gathered = 0;

	if (!s)
		return NULL;
	t = expect(p, TK_IDENT, "a statement (a tensor name) or '}'");
	if (!t)
		return NULL;
	s->lhs = tok_str(p, t);
	s->lhs_loc = tok_loc(p, t);
	if (accept(p, TK_LPAREN) && !accept(p, TK_RPAREN)) {
		do {
			if (n == (int)(sizeof(names) / sizeof(names[0]))) {
				syntax_error(p, "fewer indices");
				return NULL;
			}
			if (parse_lhs_sub(p, &names[n], &locs[n], &subs[n]) < 0)
				return NULL;
			gathered |= subs[n++] != NULL;
		} while (accept(p, TK_COMMA));
		if (!expect(p, TK_RPAREN, "',' or ')'"))
			return NULL;
	}
	s->nidx = n;
	s->idx = tc_arena_alloc(p->ar, (size_t)(n ? n : 1) * sizeof(char *));
	s->idx_loc = tc_arena_alloc(p->ar, (size_t)(n ? n : 1) * sizeof(tc_loc));
	if (!s->idx || !s->idx_loc)
		return NULL;
	memcpy(s->idx, names, (size_t)n * sizeof(char *));
	memcpy(s->idx_loc, locs, (size_t)n * sizeof(tc_loc));
	if (gathered) {
		if (!(s->sub = tc_arena_alloc(p->ar, (size_t)n * sizeof(tc_expr *))))
			return NULL;
		memcpy(s->sub, subs, (size_t)n * sizeof(tc_expr *));
	}
	if (!stmt_op(peek(p)->kind, &s->red, &s->init)) {
		syntax_error(p, "an assignment operator (=, +=, +=!, *=!, min=!, max=!, ...)");
		return NULL;
	}
	s->op_loc = tok_loc(p, peek(p));
	next(p);
	if (!(s->rhs = parse_exp(p)))
		return NULL;
	if (accept(p, TK_EQUIV)) {
		int cstart = p->pos;
		t = expect(p, TK_IDENT, "a call after '<=>'");
		if (!t || !expect(p, TK_LPAREN, "'('"))
			return NULL;
		s->equiv = new_expr(p, TC_AST_CALL, 0);
		if (!s->equiv)
			return NULL;
		s->equiv->name = tok_str(p, t);
		s->equiv->name_loc = tok_loc(p, t);
		if (!parse_call_args(p, s->equiv))
			return NULL;
		s->equiv->loc = loc_from(p, cstart);
	}
	n = 0;
	if (accept(p, TK_WHERE)) {
		do {
			if (n == 64) {
				syntax_error(p, "at most 64 where clauses");
				return NULL;
			}
			memset(&wtmp[n], 0, sizeof(wtmp[n]));
			if (parse_clause(p, &wtmp[n]) < 0)
				return NULL;
			n++;
		} while (accept(p, TK_COMMA));
	}
	s->nwhere = n;
	s->where = tc_arena_alloc(p->ar, (size_t)(n ? n : 1) * sizeof(tc_where));
	if (!s->where)
		return NULL;
	memcpy(s->where, wtmp, (size_t)n * sizeof(tc_where));
	s->loc = loc_from(p, start);
	s->tensor = -1;
	return s;
}

/* def ::= 'def' IDENT '(' params ')' '->' '(' rets ')' '{' stmt* '}' */
static tc_def *parse_def(parser *p)
{
	int start = p->pos;
	tc_def *def = tc_arena_alloc(p->ar, sizeof(*def));
	const tc_token *t, *brace;
	tc_vec stmts = {0};

	if (!def)
		return NULL;
	if (!expect(p, TK_DEF, "'def'"))
		return NULL;
	t = expect(p, TK_IDENT, "the name of the def");
	if (!t)
		return NULL;
	def->name = tok_str(p, t);
	def->name_loc = tok_loc(p, t);
	if (parse_decl_list(p, &def->params, &def->nparams, 0) < 0)
		return NULL;
	if (!expect(p, TK_ARROW, "'->' after the parameters"))
		return NULL;
	if (parse_decl_list(p, &def->rets, &def->nrets, 1) < 0)
		return NULL;
	brace = peek(p);
	if (!expect(p, TK_LBRACE, "'{'"))
		return NULL;
	while (peek(p)->kind != TK_RBRACE) {
		tc_stmt *s;
		if (peek(p)->kind == TK_EOF || peek(p)->kind == TK_DEF) {
			syntax_error(p, "'}' to close the def");
			unclosed(p, brace);
			break;
		}
		s = parse_stmt(p);
		if (!s)
			break;
		if (tc_vec_push(&stmts, s) < 0) {
			p->d->oom = 1;
			break;
		}
	}
	if (!p->failed)
		next(p);
	def->nstmts = stmts.n;
	def->stmts = tc_arena_alloc(p->ar, (size_t)(stmts.n ? stmts.n : 1) * sizeof(tc_stmt *));
	if (def->stmts && stmts.n)
		memcpy(def->stmts, stmts.v, (size_t)stmts.n * sizeof(tc_stmt *));
	tc_vec_free(&stmts);
	if (!def->stmts)
		return NULL;
	def->loc = loc_from(p, start);
	return def;
}

/* Whether one of the first nlex diagnostics (the lexer's) lies in [a, b). */
static int lex_error_in(const tc_diags *d, int nlex, int a, int b)
{
	int i;
	for (i = 0; i < nlex && i < d->n; i++)
		if (d->v[i].sev == TC_SEV_ERROR && d->v[i].loc.off >= a && d->v[i].loc.off < b)
			return 1;
	return 0;
}

tc_program *tc_parse(__tc_keep tc_arena *ar, __tc_keep const tc_source *src, __tc_keep tc_diags *d)
{
	parser p;
	int nlex;
	tc_program *prog = tc_arena_alloc(ar, sizeof(*prog));
	tc_vec defs = {0};

	if (!prog)
		return NULL;
	memset(&p, 0, sizeof(p));
	p.src = src;
	p.d = d;
	p.ar = ar;
	p.toks = tc_lex(src, d, &p.ntoks);
	if (!p.toks)
		return NULL;
	nlex = p.nlex = d->n;
	prog->src = src;
	prog->arena = ar;
	while (peek(&p)->kind != TK_EOF) {
		tc_def *def;
		p.failed = 0;
		p.depth = 0;
		if (peek(&p)->kind != TK_DEF) {
			syntax_error(&p, "'def'");
		} else {
			int start = p.def_start = peek(&p)->off;
			def = parse_def(&p);
			/* a def with a lexical error is dropped like one with a syntax error */
			if (def && !p.failed && !lex_error_in(d, nlex, start, peek(&p)->off) &&
				tc_vec_push(&defs, def) < 0) {
				d->oom = 1;
				break;
			}
			if (!def && tc_arena_failed(ar))
				break;
		}
		if (p.failed) { /* recover: skip to the next def */
			if (peek(&p)->kind != TK_DEF)
				next(&p);
			while (peek(&p)->kind != TK_EOF && peek(&p)->kind != TK_DEF)
				next(&p);
		}
	}
	prog->ndefs = defs.n;
	prog->defs = tc_arena_alloc(ar, (size_t)(defs.n ? defs.n : 1) * sizeof(tc_def *));
	if (prog->defs && defs.n)
		memcpy(prog->defs, defs.v, (size_t)defs.n * sizeof(tc_def *));
	tc_vec_free(&defs);
	tc_free(p.toks);
	if (!prog->defs || tc_arena_failed(ar) || d->oom)
		return NULL; /* out of memory: the program may be incomplete */
	return prog;
}

tc_def *tc_program_find(__tc_keep const tc_program *p, const char *name)
{
	int i;
	for (i = 0; i < p->ndefs; i++)
		if (!strcmp(p->defs[i]->name, name))
			return p->defs[i];
	return NULL;
}

const char *tc_red_name(tc_red red, int init)
{
	static const char *const names[][2] = {
		{"=", "=!"}, {"+=", "+=!"}, {"*=", "*=!"}, {"min=", "min=!"},
		{"max=", "max=!"},
	};
	return names[red][init ? 1 : 0];
}

const char *tc_ast_op_name(tc_ast_op op)
{
	static const char *const names[] = {"+", "-", "*", "/", "%", "<", ">",
		"<=", ">=", "==", "!=", "&&", "||", "-", "!"};
	return names[op];
}
