/*
 * file.c - the built-in store: flock(2) on DIR/NAME.lock.
 *
 * The lease lives with our open file description; the kernel frees it
 * when we die, so it has no TTL.  The lock file holds the fence of the
 * last grant and the holder's host, pid and start time:
 *
 *	fence=42
 *	host=web1
 *	pid=1234
 *	since=1764477067123
 *
 * Fence: the counter is DIR/NAME.fence ("42\n"), apart from the lock file
 * so that removing the lock file cannot reset it.  It is bumped under the
 * lease lock, but that is not enough: once the lock file was removed, a
 * holder still on the old file and one on the new file can be granted at
 * the same moment.  So the counter has a lock of its own, flock() on
 * NAME.fence, held only to read, write and fsync it.  The new fence is one
 * past the larger of the counter and the lock file's fence (where older
 * versions kept the counter), and at least the time in microseconds
 * (CLOCK_REALTIME, asked of the kernel itself, not of a libc that may
 * fake it), and reaches the disk before the command starts.  So removing
 * both files, or a reboot with DIR on a tmpfs, does not start the count
 * again: as long as the clock does not go back across the loss, the next
 * fence is above every fence granted before it, and a --once-per record
 * (NAME.run) can never take a new grant's fence for its own.  Fences stay
 * below 2^53, exact in a double, as the Redis store's.
 *
 * Waiting: one attempt is flock(LOCK_NB).  When it is busy we fork a
 * flocker that blocks in flock(LOCK_EX) on the same open file description
 * (so the lock it gets is ours) and writes one byte to a pipe; the pipe is
 * our wait fd.  The hand-over is then as fast as flock's own.
 *
 * Loss: the lock file deleted, renamed or replaced while we hold it means
 * a newcomer can lock a new file with the same name.  An inotify watch on
 * our file is our wait fd while holding, so that is seen at once; renew()
 * checks the same thing.  --break replaces the file with a fresh copy that
 * keeps the fence line, which the holder sees as loss.
 *
 * Shared holders and slots (--shared, --limit N).  The plain lease holds
 * NAME.lock with LOCK_EX.  A shared holder, and a holder of a slot of a
 * semaphore, holds NAME.lock with LOCK_SH for as long as it holds, and
 * also LOCK_EX on a file of its own, NAME.lock.K: the slot K (0..N-1) of
 * a semaphore, or for a shared holder the first free of any number of
 * such files (its seat, which --status reads; every shared holder is in
 * slot 0).  Those files hold what NAME.lock holds for the plain lease:
 * the fence, host, pid and start ("shared=1" for a seat).  (Not
 * NAME.slotK.lock: a lease named "x.slot0" locks x.slot0.lock.)
 *
 * The limit is recorded in NAME.lock ("limit=N"), written only under
 * LOCK_EX by the run that finds the name free and goes on to hold it
 * with LOCK_SH (the lock is turned into LOCK_SH, which Linux does in one
 * step), so whoever holds LOCK_SH reads the limit of the holders it joins;
 * the plain lease writes no limit line (1).  Every run but a plain one
 * that finds NAME.lock free looks under the gate, NAME.gate, a turnstile
 * held with LOCK_EX: the run at the gate takes LOCK_EX on NAME.lock if it
 * can (free: its limit becomes the record), else LOCK_SH (shared or slot
 * holders: their record must be its limit, or it is refused), else there
 * is an exclusive holder (limit 1).  A run that must wait keeps the gate
 * while it waits, so those behind it wait at the gate: a waiting
 * exclusive run is not passed by shared runs that come later, and a
 * waiting shared run not by other shared runs.  The gate is kept only
 * while waiting: a run passing through holds it for a moment, which a
 * run without -w waits out for up to 31ms.
 *
 * Waiting: the locks a waiter needs are taken by flockers that block in
 * flock() on our own open file descriptions: one on the gate, one on
 * NAME.lock (an exclusive run behind shared holders, a shared run behind
 * an exclusive holder), or one per slot file, the first of which to get
 * its slot wins (the others' slots, if they got one too, are given back
 * at once).  Which waiter the kernel wakes first is its choice: the file
 * store does not serve waiters in the order they came.
 *
 * Runs (--once-per): DIR/NAME.run records the last start, in the same
 * key=value lines:
 *
 *	fence=42
 *	host=web1
 *	pid=1234
 *	period=240000
 *	start=1764477067123
 *	end=1764477069456
 *	status=0
 *
 * Its times are the kernel's clock as it stamps files: run_start writes a
 * byte to DIR/NAME.clock and reads that file's mtime back with the statx
 * system call itself (kernel_now()).  A process whose clock is faked in
 * libc (libfaketime shifts clock_gettime() and stat() for the process it
 * is loaded into) thus judges a period by the same clock as every other
 * process on the machine.  The record is written under the lease, to a
 * new file that is fsynced and renamed over the old one.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file/file.h"

#define NFS_MAGIC 0x6969
#define CIFS_MAGIC 0xFF534D42
#define SMB2_MAGIC 0xFE534D42

/* What the flockers of a waiting run wait for. */
enum phase { PH_NONE, PH_GATE, PH_MAIN, PH_SLOTS };

struct lr_store {
	const struct lr_store_req *req;
	char dir[PATH_MAX];
	char path[PATH_MAX];  /* DIR/NAME.lock */
	char fpath[PATH_MAX]; /* DIR/NAME.fence, the counter */
	char gpath[PATH_MAX]; /* DIR/NAME.gate, the turnstile */
	char spath[PATH_MAX]; /* DIR/NAME.lock.K, our slot or seat */
	int fd;          /* the lock file, or -1 */
	int locked;      /* we hold the flock: LOCK_SH if sh, else LOCK_EX */
	int sh;
	dev_t dev;       /* of the file we locked */
	ino_t ino;
	int sfd;         /* our slot's file, locked, or -1 */
	unsigned slot;   /* its number */
	int gate;        /* the gate's fd, or -1 */
	int gated;       /* we hold the gate */
	int inotify_fd; /* while holding, or -1 */
	enum phase phase;
	pid_t *flocker;  /* children blocking in flock() while waiting */
	unsigned nflocker;
	int *wfd;        /* PH_SLOTS: the slot files they wait on, or -1 */
	unsigned nwfd;
	int flocker_rd;  /* their pipe, or -1 */
};

/*
 * The default directory: one whose parent no other user may write to, so
 * that nobody can make it first (a directory of another user's, where
 * every run of ours would be refused, for ever).  Root: /run/leaserun
 * (/run is root's; /run/lock is anyone's).  A user: the runtime
 * directory, $XDG_RUNTIME_DIR or, where cron does not set it,
 * /run/user/UID when that is ours; else under the home directory,
 * $XDG_STATE_HOME (default ~/.local/state), never /tmp.
 */
int lr_file_default_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR"),
		   *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char run[64];
	struct stat sb;
	int n;

	snprintf(run, sizeof(run), "/run/user/%u", (unsigned)geteuid());
	if (geteuid() == 0)
		n = snprintf(buf, len, "/run/leaserun");
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/leaserun", xdg);
	else if (lstat(run, &sb) == 0 && S_ISDIR(sb.st_mode) &&
		 sb.st_uid == geteuid() && !(sb.st_mode & 022))
		n = snprintf(buf, len, "%s/leaserun", run);
	else if (state && state[0] == '/')
		n = snprintf(buf, len, "%s/leaserun", state);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.local/state/leaserun",
			     strcmp(home, "/") ? home : "");
	else
		n = -1;
	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* mkdir -p of dir's parents (0700: they are the user's), for the
 * default under the home directory. */
