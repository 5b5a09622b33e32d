/*
 * sha.h - SHA-1 and SHA-256 of a buffer, for the MySQL store's login.
 */
#ifndef LEASERUN_MYSQL_SHA_H
#define LEASERUN_MYSQL_SHA_H

#include <stddef.h>
#include <stdint.h>

#define MY_SHA1_LEN 20
#define MY_SHA256_LEN 32

void my_sha1(const void *data, size_t len, unsigned char out[MY_SHA1_LEN]);
void my_sha256(const void *data, size_t len,
	       unsigned char out[MY_SHA256_LEN]);

#endif
