/*
 * store-util.c - helpers every store may use: clocks, errors, names.
 * Linked into the core and into each store module.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stores.h"

int64_t lr_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t lr_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lr_err_heals(struct lr_err *err)
{
	if (err)
		err->heals = 1;
}

void lr_err_set(struct lr_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

const char *lr_status_name(enum lr_status s)
{
	switch (s) {
	case LR_OK:
		return "ok";
	case LR_BUSY:
		return "busy";
	case LR_LOST:
		return "lost";
	case LR_TIMEOUT:
		return "timeout";
	case LR_ERROR:
		return "error";
	}
	return "?";
}

void lr_err_limit(struct lr_err *err, const struct lr_store_req *req,
		  unsigned recorded)
{
	lr_err_set(err,
		   "the lease is held with --limit %u and this run asks for "
		   "--limit %u%s: every run on a name must use the same "
		   "limit",
		   recorded, req->limit, req->shared ? " (--shared)" : "");
}

void lr_info_init(struct lr_info *info)
{
	memset(info, 0, sizeof(*info));
	info->waiters = -1;
}

struct lr_holder *lr_info_add(struct lr_info *info)
{
	struct lr_holder *h;

	if (info->n == info->cap) {
		size_t cap = info->cap ? info->cap * 2 : 4;

		h = realloc(info->h, cap * sizeof(*h));
		if (!h)
			return NULL;
		info->h = h;
		info->cap = cap;
	}
	h = &info->h[info->n++];
	memset(h, 0, sizeof(*h));
	h->ttl_left_ms = LR_MS_UNKNOWN;
	return h;
}

static int cmp_holder(const void *a, const void *b)
{
	const struct lr_holder *x = a, *y = b;

	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return (x->fence > y->fence) - (x->fence < y->fence);
}

void lr_info_sort(struct lr_info *info)
{
	if (info->n > 1)
		qsort(info->h, info->n, sizeof(*info->h), cmp_holder);
}

void lr_info_free(struct lr_info *info)
{
	free(info->h);
	info->h = NULL;
	info->n = info->cap = 0;
}

void lr_wipe(void *p, size_t n)
{
#ifdef HAVE_EXPLICIT_BZERO
	explicit_bzero(p, n);
#else
	volatile unsigned char *v = p;

	while (n--)
		*v++ = 0;
#endif
}

void lr_wipe_free(char *s)
{
	if (!s)
		return;
	lr_wipe(s, strlen(s));
	free(s);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Every fd from 3 up to hi - 1 that is open, by one poll(): POLLNVAL
 * says it is not.  0 with *ok = 0 if poll() fails. */
static size_t polled_fds(int *fds, size_t max, int hi, int *ok)
{
	struct pollfd p[1024];
	size_t n = 0;
	int i, k = hi - 3;

	for (i = 0; i < k; i++)
		p[i] = (struct pollfd){ .fd = i + 3 };
	*ok = poll(p, (nfds_t)k, 0) >= 0;
	for (i = 0; *ok && i < k && n < max; i++)
		if (!(p[i].revents & POLLNVAL))
			fds[n++] = i + 3;
	return n;
}

size_t lr_open_fds(int *fds, size_t max)
{
	char buf[2048] __attribute__((aligned(8)));
	struct rlimit rl;
	size_t n = 0, i;
	long got;
	int d, ok;

	/* Under the usual limit of 1024 open files, one poll() asks about
	 * every fd that can be open: 9us here, against 32us for listing
	 * /proc/self/fd (in a fresh process, as each run is).  An fd at or
	 * above a limit lowered after it was opened is not seen. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur <= 1024 &&
	    rl.rlim_cur > 3) {
		n = polled_fds(fds, max, (int)rl.rlim_cur, &ok);
		if (ok)
			return n;
	}
	/* getdents64 into a buffer on the stack: opendir() would malloc
	 * 32KB. */
	d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	n = 0;
	if (d < 0) {
		/* No /proc (or no fd left to read it): ask fcntl about each
		 * fd that can be open. */
		size_t hi = 65536;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < hi)
			hi = (size_t)rl.rlim_cur;
		for (i = 3; i < hi && n < max; i++)
			if (fcntl((int)i, F_GETFD) >= 0)
				fds[n++] = (int)i;
		return n;
	}
	while (n < max && (got = syscall(SYS_getdents64, d, buf,
					 sizeof(buf))) > 0) {
		long off;

		for (off = 0; off < got && n < max;) {
			const struct dirent64 *e =
				(const struct dirent64 *)(void *)(buf + off);
			int fd;

			off += e->d_reclen;
			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			fd = atoi(e->d_name);
			if (fd >= 3 && fd != d)
				fds[n++] = fd;
		}
	}
	close(d);
	qsort(fds, n, sizeof(*fds), cmp_int);
	return n;
}