static void make_parents(const char *dir)
{
	char p[PATH_MAX];
	char *s;

	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
		return;
	for (s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return;
		*s = '/';
	}
}

/* The owner of the last file open_own() refused. */
static uid_t foreign_uid;

/*
 * Opens a file of ours in the lock directory, creating it if needed:
 * created exclusively when new, and when it exists it must be ours (or
 * root's).  In a directory others may write to (a sticky /tmp), a file
 * another user made first is theirs to rewrite at will: a counter handed
 * back to 1, a lock file replaced.  A refused file is -1 with errno
 * EPERM (foreign_uid its owner).
 */
static int open_own(const char *path, int flags)
{
	const int f = flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY;
	struct stat sb;
	int fd, tries;

	for (tries = 0; tries < 3; tries++) {
		fd = open(path, f | O_CREAT | O_EXCL, 0644);
		if (fd >= 0 || errno != EEXIST)
			return fd;
		fd = open(path, f);
		if (fd < 0 && errno == ENOENT)
			continue; /* removed in between: make it */
		if (fd < 0)
			return -1;
		if (fstat(fd, &sb) == 0 &&
		    (sb.st_uid == geteuid() || sb.st_uid == 0))
			return fd;
		foreign_uid = sb.st_uid;
		close(fd);
		errno = EPERM;
		return -1;
	}
	return -1;
}

/* Why open_own() (or open()) of path failed, in err. */
static void cannot_open(struct lr_err *err, const char *path)
{
	if (errno == EPERM)
		lr_err_set(err, "refusing %s: it belongs to uid %u, who may "
				"rewrite it (remove it, or use a directory "
				"others cannot write to)",
			   path, (unsigned)foreign_uid);
	else
		lr_err_set(err, "cannot open %s: %s", path, strerror(errno));
}

/* Makes the default directory if needed and checks nobody else owns it
 * (it may sit in a world-writable /tmp). */
static enum lr_status default_dir(char *dir, size_t len, int create,
				  struct lr_err *err)
{
	struct stat st;

	if (lr_file_default_dir(dir, len) < 0) {
		lr_err_set(err, "no default lock directory for uid %u (no "
				"XDG_RUNTIME_DIR, /run/user/%u or HOME): give "
				"file:///DIR",
			   (unsigned)geteuid(), (unsigned)geteuid());
		return LR_ERROR;
	}
	/* A booted system has /run; a bare chroot may not.  A user's
	 * default under the home directory may need its parents. */
	if (create && geteuid() == 0 && mkdir("/run", 0755) < 0 &&
	    errno != EEXIST) {
		lr_err_set(err, "cannot create /run: %s", strerror(errno));
		return LR_ERROR;
	}
	if (create && geteuid() != 0)
		make_parents(dir);
	if (create && mkdir(dir, geteuid() == 0 ? 0755 : 0700) < 0 &&
	    errno != EEXIST) {
		lr_err_set(err, "cannot create lock directory %s: %s", dir,
			   strerror(errno));
		return LR_ERROR;
	}
	if (lstat(dir, &st) < 0) {
		if (!create && errno == ENOENT)
			return LR_OK;
		lr_err_set(err, "cannot use lock directory %s: %s", dir,
			   strerror(errno));
		return LR_ERROR;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		lr_err_set(err, "refusing lock directory %s: not a directory "
				"owned by uid %u and writable only by it",
			   dir, (unsigned)geteuid());
		return LR_ERROR;
	}
	return LR_OK;
}

/* A directory given in the URL that others may write to without the
 * sticky bit: they could rename, remove or replace our lock and counter
 * files at will.  (With the sticky bit, as in /tmp, they can only make
 * files of their own, which open_own() refuses.)  0, or -1 with err. */
static int shared_dir(const char *dir, struct lr_err *err)
{
	struct stat sb;

	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode) ||
	    !(sb.st_mode & (S_IWGRP | S_IWOTH)) || (sb.st_mode & S_ISVTX))
		return 0;
	lr_err_set(err, "refusing lock directory %s: others may write to it "
			"(mode %04o) and it has no sticky bit, so they could "
			"replace the lock files; chmod o-w,g-w or +t it",
		   dir, (unsigned)(sb.st_mode & 07777));
	return -1;
}

/* The files of lease name in st->dir: NAME.lock, .fence and .gate. */
static enum lr_status set_paths(struct lr_store *st, const char *name,
				struct lr_err *err)
{
	int n = snprintf(st->path, sizeof(st->path), "%s/%s.lock", st->dir,
			 name);

	/* Room for the longest slot file name, too. */
	if (n < 0 || (size_t)n + 8 >= sizeof(st->path) ||
	    snprintf(st->fpath, sizeof(st->fpath), "%s/%s.fence", st->dir,
		     name) >= (int)sizeof(st->fpath) ||
	    snprintf(st->gpath, sizeof(st->gpath), "%s/%s.gate", st->dir,
		     name) >= (int)sizeof(st->gpath)) {
		lr_err_set(err, "lock file name too long");
		return LR_ERROR;
	}
	return LR_OK;
}

static enum lr_status file_open(const struct lr_store_req *req,
				int64_t deadline, struct lr_store **out,
				struct lr_err *err)
{
	struct lr_store *st;
	char dir[PATH_MAX];
	struct statfs sfs;
	enum lr_status rc;

	*out = st = calloc(1, sizeof(*st));
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	st->fd = st->inotify_fd = st->flocker_rd = st->sfd = st->gate = -1;

	if (req->u->hosts[0] && strcmp(req->u->hosts, "localhost") != 0) {
		lr_err_set(err, "a file:// URL names a local directory, not a "
				"host (%s)",
			   req->u->hosts);
		return LR_ERROR;
	}
	if (req->u->nparams) {
		lr_err_set(err, "the file store takes no URL options ('%s')",
			   req->u->params[0].key);
		return LR_ERROR;
	}
	if (req->u->path[0] && strcmp(req->u->path, "/") != 0) {
		if (snprintf(dir, sizeof(dir), "%s", req->u->path) >=
		    (int)sizeof(dir)) {
			lr_err_set(err, "lock directory name too long");
			return LR_ERROR;
		}
	} else {
		rc = default_dir(dir, sizeof(dir), req->token != NULL, err);
		if (rc != LR_OK)
			return rc;
	}
	if (statfs(dir, &sfs) < 0) {
		if (errno == ENOENT && !req->token)
			goto path; /* --status of a store never used */
		lr_err_set(err, "cannot use lock directory %s: %s", dir,
			   strerror(errno));
		return LR_ERROR;
	}
	if (req->u->path[0] && strcmp(req->u->path, "/") != 0 &&
	    shared_dir(dir, err) < 0)
		return LR_ERROR;
	if (sfs.f_type == NFS_MAGIC || sfs.f_type == (typeof(sfs.f_type))CIFS_MAGIC ||
	    sfs.f_type == (typeof(sfs.f_type))SMB2_MAGIC) {
		lr_err_set(err, "refusing lock directory %s: it is on a "
				"network file system, where flock(2) does not "
				"exclude other hosts; use a network store",
			   dir);
		return LR_ERROR;
	}
path:
	memcpy(st->dir, dir, sizeof(st->dir));
	(void)deadline;
	return set_paths(st, req->name, err);
}

/* Reads the lock file into buf (NUL-terminated). */
static void read_body(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
}

