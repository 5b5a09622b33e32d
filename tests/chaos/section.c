/*
 * section - the critical section and the fenced resource of the chaos
 * suite (tests/chaos/run), and the few clock and pin helpers its fault
 * injector needs.  Built by "make check" and "make chaos", never
 * installed.
 *
 *   section run DIR RUNID WRITES GAP_MS LINGER [MODE]
 *	The critical section, run by leaserun.  Logs "start", then makes
 *	WRITES writes to the resource GAP_MS apart (more while it is pinned,
 *	see below), then logs "end".  With LINGER 1 it first forks a
 *	grandchild in its process group ("section linger") that writes to
 *	the resource every GAP_MS until it is killed: leaserun must stop it
 *	before it releases the lease.  MODE is how leaserun was asked to
 *	hold the lease: x (exclusive, the default) or s (--shared); the
 *	slot is LEASERUN_SLOT (0 without it).
 *   section now
 *	Prints CLOCK_MONOTONIC in nanoseconds, the clock of every log line.
 *   section pin DIR TIMEOUT_MS
 *	Asks the next section that starts to stay (to keep writing) until
 *	DIR/pin.RUNID is removed, and prints "RUNID LEASERUN_PID PID SLOT
 *	MODE" of the section that took the pin; exit 1 if none started in
 *	TIMEOUT_MS.
 *
 * DIR/events holds one line per event, each written with one write(2)
 * on an O_APPEND file, so lines of concurrent writers never mix:
 *
 *	T RUNID FENCE start LEASERUN_PID PID SLOT MODE
 *	T RUNID FENCE write SEQ accept|reject MAX_BEFORE
 *	T RUNID FENCE pinned|linger|end
 *
 * T is CLOCK_MONOTONIC in ns.  The resource is one file per slot,
 * DIR/resource.SLOT, since the holders of other slots run at the same
 * time (the man page: "Slots and shared leases"); it keeps two numbers,
 * the highest fence it has accepted and the highest an exclusive holder
 * wrote with.  An exclusive write is accepted if its fence is >= the
 * first, a shared one (a reader: other readers may hold beside it, but
 * no writer) if its fence is >= the second; MAX_BEFORE is the number it
 * was judged by.  A write takes flock(2) on the file, reads, judges,
 * stores, then logs the decision, all under the lock, so the order of
 * one slot's write lines is the order of its decisions.  A section killed
 * by SIGKILL logs no "end": the checker defines a section by its start
 * and writes.  The resource stores the new highest fences before it logs
 * the accept, so a kill in between can lose an accept line but never make
 * a logged accept look stale.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A pinned section stops by itself after this long, should the injector
 * that pinned it be gone. */
#define PIN_MAX_NS (120 * 1000000000LL)

