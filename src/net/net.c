/*
 * net.c - name resolution, connects and the TLS module's loader, shared by
 * the network stores (see net.h).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/net.h"
#include "net/tls.h"

/* ---- name resolution ----------------------------------------------------- */

static int addrs_from(const struct addrinfo *ai, struct lr_net_addrs *out)
{
	out->n = 0;
	for (; ai && out->n < LR_NET_MAX_ADDRS; ai = ai->ai_next) {
		if (ai->ai_addrlen > sizeof(out->sa[0]))
			continue;
		memcpy(&out->sa[out->n], ai->ai_addr, ai->ai_addrlen);
		out->len[out->n++] = ai->ai_addrlen;
	}
	return out->n ? 0 : -1;
}

/* Lookups given up while glibc's thread still works on them: their
 * memory must outlive it, so it is kept (reachable) for good. */
static struct gaicb *abandoned[16];
static size_t nabandoned;

int lr_net_resolve(const char *host, const char *port, int64_t deadline,
		   struct lr_net_addrs *out, struct lr_err *err)
{
	struct addrinfo hints, *res = NULL;
	struct gaicb *cb;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(host, port, &hints, &res) == 0) {
		rc = addrs_from(res, out);
		freeaddrinfo(res);
		if (rc < 0)
			lr_err_set(err, "no usable address for %s", host);
		return rc;
	}
	/* A name: ask the resolver without blocking past the deadline. */
	hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
	cb = calloc(1, sizeof(*cb) + sizeof(hints) + strlen(host) +
			   strlen(port) + 2);
	if (!cb) {
		lr_err_set(err, "out of memory");
		return -1;
	}
	{
		struct addrinfo *h = (struct addrinfo *)(cb + 1);
		char *name = (char *)(h + 1);

		*h = hints;
		strcpy(name, host);
		strcpy(name + strlen(host) + 1, port);
		cb->ar_name = name;
		cb->ar_service = name + strlen(host) + 1;
		cb->ar_request = h;
	}
	if ((rc = getaddrinfo_a(GAI_NOWAIT, &cb, 1, NULL)) != 0) {
		lr_err_set(err, "cannot resolve %s: %s", host,
			   gai_strerror(rc));
		free(cb);
		return -1;
	}
	while ((rc = gai_error(cb)) == EAI_INPROGRESS) {
		int64_t left = deadline - lr_now_ms();
		struct timespec ts;
		const struct gaicb *list[1] = {cb};

		if (left <= 0)
			break;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (long)(left % 1000) * 1000000;
		gai_suspend(list, 1, &ts);
	}
	if (rc == EAI_INPROGRESS) {
		lr_err_set(err, "cannot resolve %s: no answer in time", host);
		if (gai_cancel(cb) == EAI_CANCELED)
			free(cb);
		else if (nabandoned < sizeof(abandoned) / sizeof(*abandoned))
			abandoned[nabandoned++] = cb;
		return -1;
	}
	if (rc != 0) {
		lr_err_set(err, "cannot resolve %s: %s", host,
			   gai_strerror(rc));
		free(cb);
		return -1;
	}
	rc = addrs_from(cb->ar_result, out);
	freeaddrinfo(cb->ar_result);
	free(cb);
	if (rc < 0)
		lr_err_set(err, "no usable address for %s", host);
	return rc;
}

/* ---- connecting ---------------------------------------------------------- */

int lr_net_connect_start(const struct sockaddr *sa, socklen_t len, int *fd)
{
	int s, one = 1, e;

	*fd = -1;
	s = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		   0);
	if (s < 0)
		return errno;
	if (sa->sa_family != AF_UNIX)
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s, sa, len) < 0 && errno != EINPROGRESS) {
		e = errno;
		close(s);
		return e;
	}
	*fd = s;
	return 0;
}

int lr_net_wait(int fd, short events, int64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};

	for (;;) {
		int64_t left = deadline - lr_now_ms();
		int n;

		if (left <= 0)
			return 0;
		n = poll(&p, 1, left > 86400000 ? 86400000 : (int)left);
		if (n > 0 || (n < 0 && errno != EINTR))
			return 1;
	}
}

