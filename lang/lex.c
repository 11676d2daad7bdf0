/* The lexer.  Longest match on operators ("+=!b" is "+=!" "b"); numbers are
 * decimal only; "min=" and "max=" are operator tokens when the '=' follows
 * the keyword immediately. */
#include "lex.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
	[TK_EOF] = "end of file", [TK_IDENT] = "identifier",
	[TK_INT] = "integer", [TK_FLOAT] = "number", [TK_TYPE] = "type name",
	[TK_DEF] = "'def'", [TK_WHERE] = "'where'", [TK_IN] = "'in'",
	[TK_EXISTS] = "'exists'", [TK_MIN] = "'min'", [TK_MAX] = "'max'",
	[TK_ARROW] = "'->'", [TK_EQUIV] = "'<=>'", [TK_PLUS_EQ] = "'+='",
	[TK_STAR_EQ] = "'*='", [TK_MIN_EQ] = "'min='", [TK_MAX_EQ] = "'max='",
	[TK_PLUS_EQ_B] = "'+=!'", [TK_STAR_EQ_B] = "'*=!'",
	[TK_MIN_EQ_B] = "'min=!'", [TK_MAX_EQ_B] = "'max=!'", [TK_GE] = "'>='",
	[TK_LE] = "'<='", [TK_EQEQ] = "'=='", [TK_NE] = "'!='",
	[TK_ANDAND] = "'&&'", [TK_OROR] = "'||'", [TK_PLUS] = "'+'",
	[TK_MINUS] = "'-'", [TK_STAR] = "'*'", [TK_SLASH] = "'/'",
	[TK_PERCENT] = "'%'", [TK_LPAREN] = "'('", [TK_RPAREN] = "')'",
	[TK_COMMA] = "','", [TK_ASSIGN] = "'='", [TK_LBRACE] = "'{'",
	[TK_RBRACE] = "'}'", [TK_GT] = "'>'", [TK_LT] = "'<'", [TK_BANG] = "'!'",
	[TK_QUESTION] = "'?'", [TK_COLON] = "':'", [TK_LBRACKET] = "'['",
	[TK_RBRACKET] = "']'",
};

const char *tc_tok_kind_name(tc_tok_kind k)
{
	return kind_names[k];
}

/* Operators, longest first so the first match is the longest. */
static const struct {
	const char *s;
	tc_tok_kind k;
} ops[] = {
	{"min=!", TK_MIN_EQ_B}, {"max=!", TK_MAX_EQ_B}, {"min=", TK_MIN_EQ},
	{"max=", TK_MAX_EQ}, {"<=>", TK_EQUIV}, {"+=!", TK_PLUS_EQ_B},
	{"*=!", TK_STAR_EQ_B}, {"->", TK_ARROW}, {"+=", TK_PLUS_EQ},
	{"*=", TK_STAR_EQ}, {">=", TK_GE}, {"<=", TK_LE}, {"==", TK_EQEQ},
	{"!=", TK_NE}, {"&&", TK_ANDAND}, {"||", TK_OROR}, {"+", TK_PLUS},
	{"-", TK_MINUS}, {"*", TK_STAR}, {"/", TK_SLASH}, {"%", TK_PERCENT},
	{"(", TK_LPAREN}, {")", TK_RPAREN}, {",", TK_COMMA}, {"=", TK_ASSIGN},
	{"{", TK_LBRACE}, {"}", TK_RBRACE}, {">", TK_GT}, {"<", TK_LT},
	{"!", TK_BANG}, {"?", TK_QUESTION}, {":", TK_COLON}, {"[", TK_LBRACKET},
	{"]", TK_RBRACKET},
};

static const struct {
	const char *s;
	tc_tok_kind k;
} keywords[] = {
	{"def", TK_DEF}, {"where", TK_WHERE}, {"in", TK_IN},
	{"exists", TK_EXISTS}, {"min", TK_MIN}, {"max", TK_MAX},
};

static int is_ident_start(int c)
{
	return isalpha(c) || c == '_';
}

static int is_ident_char(int c)
{
	return isalnum(c) || c == '_';
}

/* number ::= (digits ['.' digits*] | '.' digits) [('e'|'E') ['+'|'-'] digits]
 * Returns the length; fills t.  A malformed number is reported and becomes
 * the number 0, so the parser sees a well-formed token. */
