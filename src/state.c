/*
 * state.c - the command's view of its lease (see state.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "json.h"
#include "state.h"

static const char *const state_word[] = { "held", "at-risk", "stopping",
					  "releasing", "lost" };

static char st_dir[4096];
static char st_file[4200];
static char st_tmp[4200];
static int st_made;
static int st_written; /* a version was tried: later ones replace it */

static int make_dir(void)
{
	/* The first absolute path we can make it in; /dev/shm before /tmp,
	 * since a file made, renamed and removed in every run costs far
	 * less on a tmpfs than on a disk. */
	const char *const bases[] = { getenv("XDG_RUNTIME_DIR"),
				      getenv("TMPDIR"), "/dev/shm", "/tmp" };
	size_t i;

	for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || bases[i][0] != '/')
			continue;
		if (snprintf(st_dir, sizeof(st_dir), "%s/leaserun.XXXXXX",
			     bases[i]) >= (int)sizeof(st_dir))
			continue;
		if (mkdtemp(st_dir))
			break;
		if (errno != EACCES && errno != EPERM && errno != EROFS &&
		    errno != ENOENT && errno != ENOTDIR)
			return -1;
	}
	if (i == sizeof(bases) / sizeof(bases[0])) {
		errno = EACCES;
		return -1;
	}
	/* Others may pass through (a command that changes user can still
	 * read the file, though not inside a private XDG_RUNTIME_DIR), not
	 * list or write. */
	if (chmod(st_dir, 0711) < 0) {
		int e = errno;

		rmdir(st_dir);
		errno = e;
		return -1;
	}
	snprintf(st_file, sizeof(st_file), "%s/state", st_dir);
	snprintf(st_tmp, sizeof(st_tmp), "%s/state.new", st_dir);
	st_made = 1;
	st_written = 0;
	return 0;
}

/* A write that failed: -1, errno kept.  If it was the first version
 * (path is the file itself), there is no file for the command to read:
 * the directory goes, and the command gets no LEASERUN_STATE. */
static int first_failed(const char *path)
{
	int e = errno;

	if (path == st_file)
		lr_state_remove();
	errno = e;
	return -1;
}

int lr_state_write(const char *name, enum lr_lease_state st, uint64_t fence,
		   int64_t deadline_boot)
{
	char buf[512];
	const char *path;
	int fd, n, e;

	if (!st_made && make_dir() < 0)
		return -1;
	n = snprintf(buf, sizeof(buf),
		     "name=%s\nstate=%s\nfence=%" PRIu64 "\npid=%ld\n"
		     "deadline=%lld\ndeadline_boottime=%lld\n",
		     name, state_word[st], fence, (long)getpid(),
		     (long long)(lr_wall_ms() + deadline_boot - lr_now_ms()),
		     (long long)deadline_boot);
	/* The first version is written in place: the command that could
	 * read it has not started, so nobody sees it half written.  Later
	 * ones replace it whole. */
	path = st_written ? st_tmp : st_file;
	st_written = 1; /* whatever becomes of this one */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0644);
	if (fd < 0)
		return first_failed(path);
	if (write(fd, buf, (size_t)n) != n) {
		e = errno ? errno : EIO;
		close(fd);
		unlink(path);
		errno = e;
		return first_failed(path);
	}
	if (close(fd) < 0 || (path == st_tmp && rename(st_tmp, st_file) < 0)) {
		e = errno;
		unlink(path);
		errno = e;
		return first_failed(path);
	}
	return 0;
}

const char *lr_state_path(void)
{
	return st_made ? st_file : NULL;
}

const char *lr_state_dir(void)
{
	return st_dir;
}

const char *lr_state_tmp(void)
{
	return st_tmp;
}

void lr_state_remove(void)
{
	if (!st_made)
		return;
	/* No state.new is left: a failed write removes its own. */
	unlink(st_file);
	rmdir(st_dir);
	st_made = 0;
}