static const char *field(const char *body, const char *key, char *val,
			 size_t len)
{
	size_t klen = strlen(key);
	const char *p = body;

	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
			size_t n = strcspn(p + klen + 1, "\n");

			if (n >= len)
				n = len - 1;
			memcpy(val, p + klen + 1, n);
			val[n] = '\0';
			return val;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

static uint64_t body_fence(const char *body)
{
	char v[32];

	if (!field(body, "fence", v, sizeof(v)))
		return 0;
	return strtoull(v, NULL, 10);
}

static int write_body(int fd, const char *body)
{
	size_t n = strlen(body);

	if (pwrite(fd, body, n, 0) != (ssize_t)n || ftruncate(fd, (off_t)n) < 0)
		return -1;
	return 0;
}

/* Does path still name fd's file? */
static int names(const char *path, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) < 0 || a.st_nlink == 0 || stat(path, &b) < 0)
		return 0;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Is the file at our path still the one we locked? */
static int still_ours(struct lr_store *st)
{
	return names(st->path, st->fd);
}

/* Reads a counter file: one decimal number and a newline, or nothing (a
 * new file).  0, or -1 when it holds anything else (errno 0) or cannot
 * be read.  *len gets the file's length. */
static int counter_read(int fd, uint64_t *n, size_t *len)
{
	char buf[32], *end;
	ssize_t got = pread(fd, buf, sizeof(buf) - 1, 0);

	*n = 0;
	*len = 0;
	if (got < 0)
		return -1;
	buf[got] = '\0';
	*len = (size_t)got;
	if (got == 0)
		return 0;
	errno = 0;
	*n = strtoull(buf, &end, 10);
	if (buf[0] < '0' || buf[0] > '9' || errno || strcmp(end, "\n") != 0) {
		errno = 0;
		return -1;
	}
	return 0;
}