static int lex_number(const tc_source *src, tc_diags *d, int off, tc_token *t)
{
	const char *s = src->text;
	int i = off, is_float = 0;
	char buf[128];

	t->off = off;
	if (s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
		i += 2;
		while (isalnum((unsigned char)s[i]))
			i++;
		tc_error(d, tc_source_loc(src, off, i - off),
			"hexadecimal literals are not supported; write the number in decimal");
		goto bad;
	}
	while (isdigit((unsigned char)s[i]))
		i++;
	if (s[i] == '.') {
		is_float = 1;
		i++;
		while (isdigit((unsigned char)s[i]))
			i++;
	}
	if (s[i] == 'e' || s[i] == 'E') {
		int j = i + 1;
		if (s[j] == '+' || s[j] == '-')
			j++;
		if (!isdigit((unsigned char)s[j])) {
			i = j;
			tc_error(d, tc_source_loc(src, off, i - off),
				"expected digits in the exponent of a number");
			goto bad;
		}
		is_float = 1;
		i = j;
		while (isdigit((unsigned char)s[i]))
			i++;
	}
	if (is_ident_char((unsigned char)s[i]) || s[i] == '.') {
		int dot = s[i] == '.';
		while (is_ident_char((unsigned char)s[i]) || s[i] == '.')
			i++;
		if (dot)
			tc_error(d, tc_source_loc(src, off, i - off), "malformed number '%.*s'",
				i - off, s + off);
		else
			tc_error(d, tc_source_loc(src, off, i - off),
				"invalid number '%.*s': numbers have no suffixes (write 1.5, not 1.5f)",
				i - off, s + off);
		goto bad;
	}
	if (i - off >= (int)sizeof(buf)) {
		tc_error(d, tc_source_loc(src, off, i - off), "number too long");
		goto bad;
	}
	memcpy(buf, s + off, (size_t)(i - off));
	buf[i - off] = 0;
	t->len = i - off;
	if (is_float) {
		t->kind = TK_FLOAT;
		errno = 0;
		t->fval = strtod(buf, NULL);
		if (errno == ERANGE && isinf(t->fval)) { /* underflow to a subnormal is fine */
			tc_error(d, tc_source_loc(src, off, i - off),
				"number %s is too large for float64", buf);
			t->fval = 0;
		}
	} else {
		t->kind = TK_INT;
		errno = 0;
		t->ival = strtoll(buf, NULL, 10);
		if (errno) {
			tc_error(d, tc_source_loc(src, off, i - off),
				"integer %s is too large (at most 9223372036854775807)", buf);
			t->ival = 0;
		}
	}
	return i - off;
bad:
	/* keep a placeholder number so that parsing goes on without follow-on errors */
	t->kind = is_float ? TK_FLOAT : TK_INT;
	t->len = i - off;
	t->ival = 0;
	t->fval = 0;
	return i - off;
}

__tc_give tc_token *tc_lex(__tc_keep const tc_source *src, __tc_keep tc_diags *d, int *ntoks)
{
	const char *s = src->text;
	int n = 0, cap = 64, i = 0, size = (int)src->size;
	tc_token *toks = tc_malloc((size_t)cap * sizeof(*toks));

	if (!toks)
		return NULL;
	for (;;) {
		tc_token t;
		int c;
		size_t k;

		while (i < size && (isspace((unsigned char)s[i]) || s[i] == '#')) {
			if (s[i] == '#')
				while (i < size && s[i] != '\n')
					i++;
			else
				i++;
		}
		memset(&t, 0, sizeof(t));
		t.off = i;
		if (n == cap) {
			tc_token *nt = tc_realloc(toks, (size_t)cap * 2 * sizeof(*toks));
			if (!nt) {
				tc_free(toks);
				return NULL;
			}
			toks = nt;
			cap *= 2;
		}
		if (i >= size) {
			t.kind = TK_EOF;
			toks[n++] = t;
			break;
		}
		c = (unsigned char)s[i];
		if (is_ident_start(c)) {
			int j = i;
			while (j < size && is_ident_char((unsigned char)s[j]))
				j++;
			t.kind = TK_IDENT;
			t.len = j - i;
			for (k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++)
				if ((int)strlen(keywords[k].s) == t.len &&
					!strncmp(s + i, keywords[k].s, (size_t)t.len))
					t.kind = keywords[k].k;
			if (t.kind == TK_IDENT) {
				t.dtype = tc_dtype_from_name(s + i, t.len);
				if (t.dtype != TC_T_NONE)
					t.kind = TK_TYPE;
			}
			/* min= / max= (and with !) when '=' follows at once; not "min==" */
			if ((t.kind == TK_MIN || t.kind == TK_MAX) && s[j] == '=' &&
				s[j + 1] != '=') {
				int bang = s[j + 1] == '!';
				t.kind = t.kind == TK_MIN ? (bang ? TK_MIN_EQ_B : TK_MIN_EQ)
							  : (bang ? TK_MAX_EQ_B : TK_MAX_EQ);
				t.len += 1 + bang;
			}
			i += t.len;
			toks[n++] = t;
			continue;
		}
		/* a leading dot starts a number, as in TC (whose lexer reads numbers
		 * with strtod): .5 is 0.5 */
		if (isdigit(c) || (c == '.' && i + 1 < size && isdigit((unsigned char)s[i + 1]))) {
			i += lex_number(src, d, i, &t);
			toks[n++] = t;
			continue;
		}
		for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
			size_t l = strlen(ops[k].s);
			if (!strncmp(s + i, ops[k].s, l)) {
				t.kind = ops[k].k;
				t.len = (int)l;
				break;
			}
		}
		if (k < sizeof(ops) / sizeof(ops[0])) {
			i += t.len;
			toks[n++] = t;
			continue;
		}
		if (c == ';')
			tc_error(d, tc_source_loc(src, i, 1),
				"unexpected ';': statements have no terminator");
		else if (c >= 32 && c < 127)
			tc_error(d, tc_source_loc(src, i, 1),
				"unexpected character '%c'", c);
		else if (c >= 0x80) { /* one error per UTF-8 character */
			int j = i + 1;
			while (j < size && ((unsigned char)s[j] & 0xC0) == 0x80)
				j++;
			if (j - i == 1) /* not UTF-8: show the byte */
				tc_error(d, tc_source_loc(src, i, 1),
					"unexpected byte 0x%02x (tc source is ASCII)", c);
			else
				tc_error(d, tc_source_loc(src, i, j - i),
					"unexpected non-ASCII character '%.*s' (tc source is ASCII)", j - i,
					s + i);
			i = j;
			continue;
		} else
			tc_error(d, tc_source_loc(src, i, 1),
				"unexpected control character 0x%02x", c);
		i++;
	}
	*ntoks = n;
	return toks;
}
