/* Element types, promotion and builtins. */
#include "types.h"

#include <string.h>

static const struct {
	const char *name;
	int bits;
} dtype_info[TC_T_COUNT] = {
	[TC_T_NONE] = {"?", 0},
	[TC_T_BOOL] = {"bool", 8},
	[TC_T_I8] = {"int8", 8},
	[TC_T_I16] = {"int16", 16},
	[TC_T_I32] = {"int32", 32},
	[TC_T_I64] = {"int64", 64},
	[TC_T_U8] = {"uint8", 8},
	[TC_T_U16] = {"uint16", 16},
	[TC_T_U32] = {"uint32", 32},
	[TC_T_U64] = {"uint64", 64},
	[TC_T_F16] = {"float16", 16},
	[TC_T_F32] = {"float32", 32},
	[TC_T_F64] = {"float64", 64},
	[TC_T_BF16] = {"bfloat16", 16},
};

const char *tc_dtype_name(tc_dtype t)
{
	return t >= 0 && t < TC_T_COUNT ? dtype_info[t].name : "?";
}

tc_dtype tc_dtype_from_name(const char *s, int len)
{
	int t;
	if (len == 5 && !strncmp(s, "float", 5))
		return TC_T_F32;
	if (len == 6 && !strncmp(s, "double", 6))
		return TC_T_F64;
	for (t = TC_T_BOOL; t < TC_T_COUNT; t++)
		if ((int)strlen(dtype_info[t].name) == len &&
			!strncmp(s, dtype_info[t].name, (size_t)len))
			return (tc_dtype)t;
	return TC_T_NONE;
}

int tc_dtype_bits(tc_dtype t)
{
	return dtype_info[t].bits;
}

int tc_dtype_size(tc_dtype t)
{
	return dtype_info[t].bits / 8;
}

int tc_dtype_is_float(tc_dtype t)
{
	return t == TC_T_F16 || t == TC_T_BF16 || t == TC_T_F32 || t == TC_T_F64;
}

int tc_dtype_is_half(tc_dtype t)
{
	return t == TC_T_F16 || t == TC_T_BF16;
}

int tc_dtype_is_signed(tc_dtype t)
{
	return t >= TC_T_I8 && t <= TC_T_I64;
}

int tc_dtype_is_unsigned(tc_dtype t)
{
	return t >= TC_T_U8 && t <= TC_T_U64;
}

int tc_dtype_is_int(tc_dtype t)
{
	return tc_dtype_is_signed(t) || tc_dtype_is_unsigned(t);
}

static tc_dtype signed_of_bits(int bits)
{
	return bits <= 8 ? TC_T_I8 : bits <= 16 ? TC_T_I16 : bits <= 32 ? TC_T_I32
								  : TC_T_I64;
}

/* Promotion (docs/language.md, "Types"):
 * - a weak (literal) operand takes the other operand's type when that is in
 *   the same family or wider (an integer literal with any numeric type, a
 *   float literal with any float type);
 * - int (or bool) with float gives the float; floats widen; float16 with
 *   bfloat16 gives float32, the narrowest type holding both exactly;
 * - unsigned with unsigned gives the wider; signed with any integer gives a
 *   signed integer of the wider width; bool with an integer gives the integer;
 *   bool with bool stays bool (arithmetic callers turn that into int32). */
tc_dtype tc_dtype_promote(tc_dtype a, int a_weak, tc_dtype b, int b_weak)
{
	if (a == TC_T_NONE || b == TC_T_NONE)
		return TC_T_NONE;
	if (a_weak && !b_weak) {
		if (tc_dtype_is_int(a) && b != TC_T_BOOL)
			return b;
		if (tc_dtype_is_float(a) && tc_dtype_is_float(b))
			return b;
	}
	if (b_weak && !a_weak)
		return tc_dtype_promote(b, 1, a, 0);
	if (a == b)
		return a;
	if (tc_dtype_is_float(a) || tc_dtype_is_float(b)) {
		if (!tc_dtype_is_float(a))
			return b;
		if (!tc_dtype_is_float(b))
			return a;
		if (tc_dtype_is_half(a) && tc_dtype_is_half(b))
			return TC_T_F32; /* float16 with bfloat16 (a != b) */
		return tc_dtype_bits(a) > tc_dtype_bits(b) ? a : b;
	}
	if (a == TC_T_BOOL)
		return b;
	if (b == TC_T_BOOL)
		return a;
	if (tc_dtype_is_unsigned(a) && tc_dtype_is_unsigned(b))
		return a > b ? a : b;
	return signed_of_bits(tc_dtype_bits(a) > tc_dtype_bits(b) ? tc_dtype_bits(a)
								 : tc_dtype_bits(b));
}

/* Implicit stores must not lose information beyond C's int-to-float
 * rounding: bool to anything; integers into integers that hold all their
 * values; any integer into any float; floats into strictly wider floats
 * (float16 and bfloat16 each hold values the other does not).
 * Untyped literals are checked for range where they are settled. */
int tc_dtype_implicit_ok(tc_dtype from, int from_weak, tc_dtype to)
{
	if (from == to || from == TC_T_BOOL)
		return 1;
	if (to == TC_T_BOOL)
		return 0;
	if (from_weak)
		return tc_dtype_promote(from, 1, to, 0) == to;
	if (tc_dtype_is_float(to))
		return !tc_dtype_is_float(from) || tc_dtype_bits(from) < tc_dtype_bits(to);
	if (tc_dtype_is_float(from))
		return 0;
	if (tc_dtype_is_unsigned(to))
		return tc_dtype_is_unsigned(from) && tc_dtype_bits(from) <= tc_dtype_bits(to);
	/* signed target */
	return tc_dtype_is_signed(from) ? tc_dtype_bits(from) <= tc_dtype_bits(to)
					 : tc_dtype_bits(from) < tc_dtype_bits(to);
}

const tc_builtin tc_builtins[] = {
#define TC_BI_ROW(id, name, arity, kind) {#name, arity, kind},
	TC_BUILTINS(TC_BI_ROW)
#undef TC_BI_ROW
};
const int tc_nbuiltins = TC_BI_COUNT;

int tc_builtin_lookup(const char *name, int len)
{
	int i;
	for (i = 0; i < tc_nbuiltins; i++)
		if ((int)strlen(tc_builtins[i].name) == len &&
			!strncmp(tc_builtins[i].name, name, (size_t)len))
			return i;
	return -1;
}

int tc_builtin_is_pad(const char *name, int len)
{
	return len == (int)strlen(TC_PAD_NAME) && !strncmp(name, TC_PAD_NAME, (size_t)len);
}

int tc_builtin_reserved(const char *name, int len)
{
	return tc_builtin_lookup(name, len) >= 0 || tc_builtin_is_pad(name, len);
}
