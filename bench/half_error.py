#!/usr/bin/env python3
"""Error of a float16 / bfloat16 matmul against a float64 reference.

    python3 bench/half_error.py build/tcomp [--dtype float16|bfloat16] [--target cpu|interp] K...

For each K: C(m,n) +=! A(m,k) * B(k,n) with M = N = 64, inputs uniform in
[-1, 1) rounded to the dtype (so the reference sees exactly the kernel's
inputs), run with `tcomp run`; prints the largest absolute and relative
(to max |C|) error of C against the exact float64 product.  Pure Python
(no NumPy): .npy files are written and read with struct.
"""
import os, random, struct, subprocess, sys, tempfile

from compare import write_npy


def bf16_bits(x):
    b = struct.unpack('<I', struct.pack('<f', x))[0]  # x is float32-exact here
    return ((b + 0x7fff + ((b >> 16) & 1)) >> 16) & 0xffff


def bf16_val(h):
    return struct.unpack('<f', struct.pack('<I', h << 16))[0]


def read_npy(path):
    with open(path, 'rb') as f:
        d = f.read()
    n = struct.unpack('<H', d[8:10])[0]
    hdr = d[10:10 + n].decode()
    return hdr, d[10 + n:]


def main():
    args = sys.argv[1:]
    tcomp = args.pop(0)
    dtype, target = 'float16', 'cpu'
    while args and args[0].startswith('--'):
        o = args.pop(0)
        if o == '--dtype':
            dtype = args.pop(0)
        elif o == '--target':
            target = args.pop(0)
    M = N = 64
    rng = random.Random(1)
    tmp = tempfile.mkdtemp()
    tc = os.path.join(tmp, 'mm.tc')
    with open(tc, 'w') as f:
        f.write('def mm(%s(M,K) A, %s(K,N) B) -> (C) {\n    C(m,n) +=! A(m,k) * B(k,n)\n}\n'
                % (dtype, dtype))
    for K in [int(k) for k in args]:
        def gen(n):
            vals, raw = [], b''
            for _ in range(n):
                x = rng.uniform(-1, 1)
                if dtype == 'float16':
                    raw += struct.pack('<e', x)
                    vals.append(struct.unpack('<e', raw[-2:])[0])
                else:
                    h = bf16_bits(struct.unpack('<f', struct.pack('<f', x))[0])
                    raw += struct.pack('<H', h)
                    vals.append(bf16_val(h))
            return vals, raw
        descr = '<f2' if dtype == 'float16' else '<V2'
        a, ra = gen(M * K)
        b, rb = gen(K * N)
        write_npy(os.path.join(tmp, 'a.npy'), descr, (M, K), ra)
        write_npy(os.path.join(tmp, 'b.npy'), descr, (K, N), rb)
        out = os.path.join(tmp, 'c.npy')
        subprocess.run([tcomp, 'run', tc, '--in', 'A=' + os.path.join(tmp, 'a.npy'),
                        '--in', 'B=' + os.path.join(tmp, 'b.npy'), '--out', 'C=' + out,
                        '--target', target, '--no-cache'], check=True,
                       stdout=subprocess.DEVNULL)
        _, raw = read_npy(out)
        got = [struct.unpack('<e', raw[2 * i:2 * i + 2])[0] if dtype == 'float16'
               else bf16_val(struct.unpack('<H', raw[2 * i:2 * i + 2])[0])
               for i in range(M * N)]
        err = big = 0.0
        for m in range(M):
            for n in range(N):
                ref = sum(a[m * K + k] * b[k * N + n] for k in range(K))
                err = max(err, abs(got[m * N + n] - ref))
                big = max(big, abs(ref))
        print('%s K=%d target=%s: max abs error %.3g, max |C| %.3g, relative %.3g'
              % (dtype, K, target, err, big, err / big))


main()
