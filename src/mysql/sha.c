/*
 * sha.c - SHA-1 and SHA-256 (FIPS 180-4), for MySQL's login scrambles
 * (see wire.c).  Ours, small and slow enough: a login hashes a few dozen
 * bytes, and a library for it (OpenSSL's libcrypto) would cost every run
 * more to load than all the hashing it ever does.
 */
#include "config.h"

#include <string.h>

#include "mysql/sha.h"

static uint32_t rol(uint32_t x, int n)
{
	return x << n | x >> (32 - n);
}

static uint32_t ror(uint32_t x, int n)
{
	return x >> n | x << (32 - n);
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
	uint32_t w[80], a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
	int i;

	for (i = 0; i < 16; i++)
		w[i] = be32(b + 4 * i);
	for (i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (i = 0; i < 80; i++) {
		uint32_t f, k, t;

		if (i < 20)
			f = (bb & c) | (~bb & d), k = 0x5a827999;
		else if (i < 40)
			f = bb ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (bb & c) | (bb & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = bb ^ c ^ d, k = 0xca62c1d6;
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(bb, 30);
		bb = a;
		a = t;
	}
	h[0] += a;
	h[1] += bb;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

static const uint32_t k256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static void sha256_block(uint32_t h[8], const unsigned char *b)
{
	uint32_t w[64], v[8];
	int i;

	for (i = 0; i < 16; i++)
		w[i] = be32(b + 4 * i);
	for (i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^
			      w[i - 15] >> 3;
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^
			      w[i - 2] >> 10;

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(v, h, sizeof(v));
	for (i = 0; i < 64; i++) {
		uint32_t s1 = ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25);
		uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
		uint32_t t1 = v[7] + s1 + ch + k256[i] + w[i];
		uint32_t s0 = ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22);
		uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);

		memmove(v + 1, v, 7 * sizeof(*v));
		v[4] += t1;
		v[0] = t1 + s0 + maj;
	}
	for (i = 0; i < 8; i++)
		h[i] += v[i];
}

/* Both hashes pad alike: 0x80, zeros, the length in bits (big-endian) in
 * the last 8 bytes of the last 64-byte block. */
static void run(uint32_t *h, int words,
		void (*block)(uint32_t *, const unsigned char *),
		const void *data, size_t len, unsigned char *out)
{
	const unsigned char *p = data;
	unsigned char last[128];
	size_t rest, tail;
	uint64_t bits = (uint64_t)len * 8;
	int i;

	for (; len >= 64; p += 64, len -= 64)
		block(h, p);
	memset(last, 0, sizeof(last));
	memcpy(last, p, len);
	last[len] = 0x80;
	tail = len + 9 > 64 ? 128 : 64;
	for (i = 0; i < 8; i++)
		last[tail - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (rest = 0; rest < tail; rest += 64)
		block(h, last + rest);
	for (i = 0; i < words; i++)
		put_be32(out + 4 * i, h[i]);
}

void my_sha1(const void *data, size_t len, unsigned char out[MY_SHA1_LEN])
{
	uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476,
			  0xc3d2e1f0 };

	run(h, 5, sha1_block, data, len, out);
}

void my_sha256(const void *data, size_t len,
	       unsigned char out[MY_SHA256_LEN])
{
	uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

	run(h, 8, sha256_block, data, len, out);
}