/* Connects to sa by deadline; LR_OK with *fd, or the reason in err. */
static enum lr_status connect_one(const struct sockaddr *sa, socklen_t len,
				  int64_t deadline, int *fd, struct lr_err *err)
{
	int e = lr_net_connect_start(sa, len, fd), soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (e) {
		lr_err_set(err, "%s", strerror(e));
		return LR_ERROR;
	}
	if (!lr_net_wait(*fd, POLLOUT, deadline)) {
		lr_err_set(err, "no answer in time");
		e = ETIMEDOUT;
	} else if (getsockopt(*fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
		   soerr) {
		e = soerr ? soerr : errno;
		lr_err_set(err, "%s", strerror(e));
	}
	if (e) {
		close(*fd);
		*fd = -1;
		return e == ETIMEDOUT ? LR_TIMEOUT : LR_ERROR;
	}
	return LR_OK;
}

enum lr_status lr_net_dial(const char *host, int port, const char *path,
			   int64_t deadline, int *fd, struct lr_err *err)
{
	struct lr_net_addrs a;
	enum lr_status s = LR_ERROR;
	char ps[16];
	size_t i;

	*fd = -1;
	if (deadline <= lr_now_ms()) {
		lr_err_set(err, "no time left");
		return LR_TIMEOUT;
	}
	if (!host) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};

		if (strlen(path) >= sizeof(sun.sun_path)) {
			lr_err_set(err, "socket path too long");
			return LR_ERROR;
		}
		strcpy(sun.sun_path, path);
		return connect_one((struct sockaddr *)&sun, sizeof(sun),
				   deadline, fd, err);
	}
	snprintf(ps, sizeof(ps), "%d", port);
	if (lr_net_resolve(host, ps, deadline, &a, err) < 0)
		return lr_now_ms() >= deadline ? LR_TIMEOUT : LR_ERROR;
	for (i = 0; i < a.n; i++) {
		s = connect_one((const struct sockaddr *)&a.sa[i], a.len[i],
				deadline, fd, err);
		if (s == LR_OK || lr_now_ms() >= deadline)
			break;
	}
	return s;
}

/* ---- the TLS module ------------------------------------------------------ */

/*
 * OpenSSL is loaded only for a TLS URL.  It lives in a module of its own,
 * STORE-tls.so, next to the store module that uses it, rather than
 * being dlopen()ed here symbol by symbol: the module is compiled against
 * OpenSSL's headers, so types are checked and the macros that wrap
 * SSL_ctrl() work, and the linker records the library's soname and
 * symbol versions, none of which a hand-written list of dlsym() names
 * would follow from one OpenSSL release to the next.
 */
const struct lr_tls_ops *lr_tls_load(struct lr_err *err)
{
	static const struct lr_tls_ops *ops;
	char path[4096];
	Dl_info info;
	size_t n;
	void *h;

	if (ops)
		return ops;
	/* STORE.so -> STORE-tls.so, beside it. */
	if (!dladdr((void *)lr_tls_load, &info) || !info.dli_fname ||
	    (n = strlen(info.dli_fname)) < 4 ||
	    strcmp(info.dli_fname + n - 3, ".so") != 0) {
		lr_err_set(err, "cannot find the TLS module: where is this "
				"store module?");
		return NULL;
	}
	snprintf(path, sizeof(path), "%.*s" LR_TLS_SUFFIX ".so",
		 (int)(n - 3), info.dli_fname);
	if (access(path, F_OK) != 0) {
		lr_err_set(err,
			   "this leaserun has no TLS support (%s is "
			   "missing: build with OpenSSL's libssl-dev)",
			   path);
		return NULL;
	}
	/* RTLD_NODELETE: OpenSSL registers exit handlers. */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		lr_err_set(err, "cannot load the TLS module: %s", dlerror());
		return NULL;
	}
	ops = dlsym(h, LR_TLS_SYMBOL);
	if (!ops || ops->abi != LR_TLS_ABI) {
		lr_err_set(err,
			   "cannot load the TLS module: %s was built for "
			   "another leaserun",
			   path);
		ops = NULL;
	}
	return ops;
}
