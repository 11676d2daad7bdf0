/* The lexer: .tc text to tokens (docs/language.md, "Lexical").
 *
 * Ownership: the token array is the caller's (tc_free); tokens hold offsets
 * into the source, not pointers, so they do not depend on it. */
#ifndef TC_LEX_H
#define TC_LEX_H

#include "diag.h"
#include "types.h"

/* Kinds of tokens. */
typedef enum tc_tok_kind {
	TK_EOF,
	TK_IDENT,
	TK_INT,   /* decimal integer literal (int32) */
	TK_FLOAT, /* literal with '.' or an exponent (float32) */
	TK_TYPE,  /* a scalar type name: dtype */
	/* keywords */
	TK_DEF, TK_WHERE, TK_IN, TK_EXISTS, TK_MIN, TK_MAX,
	/* multi-character operators */
	TK_ARROW,      /* -> */
	TK_EQUIV,      /* <=> */
	TK_PLUS_EQ,    /* += */
	TK_STAR_EQ,    /* *= */
	TK_MIN_EQ,     /* min= */
	TK_MAX_EQ,     /* max= */
	TK_PLUS_EQ_B,  /* +=! */
	TK_STAR_EQ_B,  /* *=! */
	TK_MIN_EQ_B,   /* min=! */
	TK_MAX_EQ_B,   /* max=! */
	TK_GE, TK_LE, TK_EQEQ, TK_NE, TK_ANDAND, TK_OROR,
	/* single characters */
	TK_PLUS, TK_MINUS, TK_STAR, TK_SLASH, TK_PERCENT, TK_LPAREN, TK_RPAREN,
	TK_COMMA, TK_ASSIGN, TK_LBRACE, TK_RBRACE, TK_GT, TK_LT, TK_BANG,
	TK_QUESTION, TK_COLON, TK_LBRACKET, TK_RBRACKET,
} tc_tok_kind;

/* A token: its kind, where it is in the source text, and its value. */
typedef struct tc_token {
	tc_tok_kind kind;
	int off, len;
	tc_dtype dtype; /* TK_TYPE */
	int64_t ival;   /* TK_INT */
	double fval;    /* TK_FLOAT */
} tc_token;

/* Split src into tokens (ending with TK_EOF), an array the caller frees
 * with tc_free.  Lexical errors go to d and the offending characters are
 * skipped.  *ntoks receives the count.  NULL only when out of memory. */
__tc_give tc_token *tc_lex(__tc_keep const tc_source *src, __tc_keep tc_diags *d,
	int *ntoks);
/* Spelling of a token kind for messages: "'+=!'", "identifier", ...
 * (static). */
const char *tc_tok_kind_name(tc_tok_kind k);

#endif