/* The counter's value for --status: 0 if there is none. */
static uint64_t counter_peek(const struct lr_store *st)
{
	int fd = open(st->fpath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	uint64_t n = 0;
	size_t len;

	if (fd >= 0) {
		if (counter_read(fd, &n, &len) < 0)
			n = 0;
		close(fd);
	}
	return n;
}

/* Opens and locks the counter file, the one at its path (it may have been
 * removed or replaced while we waited).  The lock is held only for a
 * read, a write and an fsync, never across a wait, so it is polled: a
 * holder stopped inside that moment holds a grant up until its deadline.
 * Returns the fd (the caller closes it, which unlocks), or -1. */
static int counter_lock(struct lr_store *st, int64_t deadline,
			struct lr_err *err)
{
	int64_t pause = 1, left;
	int fd = -1;

	for (;;) {
		if (fd < 0) {
			fd = open_own(st->fpath, O_RDWR);
			if (fd < 0) {
				cannot_open(err, st->fpath);
				return -1;
			}
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (names(st->fpath, fd))
				return fd;
			close(fd); /* not the counter any more */
			fd = -1;
			continue;
		}
		if (errno != EWOULDBLOCK) {
			lr_err_set(err, "cannot lock %s: %s", st->fpath,
				   strerror(errno));
			break;
		}
		left = deadline - lr_now_ms();
		if (left <= 0) {
			lr_err_set(err, "cannot bump the fence counter %s: "
					"another process kept it locked",
				   st->fpath);
			break;
		}
		poll(NULL, 0, (int)(pause < left ? pause : left));
		if (pause < 16)
			pause *= 2;
	}
	close(fd);
	return -1;
}

/* fsync() of the lock directory, so that a new counter file's name
 * survives a crash as its contents do. */
static int sync_dir(const struct lr_store *st)
{
	int fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Bumps the counter to one past the larger of its value and floor (the
 * lock file's fence) and makes it durable before the command can start.
 * LR_OK fills *fence. */
/* The floor of a new fence: the time in microseconds, from the system
 * call itself (libfaketime moves libc's clock_gettime() for the process
 * it is loaded into, not the kernel's); 0 if it cannot be had. */
static uint64_t clock_floor(void)
{
	struct timespec ts;

	if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) < 0 ||
	    ts.tv_sec < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static enum lr_status counter_bump(struct lr_store *st, uint64_t floor,
				   int64_t deadline, uint64_t *fence,
				   struct lr_err *err)
{
	enum lr_status rc = LR_ERROR;
	char buf[32];
	uint64_t n, now;
	size_t old;
	int fd, len;

	fd = counter_lock(st, deadline, err);
	if (fd < 0)
		return LR_ERROR;
	if (counter_read(fd, &n, &old) < 0) {
		lr_err_set(err, "fence counter %s %s", st->fpath,
			   errno ? strerror(errno)
				 : "does not hold a number: repair it or "
				   "remove it");
		goto out;
	}
	*fence = (n > floor ? n : floor) + 1;
	now = clock_floor();
	if (*fence < now)
		*fence = now;
	len = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", *fence);
	if (pwrite(fd, buf, (size_t)len, 0) != len ||
	    (old > (size_t)len && ftruncate(fd, len) < 0) ||
	    fdatasync(fd) < 0 || (old == 0 && sync_dir(st) < 0)) {
		lr_err_set(err, "cannot write %s: %s", st->fpath,
			   strerror(errno));
		goto out;
	}
	rc = LR_OK;
out:
	close(fd);
	return rc;
}

/* DIR/NAME.lock.K (open() left room for it in a PATH_MAX buffer). */
static void slot_path(const struct lr_store *st, unsigned k, char *buf,
		      size_t len)
{
	int n = snprintf(buf, len, "%s.%u", st->path, k);

	if (n < 0 || (size_t)n >= len)
		buf[0] = '\0';
}

static int open_lock(const char *path)
{
	return open_own(path, O_RDWR);
}

/* The limit recorded in NAME.lock's body: 1 unless a line says more. */
static unsigned body_limit(const char *body)
{
	char v[32];
	unsigned long n;

	if (!field(body, "limit", v, sizeof(v)))
		return 1;
	n = strtoul(v, NULL, 10);
	return n >= 1 && n <= LR_LIMIT_MAX ? (unsigned)n : 1;
}

/* Stops the flockers and gives back what they may have locked for us. */
static void flocker_stop(struct lr_store *st)
{
	unsigned i;

	for (i = 0; i < st->nflocker; i++) {
		kill(st->flocker[i], SIGKILL);
		while (waitpid(st->flocker[i], NULL, 0) < 0 && errno == EINTR)
			;
	}
	free(st->flocker);
	st->flocker = NULL;
	st->nflocker = 0;
	for (i = 0; i < st->nwfd; i++)
		if (st->wfd[i] >= 0) {
			flock(st->wfd[i], LOCK_UN);
			close(st->wfd[i]);
		}
	free(st->wfd);
	st->wfd = NULL;
	st->nwfd = 0;
	if (st->flocker_rd >= 0) {
		close(st->flocker_rd);
		st->flocker_rd = -1;
	}
	st->phase = PH_NONE;
}

static void gate_release(struct lr_store *st)
{
	if (st->gate >= 0) {
		if (st->gated)
			flock(st->gate, LOCK_UN);
		close(st->gate);
	}
	st->gate = -1;
	st->gated = 0;
}

/* The last close of an inotify descriptor waits for the kernel's SRCU
 * grace period (milliseconds; seen up to 20ms), so the run never makes
 * it: a spent descriptor stays open, unread, until the next one is spent
 * or the process ends.  Then the group guard (child.c), which shares our
 * descriptor table and exits after us, is the one that waits. */
static void inotify_retire(int fd)
{
	static int spent = -1;

	if (spent >= 0)
		close(spent);
	spent = fd;
}

static void unlock_close(struct lr_store *st)
{
	flocker_stop(st);
	if (st->inotify_fd >= 0) {
		inotify_retire(st->inotify_fd);
		st->inotify_fd = -1;
	}
	if (st->sfd >= 0) {
		flock(st->sfd, LOCK_UN);
		close(st->sfd);
		st->sfd = -1;
	}
	if (st->fd >= 0) {
		if (st->locked)
			flock(st->fd, LOCK_UN);
		close(st->fd);
		st->fd = -1;
	}
	st->locked = st->sh = 0;
	gate_release(st);
}

/* Starts one flocker per fds[i], blocking in flock(fds[i], op) on our own
 * open file description and then writing i (or -errno if flock failed) to
 * the pipe, our wait fd.  The hand-over is then as fast as flock's own.
 * LR_BUSY, or LR_ERROR. */
static enum lr_status flockers_start(struct lr_store *st, enum phase ph,
				     const int *fds, unsigned n, int op,
				     struct lr_err *err)
{
	pid_t parent = getpid();
	unsigned i;
	int p[2];

	st->flocker = calloc(n, sizeof(*st->flocker));
	if (!st->flocker || pipe2(p, O_CLOEXEC) < 0) {
		lr_err_set(err, "cannot wait for %s: %s", st->path,
			   strerror(errno ? errno : ENOMEM));
		return LR_ERROR;
	}
	st->flocker_rd = p[0];
	st->phase = ph;
	for (i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			close(p[1]);
			lr_err_set(err, "cannot wait for %s: fork: %s",
				   st->path, strerror(errno));
			return LR_ERROR;
		}
		if (pid == 0) {
			int v = (int)i;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			close(p[0]);
			if (flock(fds[i], op) < 0)
				v = -errno;
			if (write(p[1], &v, sizeof(v)) != sizeof(v))
				_exit(1);
			_exit(0);
		}
		st->flocker[st->nflocker++] = pid;
	}
	close(p[1]);
	return LR_BUSY;
}

/* Watches what we hold (the lock file and our slot's): replaced or
 * removed is loss, seen at once. */
static enum lr_status watch_held(struct lr_store *st, struct lr_err *err)
{
	const uint32_t mask = IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF;

	st->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (st->inotify_fd < 0 ||
	    inotify_add_watch(st->inotify_fd, st->path, mask) < 0 ||
	    (st->sfd >= 0 &&
	     inotify_add_watch(st->inotify_fd, st->spath, mask) < 0)) {
		lr_err_set(err, "cannot watch %s: %s", st->path,
			   strerror(errno));
		return LR_ERROR;
	}
	return LR_OK;
}

/* Is what we hold still at its paths? */
static int held_ok(struct lr_store *st)
{
	return st->locked && still_ours(st) &&
	       (st->sfd < 0 || names(st->spath, st->sfd));
}

/* After flock succeeded: check the file, bump the fence, write holder.
 * LR_TIMEOUT: the file was replaced, start over. */
static enum lr_status locked(struct lr_store *st, int64_t deadline,
			     struct lr_grant *g, struct lr_err *err)
{
	enum lr_status rc;
	char body[512];
	struct stat sb;
	uint64_t fence;

	st->locked = 1;
	st->sh = 0;
	if (!still_ours(st)) {
		/* Replaced while we waited: start over on the new file. */
		unlock_close(st);
		return LR_TIMEOUT;
	}
	if (fstat(st->fd, &sb) < 0) {
		lr_err_set(err, "cannot stat %s: %s", st->path, strerror(errno));
		return LR_ERROR;
	}
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	read_body(st->fd, body, sizeof(body));
	rc = counter_bump(st, body_fence(body), deadline, &fence, err);
	if (rc != LR_OK)
		return rc;
	snprintf(body, sizeof(body),
		 "fence=%" PRIu64 "\nhost=%s\npid=%ld\nsince=%" PRId64 "\n",
		 fence, st->req->host, st->req->pid, st->req->since_ms);
	if (write_body(st->fd, body) < 0) {
		lr_err_set(err, "cannot write %s: %s", st->path,
			   strerror(errno));
		return LR_ERROR;
	}
	rc = watch_held(st, err);
	if (rc != LR_OK)
		return rc;
	/* The watch was added by name: make sure it is on our file.  If
	 * not, the file was replaced in between: start over. */
	if (!still_ours(st)) {
		unlock_close(st);
		return LR_TIMEOUT;
	}
	gate_release(st);
	g->fence = fence;
	g->ttl_ms = 0;
	g->slot = 0;
	return LR_OK;
}

/* Holding NAME.lock with LOCK_SH and slot file sfd (number k) with
 * LOCK_EX: the grant.  LR_TIMEOUT if either was replaced meanwhile. */
static enum lr_status slot_grant(struct lr_store *st, int sfd, unsigned k,
				 int64_t deadline, struct lr_grant *g,
				 struct lr_err *err)
{
	char body[512], sbody[512];
	enum lr_status rc;
	uint64_t fence, floor;

	st->sfd = sfd;
	st->slot = k;
	slot_path(st, k, st->spath, sizeof(st->spath));
	if (!held_ok(st)) {
		unlock_close(st);
		return LR_TIMEOUT;
	}
	read_body(st->fd, body, sizeof(body));
	read_body(st->sfd, sbody, sizeof(sbody));
	floor = body_fence(body);
	if (body_fence(sbody) > floor)
		floor = body_fence(sbody);
	rc = counter_bump(st, floor, deadline, &fence, err);
	if (rc != LR_OK)
		return rc;
	snprintf(sbody, sizeof(sbody),
		 "fence=%" PRIu64 "\nhost=%s\npid=%ld\nsince=%" PRId64 "\n%s",
		 fence, st->req->host, st->req->pid, st->req->since_ms,
		 st->req->shared ? "shared=1\n" : "");
	if (write_body(st->sfd, sbody) < 0) {
		lr_err_set(err, "cannot write %s: %s", st->spath,
			   strerror(errno));
		return LR_ERROR;
	}
	rc = watch_held(st, err);
	if (rc != LR_OK)
		return rc;
	if (!held_ok(st)) {
		unlock_close(st);
		return LR_TIMEOUT;
	}
	gate_release(st);
	g->fence = fence;
	g->ttl_ms = 0;
	g->slot = st->req->shared ? 0 : k;
	return LR_OK;
}

/* Holding NAME.lock with LOCK_SH: takes a free slot (0..N-1), or for a
 * shared holder the first free seat.  LR_OK with the grant, LR_BUSY when
 * every slot is taken (*fds then holds the N slot files, opened, for the
 * flockers to wait on), LR_TIMEOUT (replaced: start over), LR_ERROR. */
static enum lr_status take_slot(struct lr_store *st, int64_t deadline,
				struct lr_grant *g, int **fds,
				struct lr_err *err)
{
	unsigned n = st->req->shared ? 100000 : st->req->limit, k;
	char path[PATH_MAX];
	int fd;

	*fds = NULL;
	if (!st->req->shared && !(*fds = malloc(n * sizeof(**fds)))) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	for (k = 0; k < n; k++) {
		slot_path(st, k, path, sizeof(path));
		fd = open_lock(path);
		if (fd < 0) {
			cannot_open(err, path);
			goto fail;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			free(*fds);
			*fds = NULL;
			return slot_grant(st, fd, k, deadline, g, err);
		}
		if (errno != EWOULDBLOCK) {
			lr_err_set(err, "cannot lock %s: %s", path,
				   strerror(errno));
			close(fd);
			goto fail;
		}
		if (*fds)
			(*fds)[k] = fd;
		else
			close(fd);
	}
	if (st->req->shared) {
		lr_err_set(err, "no free seat among %u files %s.K", n,
			   st->path);
		return LR_ERROR;
	}
	return LR_BUSY;
fail:
	while (*fds && k-- > 0)
		close((*fds)[k]);
	free(*fds);
	*fds = NULL;
	return LR_ERROR;
}

/* Holding NAME.lock with LOCK_SH (and the gate): a slot now, or the wait
 * for one, keeping both. */
static enum lr_status hold_slot(struct lr_store *st, int64_t deadline,
				struct lr_grant *g, struct lr_err *err)
{
	enum lr_status rc;
	int *fds;

	if (!still_ours(st)) {
		unlock_close(st);
		return LR_TIMEOUT;
	}
	rc = take_slot(st, deadline, g, &fds, err);
	if (rc != LR_BUSY)
		return rc;
	st->wfd = fds;
	st->nwfd = st->req->limit;
	return flockers_start(st, PH_SLOTS, fds, st->req->limit, LOCK_EX, err);
}

/* The gate, taken without waiting for more than a moment: a run passing
 * through holds it for a few syscalls, a waiting run for long.  1 held,
 * 0 busy, -1 error (errno). */
static int gate_try(struct lr_store *st, int64_t deadline)
{
	int pause;

	if (st->gate < 0 && (st->gate = open_lock(st->gpath)) < 0)
		return -1;
	for (pause = 1;; pause *= 2) {
		if (flock(st->gate, LOCK_EX | LOCK_NB) == 0)
			return st->gated = 1;
		if (errno != EWOULDBLOCK)
			return -1;
		if (pause > 16 || lr_now_ms() + pause > deadline)
			return 0;
		poll(NULL, 0, pause);
	}
}

/* NAME.lock is free and ours (LOCK_EX): record our limit and turn the
 * lock into LOCK_SH, then take a slot. */
static enum lr_status first_shared(struct lr_store *st, int64_t deadline,
				   struct lr_grant *g, struct lr_err *err)
{
	char body[512];

	if (!still_ours(st)) {
		unlock_close(st);
		return LR_TIMEOUT;
	}
	read_body(st->fd, body, sizeof(body));
	snprintf(body, sizeof(body), "fence=%" PRIu64 "\nlimit=%u\n",
		 body_fence(body), st->req->limit);
	if (write_body(st->fd, body) < 0) {
		lr_err_set(err, "cannot write %s: %s", st->path,
			   strerror(errno));
		return LR_ERROR;
	}
	if (flock(st->fd, LOCK_SH | LOCK_NB) < 0) {
		lr_err_set(err, "cannot lock %s: %s", st->path,
			   strerror(errno));
		return LR_ERROR;
	}
	st->sh = 1;
	/* (A slot may still be held by a holder whose NAME.lock --break
	 * replaced, until it sees that.) */
	return hold_slot(st, deadline, g, err);
}

/* Holding the gate: looks at NAME.lock and takes what is ours to take,
 * or starts waiting for it (keeping the gate).  Refuses another limit
 * than the holders'. */
static enum lr_status at_gate(struct lr_store *st, int64_t deadline,
			      struct lr_grant *g, struct lr_err *err)
{
	const struct lr_store_req *req = st->req;
	int plain = req->limit == 1 && !req->shared;
	char body[512];
	unsigned lim;

	if (st->fd < 0 && (st->fd = open_lock(st->path)) < 0) {
		cannot_open(err, st->path);
		return LR_ERROR;
	}
	if (flock(st->fd, LOCK_EX | LOCK_NB) == 0) {
		st->locked = 1;
		if (plain)
			return locked(st, deadline, g, err);
		return first_shared(st, deadline, g, err);
	}
	if (errno != EWOULDBLOCK)
		goto lockerr;
	if (flock(st->fd, LOCK_SH | LOCK_NB) == 0) {
		/* Shared or slot holders: their limit is recorded. */
		st->locked = st->sh = 1;
		read_body(st->fd, body, sizeof(body));
		lim = body_limit(body);
		if (lim != req->limit) {
			lr_err_limit(err, req, lim);
			unlock_close(st);
			return LR_ERROR;
		}
		if (plain) {
			/* Behind shared holders: wait for LOCK_EX with the
			 * gate, which stops the shared runs behind us. */
			flock(st->fd, LOCK_UN);
			st->locked = st->sh = 0;
			return flockers_start(st, PH_MAIN, &st->fd, 1, LOCK_EX,
					      err);
		}
		return hold_slot(st, deadline, g, err);
	}
	if (errno != EWOULDBLOCK)
		goto lockerr;
	/* An exclusive holder: its limit is 1. */
	if (req->limit != 1) {
		lr_err_limit(err, req, 1);
		unlock_close(st);
		return LR_ERROR;
	}
	return flockers_start(st, PH_MAIN, &st->fd, 1,
			      req->shared ? LOCK_SH : LOCK_EX, err);
lockerr:
	lr_err_set(err, "cannot lock %s: %s", st->path, strerror(errno));
	return LR_ERROR;
}

/* A flocker reported: go on from what it got for us. */
static enum lr_status flocker_done(struct lr_store *st, int64_t deadline,
				   struct lr_grant *g, struct lr_err *err)
{
	enum phase ph = st->phase;
	int v = -1, fd;

	if (read(st->flocker_rd, &v, sizeof(v)) != sizeof(v)) {
		flocker_stop(st);
		lr_err_set(err, "cannot lock %s: its waiting helper ended",
			   st->path);
		return LR_ERROR;
	}
	if (v < 0) {
		flocker_stop(st);
		lr_err_set(err, "cannot lock %s: %s", st->path, strerror(-v));
		return LR_ERROR;
	}
	if (ph == PH_SLOTS) {
		/* Ours now; the other flockers' slots go back. */
		fd = st->wfd[v];
		st->wfd[v] = -1;
		flocker_stop(st);
		return slot_grant(st, fd, (unsigned)v, deadline, g, err);
	}
	flocker_stop(st);
	if (ph == PH_GATE) {
		st->gated = 1;
		return at_gate(st, deadline, g, err);
	}
	/* PH_MAIN: NAME.lock, as asked. */
	st->locked = 1;
	if (!st->req->shared)
		return locked(st, deadline, g, err);
	st->sh = 1;
	return hold_slot(st, deadline, g, err);
}

/* The gate stays busy: a run waits there, so the name is held.  Looks at
 * the holders' limit without the gate, to refuse another limit now
 * rather than after that wait: LOCK_SH on NAME.lock, held for a moment,
 * keeps the record still (only LOCK_EX writes it); LOCK_SH refused means
 * an exclusive holder, whose limit is 1 (a run that records a limit
 * holds LOCK_EX only while it holds the gate, for a moment).  LR_OK when
 * the limits agree (or cannot be told), else LR_ERROR. */
static enum lr_status peek_limit(struct lr_store *st, struct lr_err *err)
{
	unsigned lim = 1;
	char body[512];

	if (flock(st->fd, LOCK_SH | LOCK_NB) == 0) {
		read_body(st->fd, body, sizeof(body));
		flock(st->fd, LOCK_UN);
		lim = body_limit(body);
	} else if (errno != EWOULDBLOCK) {
		return LR_OK;
	}
	if (lim == st->req->limit)
		return LR_OK;
	lr_err_limit(err, st->req, lim);
	return LR_ERROR;
}

/* One attempt from nothing held. */
static enum lr_status try_fresh(struct lr_store *st, int64_t deadline,
				struct lr_grant *g, struct lr_err *err)
{
	int r;

	if (st->fd < 0 && (st->fd = open_lock(st->path)) < 0) {
		cannot_open(err, st->path);
		return LR_ERROR;
	}
	/* The plain lease when it is free: no gate. */
	if (st->req->limit == 1 && !st->req->shared) {
		if (flock(st->fd, LOCK_EX | LOCK_NB) == 0)
			return locked(st, deadline, g, err);
		if (errno != EWOULDBLOCK) {
			lr_err_set(err, "cannot lock %s: %s", st->path,
				   strerror(errno));
			return LR_ERROR;
		}
	}
	r = gate_try(st, deadline);
	if (r < 0 && errno == EPERM) {
		cannot_open(err, st->gpath);
		return LR_ERROR;
	}
	if (r < 0) {
		lr_err_set(err, "cannot lock %s: %s", st->gpath,
			   strerror(errno));
		return LR_ERROR;
	}
	if (r == 0) {
		if (peek_limit(st, err) != LR_OK) {
			unlock_close(st);
			return LR_ERROR;
		}
		return flockers_start(st, PH_GATE, &st->gate, 1, LOCK_EX, err);
	}
	return at_gate(st, deadline, g, err);
}

static enum lr_status file_acquire(struct lr_store *st, int64_t deadline,
				   struct lr_grant *g, struct lr_err *err)
{
	enum lr_status rc;
	int tries;

	for (tries = 0; tries < 16; tries++) {
		if (st->flocker_rd >= 0) {
			struct pollfd pfd = { st->flocker_rd, POLLIN, 0 };

			if (poll(&pfd, 1, 0) <= 0) {
				/* --break put a new file at the path: the
				 * flockers wait on a dead one.  Start over. */
				if (st->fd >= 0 && st->phase != PH_GATE &&
				    !names(st->path, st->fd)) {
					unlock_close(st);
					continue;
				}
				return LR_BUSY;
			}
			rc = flocker_done(st, deadline, g, err);
		} else {
			rc = try_fresh(st, deadline, g, err);
		}
		if (rc != LR_TIMEOUT)
			return rc;
		if (lr_now_ms() >= deadline)
			break;
	}
	return LR_BUSY;
}

static int file_wait_fd(struct lr_store *st, short *events)
{
	*events = POLLIN;
	if (st->locked && st->inotify_fd >= 0)
		return st->inotify_fd;
	return st->flocker_rd;
}

static enum lr_status file_renew(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	(void)deadline;
	if (!held_ok(st)) {
		lr_err_set(err, "lock file %s was deleted or replaced",
			   st->sfd >= 0 && still_ours(st) ? st->spath
							 : st->path);
		return LR_LOST;
	}
	return LR_OK;
}

static enum lr_status file_process(struct lr_store *st, short revents,
				   int64_t deadline, struct lr_err *err)
{
	char buf[4096];

	(void)revents;
	if (!st->locked || st->inotify_fd < 0)
		return LR_OK; /* a flocker finished: acquire() reads it */
	while (read(st->inotify_fd, buf, sizeof(buf)) > 0)
		;
	return file_renew(st, deadline, err);
}

/* Before the command starts: has the watch on what we hold seen
 * anything since the grant armed it?  Only then look at the paths. */
static enum lr_status file_check(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	char buf[4096];

	if (st->locked && st->inotify_fd >= 0 &&
	    read(st->inotify_fd, buf, sizeof(buf)) < 0 && errno == EAGAIN)
		return LR_OK;
	return file_renew(st, deadline, err);
}

/* Rewrites fd's body to its fence line alone: the counter stays, the
 * holder goes. */
static void keep_fence(int fd)
{
	char body[512], fence[32];

	read_body(fd, body, sizeof(body));
	if (!field(body, "fence", fence, sizeof(fence)))
		strcpy(fence, "0");
	snprintf(body, sizeof(body), "fence=%s\n", fence);
	write_body(fd, body);
}

static enum lr_status file_release(struct lr_store *st, int64_t deadline,
				   struct lr_err *err)
{
	enum lr_status rc = LR_OK;

	(void)deadline;
	if (!st->locked)
		return LR_OK;
	if (!held_ok(st)) {
		lr_err_set(err, "lock file %s was deleted or replaced",
			   st->sfd >= 0 && still_ours(st) ? st->spath
							 : st->path);
		rc = LR_LOST;
	} else if (st->sfd >= 0) {
		/* NAME.lock keeps the limit for the other holders. */
		keep_fence(st->sfd);
	} else {
		keep_fence(st->fd);
	}
	unlock_close(st);
	return rc;
}

/* The device /proc/locks names for fd's file: its superblock's, which
 * /proc/self/mountinfo gives on the line of the file's mount.  stat()'s
 * st_dev is another on btrfs, where each subvolume has a device of its
 * own; it stands in where the mount cannot be found. */
static dev_t locks_dev(int fd, dev_t st_dev)
{
	dev_t dev = st_dev;
#ifdef STATX_MNT_ID
	struct statx sx;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) != 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return st_dev;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return st_dev;
	while (getline(&line, &cap, f) > 0) {
		unsigned long long id;
		unsigned maj, min;

		if (sscanf(line, "%llu %*u %u:%u", &id, &maj, &min) == 3 &&
		    id == (unsigned long long)sx.stx_mnt_id) {
			dev = makedev(maj, min);
			break;
		}
	}
	free(line);
	fclose(f);
#else
	(void)fd;
#endif
	return dev;
}

/* Who holds a flock on dev:ino?  Reads /proc/locks, which is what lslocks
 * does; it takes no lock, so --status never gets in the way.  2 an
 * exclusive lock, 1 a shared one, 0 none, -1 /proc/locks unreadable.
 * *blocked (unless NULL) gets how many wait for a flock on it: the
 * kernel lists them below the lock they wait for, as "N: -> FLOCK ...". */
static int flock_held(dev_t dev, ino_t ino, long *blocked)
{
	char line[256];
	FILE *f = fopen("/proc/locks", "re");
	int held = 0;

	if (blocked)
		*blocked = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long i;
		char type[16], access[16];
		char *waits = strstr(line, "->"), *p = strchr(line, ':');
		long pid;

		if (waits)
			p = waits + 1;
		if (!p || sscanf(p + 1, " %15s %*s %15s %ld %x:%x:%llu", type,
				 access, &pid, &maj, &min, &i) != 6)
			continue;
		if (strcmp(type, "FLOCK") != 0 || maj != major(dev) ||
		    min != minor(dev) || i != (unsigned long long)ino)
			continue;
		if (waits) {
			if (blocked)
				(*blocked)++;
		} else if (held < 2) {
			held = strcmp(access, "WRITE") == 0 ? 2 : 1;
		}
	}
	fclose(f);
	return held;
}