struct sec {
	const char *dir;
	const char *runid;
	uint64_t fence;
	unsigned slot; /* LEASERUN_SLOT */
	int shared;    /* held with --shared */
	int events;    /* DIR/events, O_APPEND */
	int resource;  /* DIR/resource.SLOT */
	unsigned seq;  /* writes made */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("section: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void path(char *buf, const char *dir, const char *name)
{
	if (snprintf(buf, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
		die("path too long: %s/%s", dir, name);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One line "T RUNID FENCE WHAT", in one write(2). */
static void event(struct sec *s, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%" PRId64 " %s %" PRIu64 " ",
		     now_ns(), s->runid, s->fence);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	if (write(s->events, line, n) != n)
		die("cannot log to %s/events: %s", s->dir, strerror(errno));
}

/* Writes a file whole, through a rename, so a reader sees all or none. */
static void put_file(const char *dir, const char *name, const char *text)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	size_t len = strlen(text);
	int fd;

	path(dst, dir, name);
	if (snprintf(tmp, sizeof(tmp), "%s.%ld", dst, (long)getpid()) >=
	    (int)sizeof(tmp))
		die("path too long: %s", dst);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || close(fd) < 0 ||
	    rename(tmp, dst) < 0)
		die("cannot write %s: %s", dst, strerror(errno));
}

static void open_logs(struct sec *s)
{
	char p[PATH_MAX], name[32];

	path(p, s->dir, "events");
	s->events = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (s->events < 0)
		die("cannot open %s: %s", p, strerror(errno));
	snprintf(name, sizeof(name), "resource.%u", s->slot);
	path(p, s->dir, name);
	s->resource = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (s->resource < 0)
		die("cannot open %s: %s", p, strerror(errno));
}

/* The fenced resource of our slot: "ALL X", the highest fence accepted
 * and the highest an exclusive holder wrote with.  Accept if our fence is
 * >= ALL (exclusive) or >= X (shared). */
static void fenced_write(struct sec *s)
{
	char buf[64];
	uint64_t all = 0, x = 0, max;
	ssize_t n;
	int accept;

	while (flock(s->resource, LOCK_EX) < 0)
		if (errno != EINTR)
			die("cannot lock the resource: %s", strerror(errno));
	n = pread(s->resource, buf, sizeof(buf) - 1, 0);
	if (n > 0) {
		buf[n] = '\0';
		if (sscanf(buf, "%" SCNu64 " %" SCNu64, &all, &x) != 2)
			die("the resource %s/resource.%u is garbled", s->dir,
			    s->slot);
	}
	max = s->shared ? x : all;
	accept = s->fence >= max;
	if (accept && (s->fence > all || (!s->shared && s->fence > x))) {
		if (s->fence > all)
			all = s->fence;
		if (!s->shared)
			x = s->fence;
		n = snprintf(buf, sizeof(buf), "%020" PRIu64 " %020" PRIu64 "\n",
			     all, x);
		if (pwrite(s->resource, buf, n, 0) != n)
			die("cannot write the resource: %s", strerror(errno));
	}
	s->seq++;
	event(s, "write %u %s %" PRIu64, s->seq, accept ? "accept" : "reject",
	      max);
	flock(s->resource, LOCK_UN);
}

static int pinned(struct sec *s, int64_t since)
{
	char p[PATH_MAX], name[128];

	snprintf(name, sizeof(name), "pin.%s", s->runid);
	path(p, s->dir, name);
	return access(p, F_OK) == 0 && now_ns() - since < PIN_MAX_NS;
}

/* Takes the pin the injector asked for, if any: one section wins. */
static int take_pin(struct sec *s)
{
	char req[PATH_MAX], mine[PATH_MAX], name[128], info[160];

	snprintf(name, sizeof(name), "pin.%s", s->runid);
	path(req, s->dir, "pin.req");
	path(mine, s->dir, name);
	if (rename(req, mine) < 0)
		return 0;
	event(s, "pinned");
	snprintf(info, sizeof(info), "%s %ld %ld %u %c\n", s->runid,
		 (long)getppid(), (long)getpid(), s->slot,
		 s->shared ? 's' : 'x');
	put_file(s->dir, "claimed", info);
	return 1;
}

/* Run without leaserun (the checker's own test): fence 0, slot 0. */
static uint64_t from_env(const char *name)
{
	const char *v = getenv(name);

	return v ? strtoull(v, NULL, 10) : 0;
}

static int mode_arg(const char *mode)
{
	if (strcmp(mode, "x") && strcmp(mode, "s"))
		die("mode %s: x (exclusive) or s (shared)", mode);
	return *mode == 's';
}

static int cmd_run(int argc, char **argv)
{
	struct sec s = { argv[0], argv[1], from_env("LEASERUN_FENCE"),
			 from_env("LEASERUN_SLOT"), 0, -1, -1, 0 };
	long writes = atol(argv[2]), gap = atol(argv[3]);
	int linger = atoi(argv[4]), pin;
	int64_t t0 = now_ns();

	s.shared = argc > 5 && mode_arg(argv[5]);
	open_logs(&s);
	event(&s, "start %ld %ld %u %c", (long)getppid(), (long)getpid(),
	      s.slot, s.shared ? 's' : 'x');
	pin = take_pin(&s);
	if (linger && fork() == 0) {
		char fence[24], slot[16];

		snprintf(fence, sizeof(fence), "%" PRIu64, s.fence);
		snprintf(slot, sizeof(slot), "%u", s.slot);
		execl("/proc/self/exe", "section", "linger", s.dir, s.runid,
		      fence, argv[3], slot, s.shared ? "s" : "x", (char *)NULL);
		_exit(127);
	}
	while (s.seq < (unsigned long)writes || (pin && pinned(&s, t0))) {
		fenced_write(&s);
		sleep_ms(gap);
	}
	event(&s, "end");
	return 0;
}

static __attribute__((noreturn)) void cmd_linger(char **argv)
{
	struct sec s = { argv[0], argv[1], 0, 0, 0, -1, -1, 1000 };
	long gap = atol(argv[3]);

	s.fence = strtoull(argv[2], NULL, 10);
	s.slot = (unsigned)strtoul(argv[4], NULL, 10);
	s.shared = mode_arg(argv[5]);
	open_logs(&s);
	event(&s, "linger");
	for (;;) {
		fenced_write(&s);
		sleep_ms(gap > 0 ? gap : 1);
	}
}

static int read_claim(const char *dir)
{
	char p[PATH_MAX], buf[160];
	ssize_t n;
	int fd;

	path(p, dir, "claimed");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	fwrite(buf, 1, n, stdout);
	return 1;
}

static int cmd_pin(char **argv)
{
	const char *dir = argv[0];
	int64_t until = now_ns() + atol(argv[1]) * 1000000LL;
	char req[PATH_MAX], gone[PATH_MAX], claimed[PATH_MAX];
	int fd;

	path(req, dir, "pin.req");
	path(gone, dir, "pin.cancelled");
	path(claimed, dir, "claimed");
	unlink(claimed);
	fd = open(req, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot create %s: %s", req, strerror(errno));
	close(fd);
	while (now_ns() < until) {
		if (read_claim(dir))
			return 0;
		sleep_ms(1);
	}
	/* Take the request back; if it is gone, a section took it just now
	 * and is about to say so. */
	if (rename(req, gone) == 0) {
		unlink(gone);
		return 1;
	}
	until = now_ns() + 2000000000LL;
	while (now_ns() < until) {
		if (read_claim(dir))
			return 0;
		sleep_ms(1);
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "now")) {
		printf("%" PRId64 "\n", now_ns());
		return 0;
	}
	if ((argc == 7 || argc == 8) && !strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (argc == 8 && !strcmp(argv[1], "linger"))
		cmd_linger(argv + 2);
	if (argc == 4 && !strcmp(argv[1], "pin"))
		return cmd_pin(argv + 2);
	fputs("usage: section run DIR RUNID WRITES GAP_MS LINGER [x|s]\n"
	      "       section linger DIR RUNID FENCE GAP_MS SLOT x|s\n"
	      "       section now\n"
	      "       section pin DIR TIMEOUT_MS\n",
	      stderr);
	return 2;
}
