/*
 * stores.c - the table of stores and the module loader.
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

#include "stores.h"
#include "file/file.h"

/*
 * One row per URL scheme.  module: the module that serves it, PKGLIBDIR/
 * MODULE.so, which configure builds with --with-MODULE (NULL: built in).
 * package: the binary package (debian/control) that installs it, named to
 * whoever lacks the module; NULL for a test-only module, which is never
 * installed nor listed.  tls_module: the TLS module the store loads for
 * this scheme only, from the same directory and the same package (the
 * etcd store's etcd-tls.so for etcds://), or, when tls_when says so, for
 * URLs of the scheme with that option (MySQL's ssl-mode).
 */
static const struct {
	const char *scheme;
	const char *module;
	const char *package;
	const char *tls_module;
	const char *tls_when;
} schemes[] = {
	{ "file", NULL, "leaserun", NULL },
	{ "redis", "redis", "leaserun-redis", NULL },
	{ "rediss", "redis", "leaserun-redis", "redis-tls" },
	{ "redis+unix", "redis", "leaserun-redis", NULL },
	{ "redis+sentinel", "redis", "leaserun-redis", NULL },
	{ "rediss+sentinel", "redis", "leaserun-redis", "redis-tls" },
	{ "redis+cluster", "redis", "leaserun-redis", NULL },
	{ "rediss+cluster", "redis", "leaserun-redis", "redis-tls" },
	{ "postgres", "pg", "leaserun-postgresql", NULL },
	{ "postgresql", "pg", "leaserun-postgresql", NULL },
	{ "mysql", "mysql", "leaserun-mysql", "mysql-tls", "...?ssl-mode=" },
	{ "mariadb", "mysql", "leaserun-mysql", "mysql-tls", "...?ssl-mode=" },
	{ "etcd", "etcd", "leaserun-etcd", NULL },
	{ "etcds", "etcd", "leaserun-etcd", "etcd-tls" },
	{ "zk", "zk", "leaserun-zookeeper", NULL },
	{ "fault", "fault", NULL, NULL }, /* test-only, also fault+SCHEME */
};
#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

static const char *module_dir(void)
{
	const char *d = secure_getenv("LEASERUN_MODULE_DIR");

	return d && *d ? d : PKGLIBDIR;
}

/* Fills path with the file of module name. */
static void module_path(const char *name, char *path, size_t len)
{
	snprintf(path, len, "%s/%s.so", module_dir(), name);
}

/* The same; returns 1 if it exists. */
static int module_file(const char *name, char *path, size_t len)
{
	module_path(name, path, len);
	return access(path, F_OK) == 0;
}

/* Loads the module of row i; returns its ops or NULL with err filled. */
static const struct lr_store_ops *load(size_t i, struct lr_err *err)
{
	const char *name = schemes[i].module;
	const struct lr_store_ops *ops;
	char path[4096];
	void *h;

	module_path(name, path, sizeof(path));
	/* RTLD_NODELETE: the store's code must outlive any atexit hook its
	 * libraries registered. */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		const char *why = dlerror();

		/* Only now, not before each load: a missing module is the
		 * usual reason, and a package names the cure. */
		if (module_file(name, path, sizeof(path)))
			lr_err_set(err, "cannot load the %s store: %s", name,
				   why);
		else if (schemes[i].package)
			lr_err_set(err,
				   "this leaserun has no %s store: install "
				   "the %s package or build with --with-%s",
				   name, schemes[i].package, name);
		else
			lr_err_set(err, "this leaserun has no %s store", name);
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
	char known[256] = "";
	size_t i, n = 0;

	/* fault+SCHEME:// (test-only): the fault module wraps the store of
	 * SCHEME, which it finds here in turn. */
	if (strncmp(scheme, "fault+", 6) == 0)
		scheme = "fault";
	for (i = 0; i < NSCHEMES; i++) {
		if (strcmp(schemes[i].scheme, scheme) != 0)
			continue;
		if (!schemes[i].module)
			return &lr_file_ops;
		return load(i, err);
	}
	for (i = 0; i < NSCHEMES && n < sizeof(known); i++)
		if (schemes[i].package)
			n += snprintf(known + n, sizeof(known) - n, "%s%s",
				      n ? ", " : "", schemes[i].scheme);
	lr_err_set(err, "unknown store '%s' (known: %s)", scheme, known);
	return NULL;
}

/* "etcds:// (TLS module): available" for a scheme of module m that needs
 * a TLS module; NULL if none does. */
static const char *tls_module_note(const char *m, char *buf, size_t len)
{
	char path[4096];
	size_t i;

	for (i = 0; i < NSCHEMES; i++) {
		if (!schemes[i].tls_module || !schemes[i].module ||
		    strcmp(schemes[i].module, m) != 0)
			continue;
		snprintf(buf, len, "%s://%s with %s.so: %s", schemes[i].scheme,
			 schemes[i].tls_when ? schemes[i].tls_when : "",
			 schemes[i].tls_module,
			 module_file(schemes[i].tls_module, path, sizeof(path))
				 ? "available"
				 : "not installed");
		return buf;
	}
	return NULL;
}

void lr_store_each(void (*fn)(const struct lr_store_avail *a, void *ctx),
		   void *ctx)
{
	struct lr_store_avail a;
	const char *seen[NSCHEMES];
	char path[4096];
	size_t i, j, nseen = 0;
	struct lr_err err;
	char note[200];

	for (i = 0; i < NSCHEMES; i++) {
		const char *m = schemes[i].module;

		if (!schemes[i].package)
			continue; /* test-only stores are not advertised */
		for (j = 0; j < nseen; j++)
			if (m && seen[j] && strcmp(seen[j], m) == 0)
				break;
		if (j < nseen)
			continue;
		seen[nseen++] = m;
		a.name = m ? m : schemes[i].scheme;
		a.package = schemes[i].package;
		a.installed = !m || module_file(m, path, sizeof(path));
		a.error = m && !load(i, &err) ? err.msg : NULL;
		a.note = m ? tls_module_note(m, note, sizeof(note)) : NULL;
		fn(&a, ctx);
	}
}