/* Opens path read-only and says whether it is locked (flock_held()),
 * with its body in buf and how many wait for it in *blocked (unless
 * NULL; 0 when it does not exist).  -2 when it does not exist. */
static int peek(const char *path, char *buf, size_t len, long *blocked,
		struct lr_err *err)
{
	struct stat sb;
	int fd, held;

	if (blocked)
		*blocked = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return -2;
		lr_err_set(err, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) < 0) {
		lr_err_set(err, "cannot stat %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	read_body(fd, buf, len);
	held = flock_held(locks_dev(fd, sb.st_dev), sb.st_ino, blocked);
	close(fd);
	if (held < 0)
		lr_err_set(err, "cannot read /proc/locks: %s", strerror(errno));
	return held;
}

/* A holder whose lock file has body: one entry of info. */
static enum lr_status add_holder(struct lr_info *info, const char *body,
				 unsigned slot, struct lr_err *err)
{
	struct lr_holder *h = lr_info_add(info);
	char v[256];

	if (!h) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	h->slot = slot;
	h->fence = body_fence(body);
	if (field(body, "shared", v, sizeof(v)) && strcmp(v, "1") == 0) {
		h->shared = 1;
		h->slot = 0;
	}
	if (field(body, "host", v, sizeof(v)))
		snprintf(h->host, sizeof(h->host), "%s", v);
	if (field(body, "pid", v, sizeof(v)))
		h->pid = strtol(v, NULL, 10);
	if (field(body, "since", v, sizeof(v)))
		h->since_ms = strtoll(v, NULL, 10);
	return LR_OK;
}

/* The number K of a slot file's name NAME.lock.K (base: "NAME.lock."),
 * or -1. */
static long slot_of(const char *file, const char *base)
{
	size_t n = strlen(base);
	char *end;
	long k;

	if (strncmp(file, base, n) != 0 || file[n] < '0' || file[n] > '9' ||
	    (file[n] == '0' && file[n + 1]))
		return -1;
	k = strtol(file + n, &end, 10);
	return *end || k > 100000 ? -1 : k;
}

/* The holders of slot files (and seats): every NAME.lock.K locked now.
 * *most gets the most runs waiting for one slot file: the first waiter of
 * a semaphore waits for every slot at once, the others at the gate. */
static enum lr_status slot_holders(struct lr_store *st, struct lr_info *info,
				   long *most, struct lr_err *err)
{
	char base[PATH_MAX], path[PATH_MAX], body[512];
	enum lr_status rc = LR_OK;
	struct dirent *e;
	DIR *d;
	long k;

	snprintf(base, sizeof(base), "%s.lock.", st->req->name);
	d = opendir(st->dir);
	if (!d) {
		lr_err_set(err, "cannot read %s: %s", st->dir, strerror(errno));
		return LR_ERROR;
	}
	*most = 0;
	while (rc == LR_OK && (e = readdir(d))) {
		long blocked;
		int held;

		if ((k = slot_of(e->d_name, base)) < 0)
			continue;
		slot_path(st, (unsigned)k, path, sizeof(path));
		held = peek(path, body, sizeof(body), &blocked, err);
		if (blocked > *most)
			*most = blocked;
		if (held == -1)
			rc = LR_ERROR;
		else if (held > 0)
			rc = add_holder(info, body, (unsigned)k, err);
	}
	closedir(d);
	return rc;
}

/* The runs waiting for the name: for NAME.lock (a plain run, or the
 * first in line behind holders of the other kind), at the gate, and for
 * the slots (held: NAME.lock is held shared).  The kernel wakes them in
 * an order of its own, so there is no first in line to name. */
static enum lr_status waiters(struct lr_store *st, long main, int held,
			      struct lr_info *info, struct lr_err *err)
{
	char body[8];
	long gate = 0, slots = 0;
	enum lr_status rc = LR_OK;

	if (peek(st->gpath, body, sizeof(body), &gate, err) == -1)
		return LR_ERROR;
	if (held == 1)
		rc = slot_holders(st, info, &slots, err);
	info->waiters = main + gate + slots;
	return rc;
}

static enum lr_status file_inspect(struct lr_store *st, int64_t deadline,
				   struct lr_info *info, struct lr_err *err)
{
	char body[512];
	uint64_t n;
	long main;
	int held;

	(void)deadline;
	held = peek(st->path, body, sizeof(body), &main, err);
	if (held == -1)
		return LR_ERROR;
	if (held == -2) {
		info->fence = counter_peek(st); /* free */
		return waiters(st, 0, 0, info, err);
	}
	if (held == 2) {
		info->limit = 1;
		if (add_holder(info, body, 0, err) != LR_OK)
			return LR_ERROR;
		return waiters(st, main, held, info, err);
	}
	if (held == 1) {
		info->limit = body_limit(body);
		return waiters(st, main, held, info, err);
	}
	/* Free.  The last granted: a holder on a removed lock file may
	 * have bumped the counter past this file's. */
	info->fence = body_fence(body);
	n = counter_peek(st);
	if (n > info->fence)
		info->fence = n;
	return waiters(st, main, held, info, err);
}

/* The lease of a directory entry "NAME.lock": 1 with name filled, else 0
 * (slot files NAME.lock.K, counters, gates, run records). */
static int lock_name(const char *file, char *name, size_t len)
{
	size_t n = strlen(file);

	if (n <= 5 || n - 5 >= len || strcmp(file + n - 5, ".lock") != 0 ||
	    file[0] == '.')
		return 0;
	memcpy(name, file, n - 5);
	name[n - 5] = '\0';
	return 1;
}

/* --list: every NAME.lock of the directory, inspected as --status
 * inspects one, a lease at a time (readdir(3) reads the directory a
 * page at a time).  A directory not made yet holds no lease. */
static enum lr_status file_list(struct lr_store *st, const char *pattern,
				lr_list_fn fn, void *arg, int64_t deadline,
				struct lr_err *err)
{
	const struct lr_store_req *saved_req = st->req;
	struct lr_store_req req = *saved_req;
	enum lr_status rc = LR_OK;
	char name[NAME_MAX + 1];
	struct lr_info info;
	struct dirent *e;
	DIR *d = opendir(st->dir);
	int stop = 0;

	if (!d) {
		if (errno == ENOENT)
			return LR_OK;
		lr_err_set(err, "cannot read %s: %s", st->dir, strerror(errno));
		return LR_ERROR;
	}
	st->req = &req; /* inspect() reads the name there */
	while (rc == LR_OK && !stop && (e = readdir(d))) {
		if (!lock_name(e->d_name, name, sizeof(name)) ||
		    fnmatch(pattern, name, 0) != 0)
			continue;
		req.name = name;
		lr_info_init(&info);
		rc = set_paths(st, name, err);
		if (rc == LR_OK)
			rc = file_inspect(st, deadline, &info, err);
		lr_info_sort(&info);
		if (rc == LR_OK)
			stop = fn(arg, name, &info) != 0;
		lr_info_free(&info);
	}
	closedir(d);
	st->req = saved_req;
	return rc;
}

/* Replaces the lock file path by a fresh one that keeps its fence line:
 * its holder sees its file replaced (loss) and newcomers lock the new
 * one. */
static enum lr_status replace(const char *path, struct lr_err *err)
{
	char tmp[PATH_MAX + 32], body[512], out[64];
	int fd, n;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return LR_OK;
		lr_err_set(err, "cannot open %s: %s", path, strerror(errno));
		return LR_ERROR;
	}
	read_body(fd, body, sizeof(body));
	close(fd);
	n = snprintf(tmp, sizeof(tmp), "%s.break.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		lr_err_set(err, "lock file name too long");
		return LR_ERROR;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  0644);
	if (fd < 0) {
		lr_err_set(err, "cannot create %s: %s", tmp, strerror(errno));
		return LR_ERROR;
	}
	/* The counter file is untouched: a holder that bumped it while we
	 * read the old lock file cannot share its fence with the next. */
	snprintf(out, sizeof(out), "fence=%" PRIu64 "\n", body_fence(body));
	if (write_body(fd, out) < 0 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		lr_err_set(err, "cannot replace %s: %s", path, strerror(errno));
		unlink(tmp);
		return LR_ERROR;
	}
	return LR_OK;
}