void lr_run_init(struct lr_run *run)
{
	memset(run, 0, sizeof(*run));
	run->ago_ms = LR_MS_UNKNOWN;
	run->next_ms = LR_MS_UNKNOWN;
	run->status = -1;
}

void lr_run_times(struct lr_run *run, int64_t now, int64_t period)
{
	if (!period)
		period = run->period_ms;
	run->ago_ms = now > run->start_ms ? now - run->start_ms : 0;
	run->next_ms = run->start_ms + period > now
			       ? run->start_ms + period - now
			       : 0;
}

void lr_run_format(const struct lr_run *run, char *buf, size_t len)
{
	snprintf(buf, len, "%llu %lld %lld %lld %d %ld %s",
		 (unsigned long long)run->fence, (long long)run->period_ms,
		 (long long)run->start_ms, (long long)run->end_ms,
		 run->end_ms ? run->status : -1, run->pid,
		 run->host[0] ? run->host : "-");
}

void lr_run_parse(const char *s, struct lr_run *run)
{
	unsigned long long fence;
	long long period, start, end;
	int status;
	long pid;

	lr_run_init(run);
	if (!s || sscanf(s, "%llu %lld %lld %lld %d %ld %255s", &fence,
			 &period, &start, &end, &status, &pid,
			 run->host) != 7) {
		run->host[0] = '\0';
		return;
	}
	run->known = 1;
	run->fence = fence;
	run->period_ms = period;
	run->start_ms = start;
	run->end_ms = end;
	run->status = end ? status : -1;
	run->pid = pid;
	if (strcmp(run->host, "-") == 0)
		run->host[0] = '\0';
}

void lr_holder_format(const char *host, long pid, int64_t since_ms,
		      char *buf, size_t len)
{
	snprintf(buf, len, "%s %ld %lld", host && *host ? host : "-", pid,
		 (long long)since_ms);
}

int lr_holder_parse(const char *s, struct lr_holder *h)
{
	char host[256];
	long pid;
	long long since;

	if (!s || sscanf(s, "%255s %ld %lld", host, &pid, &since) != 3)
		return -1;
	/* "?": how older versions of the etcd store said "unknown". */
	if (strcmp(host, "-") == 0 || strcmp(host, "?") == 0)
		host[0] = '\0';
	snprintf(h->host, sizeof(h->host), "%s", host);
	h->pid = pid;
	h->since_ms = since;
	return 0;
}

void lr_holder_who(const struct lr_holder *h, char *buf, size_t len)
{
	if (h->host[0] && h->pid)
		snprintf(buf, len, "%s pid %ld", h->host, h->pid);
	else if (h->host[0])
		snprintf(buf, len, "%s", h->host);
	else if (h->pid)
		snprintf(buf, len, "pid %ld", h->pid);
	else
		buf[0] = '\0';
}

void lr_holders_who(const struct lr_info *info, char *buf, size_t len)
{
	size_t n;

	buf[0] = '\0';
	if (!info->n)
		return;
	lr_holder_who(&info->h[0], buf, len);
	n = strlen(buf);
	if (n && info->n > 1)
		snprintf(buf + n, len - n, " and %zu more", info->n - 1);
}

int lr_host_is_local(const char *host)
{
	if (!host || !*host || host[0] == '/' || host[0] == '@')
		return 1; /* a Unix socket, or the client's own default */
	if (!strcasecmp(host, "localhost") || !strcmp(host, "::1") ||
	    !strcmp(host, "[::1]"))
		return 1;
	return !strncmp(host, "127.", 4);
}
