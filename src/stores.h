/*
 * stores.h - the core's side of the store contract (store/store.h): the
 * loader that finds the store for a URL scheme (stores.c), and the helpers
 * that only the core calls (store-util.c).  A store does not include it.
 */
#ifndef LEASERUN_STORES_H
#define LEASERUN_STORES_H

#include <stddef.h>

#include "store/store.h"

/* stores.c: find the store for a URL scheme, loading its module if
 * needed.  Returns NULL and fills err when there is none. */
const struct lr_store_ops *lr_store_find(const char *scheme,
					 struct lr_err *err);
/* What --version says of a store: its name ("file" or its module's), the
 * package that installs it, whether its module file is there (always for
 * the built-in store), NULL or why it cannot be loaded, and NULL or what
 * else it needs for some of its schemes ("etcds:// with etcd-tls.so:
 * available").  The strings live until fn returns. */
struct lr_store_avail {
	const char *name;
	const char *package;
	int installed;
	const char *error;
	const char *note;
};
/* Calls fn once per store a user can have (no test-only one), in the
 * order of the scheme table. */
void lr_store_each(void (*fn)(const struct lr_store_avail *a, void *ctx),
		   void *ctx);

/* "OK", "BUSY", ... for a status no error message explains. */
const char *lr_status_name(enum lr_status s);
/* The first holder of info (in slot order), and of several, how many
 * more: "web1 pid 12 and 2 more"; "" when nobody is known. */
void lr_holders_who(const struct lr_info *info, char *buf, size_t len);
/* Fills fds with the fds >= 3 open now (sorted); returns their count, at
 * most max: max itself means the list may be cut short.  Without /proc,
 * asks fcntl() about each fd below RLIMIT_NOFILE (at most 65536). */
size_t lr_open_fds(int *fds, size_t max);

#endif