/* All: NAME.lock is replaced, which every holder (LOCK_EX or LOCK_SH)
 * sees as loss; its new copy records no limit.  Slot K of a semaphore:
 * NAME.lock.K is replaced; slot 0 of a plain or shared lease is the
 * whole lease. */
static enum lr_status file_break(struct lr_store *st, int slot,
				 int64_t deadline, struct lr_err *err)
{
	char body[512], path[PATH_MAX];
	int held;

	(void)deadline;
	if (slot < 0)
		return replace(st->path, err);
	held = peek(st->path, body, sizeof(body), NULL, err);
	if (held == -1)
		return LR_ERROR;
	if (held == 1 && body_limit(body) > 1) {
		slot_path(st, (unsigned)slot, path, sizeof(path));
		return replace(path, err);
	}
	return slot == 0 ? replace(st->path, err) : LR_OK;
}

/* ---- runs (--once-per) ------------------------------------------------ */

/* DIR/NAME<suffix> into buf; -1 if it does not fit. */
static int run_path(const struct lr_store *st, const char *suffix, char *buf,
		    size_t len)
{
	int n = snprintf(buf, len, "%s/%s%s", st->dir, st->req->name, suffix);

	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* The kernel's clock now, in Unix ms, as it stamps a file it writes (see
 * the top).  -1 with err if the clock file cannot be written. */