/* ---- --check ---- */

static const char *value(const char *buf, const char *key)
{
	size_t k = strlen(key);
	const char *p = buf;

	while (p && *p) {
		if (strncmp(p, key, k) == 0 && p[k] == '=')
			return p + k + 1;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

static long long number(const char *buf, const char *key)
{
	const char *v = value(buf, key);

	return v ? strtoll(v, NULL, 10) : 0;
}

static void word(const char *buf, const char *key, char *out, size_t len)
{
	const char *v = value(buf, key);
	size_t n = v ? strcspn(v, "\n") : 0;

	if (n >= len)
		n = len - 1;
	memcpy(out, v ? v : "", n);
	out[n] = '\0';
}

/* --check once leaserun has ended and removed the file: after a release,
 * or after a loss (the file said "lost" until then).  Which one the file
 * no longer tells, so neither is claimed. */
static int check_ended(int json, int quiet)
{
	if (json) {
		struct lr_json j;
		char out[64];

		lr_json_open(&j, out, sizeof(out));
		lr_json_bool(&j, "held", 0);
		lr_json_str(&j, "state", "ended");
		lr_json_close(&j);
		puts(out);
	} else if (!quiet) {
		printf("not held: leaserun has ended (the lease was "
		       "released, or lost)\n");
	}
	return 1;
}

/* What --check prints of a state file it has read: a line, or one JSON
 * object.  DEADLINE is in ms since the epoch, LEFT in ms from now. */
static void check_print(const char *name, const char *st, int held,
			long long fence, long long left, long long deadline,
			int json, int quiet)
{
	char when[64];
	time_t t = (time_t)(deadline / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (json) {
		struct lr_json j;
		char out[1024], at[80];

		snprintf(at, sizeof(at), "%s.%03lldZ", when, deadline % 1000);
		lr_json_open(&j, out, sizeof(out));
		lr_json_str(&j, "name", name);
		lr_json_bool(&j, "held", held);
		lr_json_str(&j, "state", st);
		lr_json_int(&j, "fence", fence);
		lr_json_int(&j, "left_ms", left);
		lr_json_str(&j, "deadline", at);
		lr_json_int(&j, "deadline_ms", deadline);
		lr_json_close(&j);
		puts(out);
	} else if (!quiet) {
		printf("%s: %s, fence %lld, %lldms left (until %s.%03lldZ)\n",
		       name, st, fence, left, when, deadline % 1000);
	}
}

int lr_state_check(int json, int quiet)
{
	const char *path = getenv("LEASERUN_STATE");
	char buf[1024], name[256], st[32];
	long long fence, deadline, left;
	ssize_t n;
	int fd, held, expired;

	if (!path || !*path) {
		fprintf(stderr, "leaserun: --check: LEASERUN_STATE is not set "
				"(run it from a command that leaserun "
				"started)\n");
		return 125;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return check_ended(json, quiet);
	if (fd < 0) {
		fprintf(stderr, "leaserun: --check: cannot read %s: %s\n", path,
			strerror(errno));
		return 125;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (!value(buf, "state") || !value(buf, "deadline_boottime")) {
		fprintf(stderr, "leaserun: --check: %s is not a leaserun "
				"state file\n", path);
		return 125;
	}
	word(buf, "name", name, sizeof(name));
	word(buf, "state", st, sizeof(st));
	fence = number(buf, "fence");
	deadline = number(buf, "deadline");
	left = number(buf, "deadline_boottime") - lr_now_ms();
	expired = left <= 0;
	held = !expired &&
	       (strcmp(st, "held") == 0 || strcmp(st, "at-risk") == 0);
	if (expired && strcmp(st, "lost") != 0)
		snprintf(st, sizeof(st), "expired");
	if (left < 0)
		left = 0;
	check_print(name, st, held, fence, left, deadline, json, quiet);
	return held ? 0 : 1;
}
