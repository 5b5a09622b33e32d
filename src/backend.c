/*
 * backend.c - the table of stores and the module loader.
 *
 * The file store is built in.  Every network store lives in a module,
 * PKGLIBDIR/NAME.so, loaded with dlopen() only when a URL names one of its
 * schemes, so that a run on the file store maps no client library at all.
 * LEASERUN_MODULE_DIR overrides the directory (the test suite points it at
 * the build tree).  A module whose LR_STORE_ABI differs is refused.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "be-file.h"
#include "tls.h" /* LR_TLS_MODULE */

static const struct {
	const char *scheme;
	const char *module; /* NULL: built in */
	const char *with;   /* configure switch */
	const char *helper; /* a module the store loads for this scheme */
} schemes[] = {
	{ "file", NULL, NULL, NULL },
	{ "redis", "redis", "redis", NULL },
	{ "redis+unix", "redis", "redis", NULL },
	{ "postgres", "pg", "pg", NULL },
	{ "postgresql", "pg", "pg", NULL },
	{ "etcd", "etcd", "etcd", NULL },
	{ "etcds", "etcd", "etcd", LR_TLS_MODULE },
	{ "zk", "zk", "zk", NULL },
	{ "fault", "fault", NULL, NULL }, /* test-only, never installed */
};
#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

static const char *module_dir(void)
{
	const char *d = secure_getenv("LEASERUN_MODULE_DIR");

	return d && *d ? d : PKGLIBDIR;
}

/* Loads module name; returns its ops or NULL with err filled. */
static const struct lr_store_ops *load(const char *name, const char *with,
				       struct lr_err *err)
{
	const struct lr_store_ops *ops;
	char path[4096];
	void *h;

	snprintf(path, sizeof(path), "%s/%s.so", module_dir(), name);
	if (access(path, F_OK) != 0) {
		if (with)
			lr_err_set(err,
				   "this leaserun has no %s store: install it "
				   "or build with --with-%s",
				   name, with);
		else
			lr_err_set(err, "this leaserun has no %s store", name);
		return NULL;
	}
	/* RTLD_NODELETE: the store's code must outlive any atexit hook its
	 * libraries registered. */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		lr_err_set(err, "cannot load the %s store: %s", name,
			   dlerror());
		return NULL;
	}
	ops = dlsym(h, LR_STORE_SYMBOL);
	if (!ops) {
		lr_err_set(err, "cannot load the %s store: %s is not a "
				"leaserun store module",
			   name, path);
		return NULL;
	}
	if (ops->abi != LR_STORE_ABI) {
		lr_err_set(err, "cannot load the %s store: %s was built for "
				"another leaserun (interface %u, need %u)",
			   name, path, ops->abi, LR_STORE_ABI);
		return NULL;
	}
	return ops;
}

const struct lr_store_ops *lr_store_find(const char *scheme,
					 struct lr_err *err)
{
	size_t i;

	for (i = 0; i < NSCHEMES; i++) {
		if (strcmp(schemes[i].scheme, scheme) != 0)
			continue;
		if (!schemes[i].module)
			return &lr_file_ops;
		return load(schemes[i].module, schemes[i].with, err);
	}
	lr_err_set(err, "unknown store '%s' (known: file, redis, redis+unix, "
			"postgres, postgresql, etcd, etcds, zk)",
		   scheme);
	return NULL;
}

/* "etcds:// (TLS module): available" for a scheme of module m that needs
 * a helper module; NULL if none does. */
static const char *helper_note(const char *m, char *buf, size_t len)
{
	char path[4096];
	size_t i;

	for (i = 0; i < NSCHEMES; i++) {
		if (!schemes[i].helper || !schemes[i].module ||
		    strcmp(schemes[i].module, m) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s.so", module_dir(),
			 schemes[i].helper);
		snprintf(buf, len, "%s:// with %s.so: %s", schemes[i].scheme,
			 schemes[i].helper,
			 access(path, F_OK) == 0 ? "available"
						 : "not installed");
		return buf;
	}
	return NULL;
}

void lr_store_each(void (*fn)(const char *name, int loadable,
			      const char *note, void *ctx),
		   void *ctx)
{
	const char *seen[NSCHEMES];
	size_t i, j, nseen = 0;
	struct lr_err err;
	char note[200];

	for (i = 0; i < NSCHEMES; i++) {
		const char *m = schemes[i].module;

		if (!m) {
			fn("file", 1, NULL, ctx);
			continue;
		}
		if (!schemes[i].with)
			continue; /* test-only stores are not advertised */
		for (j = 0; j < nseen; j++)
			if (strcmp(seen[j], m) == 0)
				break;
		if (j < nseen)
			continue;
		seen[nseen++] = m;
		fn(m, load(m, schemes[i].with, &err) != NULL,
		   helper_note(m, note, sizeof(note)), ctx);
	}
}