static int64_t kernel_now(const struct lr_store *st, struct lr_err *err)
{
	char path[PATH_MAX];
	int64_t ms = -1;
	int fd;

	if (run_path(st, ".clock", path, sizeof(path)) < 0) {
		lr_err_set(err, "lock file name too long");
		return -1;
	}
	fd = open_own(path, O_RDWR);
	if (fd < 0) {
		cannot_open(err, path);
		goto out;
	}
	if (pwrite(fd, "\n", 1, 0) != 1) {
		lr_err_set(err, "cannot write %s: %s", path, strerror(errno));
		goto out;
	}
#ifdef SYS_statx
	{
		struct statx sx;

		if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_MTIME,
			    &sx) == 0 &&
		    (sx.stx_mask & STATX_MTIME))
			ms = (int64_t)sx.stx_mtime.tv_sec * 1000 +
			     sx.stx_mtime.tv_nsec / 1000000;
	}
#else
	{
		struct stat sb;

		if (fstat(fd, &sb) == 0)
			ms = (int64_t)sb.st_mtim.tv_sec * 1000 +
			     sb.st_mtim.tv_nsec / 1000000;
	}
#endif
	if (ms < 0)
		lr_err_set(err, "cannot read the time of %s: %s", path,
			   strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	return ms;
}

/* Reads DIR/NAME.run into run (known 0 if there is none).  0, or -1 with
 * err. */
static int run_read(const struct lr_store *st, struct lr_run *run,
		    struct lr_err *err)
{
	char path[PATH_MAX], body[1024], v[256];
	int fd;

	lr_run_init(run);
	if (run_path(st, ".run", path, sizeof(path)) < 0) {
		lr_err_set(err, "lock file name too long");
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		lr_err_set(err, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	read_body(fd, body, sizeof(body));
	close(fd);
	if (!field(body, "start", v, sizeof(v)))
		return 0; /* not a record (yet) */
	run->known = 1;
	run->start_ms = strtoll(v, NULL, 10);
	run->fence = body_fence(body);
	if (field(body, "host", v, sizeof(v)))
		snprintf(run->host, sizeof(run->host), "%s", v);
	if (field(body, "pid", v, sizeof(v)))
		run->pid = strtol(v, NULL, 10);
	if (field(body, "period", v, sizeof(v)))
		run->period_ms = strtoll(v, NULL, 10);
	if (field(body, "end", v, sizeof(v)))
		run->end_ms = strtoll(v, NULL, 10);
	if (field(body, "status", v, sizeof(v)))
		run->status = atoi(v);
	return 0;
}

/* Replaces DIR/NAME.run with run, durably: a new file, fsynced, renamed
 * over the old one, and the directory fsynced. */
static enum lr_status run_write(const struct lr_store *st,
				const struct lr_run *run, struct lr_err *err)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32], body[1024], end[64] = "";
	int fd, n;

	if (run_path(st, ".run", path, sizeof(path)) < 0 ||
	    snprintf(tmp, sizeof(tmp), "%s.%ld", path, (long)getpid()) >=
		    (int)sizeof(tmp)) {
		lr_err_set(err, "lock file name too long");
		return LR_ERROR;
	}
	if (run->end_ms)
		snprintf(end, sizeof(end), "end=%" PRId64 "\nstatus=%d\n",
			 run->end_ms, run->status);
	n = snprintf(body, sizeof(body),
		     "fence=%" PRIu64 "\nhost=%s\npid=%ld\nperiod=%" PRId64
		     "\nstart=%" PRId64 "\n%s",
		     run->fence, run->host, run->pid, run->period_ms,
		     run->start_ms, end);
	/* Ours alone: a stale one of a dead run with our pid goes first,
	 * and what someone else put there is refused, not written into. */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  0644);
	if (fd < 0 || write(fd, body, (size_t)n) != n || fdatasync(fd) < 0 ||
	    close(fd) < 0 || (fd = -1, rename(tmp, path) < 0) ||
	    sync_dir(st) < 0) {
		lr_err_set(err, "cannot write %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		return LR_ERROR;
	}
	return LR_OK;
}

static enum lr_status file_run_start(struct lr_store *st, int64_t period_ms,
				     uint64_t fence, int64_t deadline,
				     struct lr_run *last, struct lr_err *err)
{
	struct lr_run run;
	int64_t now;

	(void)deadline;
	if (!st->locked) {
		lr_err_set(err, "file store: run_start without the lease");
		return LR_ERROR;
	}
	if (run_read(st, &run, err) < 0 || (now = kernel_now(st, err)) < 0)
		return LR_ERROR;
	if (run.known && run.fence == fence)
		return LR_OK; /* ours already */
	/* Held back until the kernel's clock reaches start + period: a
	 * clock set back after the start holds it back longer, never
	 * shorter. */
	if (run.known && now < run.start_ms + period_ms) {
		*last = run;
		lr_run_times(last, now, period_ms);
		return LR_BUSY;
	}
	lr_run_init(&run);
	run.known = 1;
	run.fence = fence;
	snprintf(run.host, sizeof(run.host), "%s",
		 st->req->host ? st->req->host : "");
	run.pid = st->req->pid;
	run.period_ms = period_ms;
	run.start_ms = now;
	return run_write(st, &run, err) == LR_OK ? LR_OK : LR_ERROR;
}

/* Only while the lease is still ours on the live lock file: the record
 * is read, changed and replaced under the lease, and after a loss a new
 * holder may be deciding on it.  (--break between the check and the
 * rename can still let the end overwrite a start that came after it.) */
static enum lr_status file_run_end(struct lr_store *st, uint64_t fence,
				   int status, int64_t deadline,
				   struct lr_err *err)
{
	struct lr_run run;
	int64_t now;

	(void)deadline;
	if (run_read(st, &run, err) < 0)
		return LR_ERROR;
	if (!run.known || run.fence != fence ||
	    !st->locked || !still_ours(st))
		return LR_OK;
	if ((now = kernel_now(st, err)) < 0)
		return LR_ERROR;
	run.end_ms = now;
	run.status = status;
	return run_write(st, &run, err);
}

static enum lr_status file_run_last(struct lr_store *st, int64_t deadline,
				    struct lr_run *last, struct lr_err *err)
{
	struct lr_err ignored;
	int64_t now;

	(void)deadline;
	if (run_read(st, last, err) < 0)
		return LR_ERROR;
	/* Without the right to write the clock file, no "ago": never the
	 * local clock. */
	if (last->known && last->period_ms &&
	    (now = kernel_now(st, &ignored)) >= 0)
		lr_run_times(last, now, 0);
	return LR_OK;
}

static void file_close(struct lr_store *st)
{
	if (!st)
		return;
	unlock_close(st);
	free(st);
}

const struct lr_store_ops lr_file_ops = {
	.abi = LR_STORE_ABI,
	.name = "file",
	.caps = LR_CAP_LIMIT | LR_CAP_SHARED,
	.open = file_open,
	.acquire = file_acquire,
	.wait_fd = file_wait_fd,
	.process = file_process,
	.check = file_check,
	.renew = file_renew,
	.release = file_release,
	.inspect = file_inspect,
	.break_lease = file_break,
	.close = file_close,
	.run_start = file_run_start,
	.run_end = file_run_end,
	.run_last = file_run_last,
	.list = file_list,
};
