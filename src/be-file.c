/*
 * be-file.c - the built-in store: flock(2) on DIR/NAME.lock.
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
 * versions kept the counter), and reaches the disk before the command
 * starts.  Removing both files, or a reboot with DIR on a tmpfs, starts
 * the count again.
 *
 * Waiting: one attempt is flock(LOCK_NB).  When it is busy we fork a
 * helper that blocks in flock(LOCK_EX) on the same open file description
 * (so the lock it gets is ours) and writes one byte to a pipe; the pipe is
 * our wait fd.  The hand-over is then as fast as flock's own.
 *
 * Loss: the lock file deleted, renamed or replaced while we hold it means
 * a newcomer can lock a new file with the same name.  An inotify watch on
 * our file is our wait fd while holding, so that is seen at once; renew()
 * checks the same thing.  --break replaces the file with a fresh copy that
 * keeps the fence line, which the holder sees as loss.
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

#include <errno.h>
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
#include <unistd.h>

#include "be-file.h"

#define NFS_MAGIC 0x6969
#define CIFS_MAGIC 0xFF534D42
#define SMB2_MAGIC 0xFE534D42

struct lr_store {
	const struct lr_store_req *req;
	char dir[PATH_MAX];
	char path[PATH_MAX];  /* DIR/NAME.lock */
	char fpath[PATH_MAX]; /* DIR/NAME.fence, the counter */
	int fd;          /* the lock file, or -1 */
	int locked;      /* we hold the flock */
	dev_t dev;       /* of the file we locked */
	ino_t ino;
	int notify;      /* inotify fd while holding, or -1 */
	pid_t helper;    /* blocking-flock helper while waiting, or 0 */
	int helper_rd;   /* its pipe, or -1 */
	uint64_t run_fence; /* the fence run_start() recorded, or 0 */
};

int lr_file_default_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (geteuid() == 0)
		n = snprintf(buf, len, "/run/lock/leaserun");
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/leaserun", xdg);
	else
		n = snprintf(buf, len, "/tmp/leaserun-%u", (unsigned)geteuid());
	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Makes the default directory if needed and checks nobody else owns it
 * (it may sit in a world-writable /tmp). */
static enum lr_status default_dir(char *dir, size_t len, int create,
				  struct lr_err *err)
{
	struct stat st;

	if (lr_file_default_dir(dir, len) < 0) {
		lr_err_set(err, "the default lock directory name is too long");
		return LR_ERROR;
	}
	/* A booted system has /run/lock; a bare chroot may not. */
	if (create && geteuid() == 0 && mkdir("/run/lock", 0755) < 0 &&
	    errno != EEXIST) {
		lr_err_set(err, "cannot create /run/lock: %s", strerror(errno));
		return LR_ERROR;
	}
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

static enum lr_status file_open(const struct lr_store_req *req,
				int64_t deadline, struct lr_store **out,
				struct lr_err *err)
{
	struct lr_store *st;
	char dir[PATH_MAX];
	struct statfs sfs;
	enum lr_status rc;
	int n;

	*out = st = calloc(1, sizeof(*st));
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	st->fd = st->notify = st->helper_rd = -1;

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
	n = snprintf(st->path, sizeof(st->path), "%s/%s.lock", dir, req->name);
	if (n < 0 || (size_t)n >= sizeof(st->path) ||
	    snprintf(st->fpath, sizeof(st->fpath), "%s/%s.fence", dir,
		     req->name) >= (int)sizeof(st->fpath)) {
		lr_err_set(err, "lock file name too long");
		return LR_ERROR;
	}
	(void)deadline;
	return LR_OK;
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
			fd = open(st->fpath,
				  O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
					  O_NOCTTY,
				  0644);
			if (fd < 0) {
				lr_err_set(err, "cannot open %s: %s", st->fpath,
					   strerror(errno));
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
static enum lr_status counter_bump(struct lr_store *st, uint64_t floor,
				   int64_t deadline, uint64_t *fence,
				   struct lr_err *err)
{
	enum lr_status rc = LR_ERROR;
	char buf[32];
	uint64_t n;
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

static void helper_stop(struct lr_store *st)
{
	if (st->helper > 0) {
		kill(st->helper, SIGKILL);
		while (waitpid(st->helper, NULL, 0) < 0 && errno == EINTR)
			;
		st->helper = 0;
	}
	if (st->helper_rd >= 0) {
		close(st->helper_rd);
		st->helper_rd = -1;
	}
}

static void unlock_close(struct lr_store *st)
{
	helper_stop(st);
	if (st->notify >= 0) {
		close(st->notify);
		st->notify = -1;
	}
	if (st->fd >= 0) {
		if (st->locked)
			flock(st->fd, LOCK_UN);
		close(st->fd);
		st->fd = -1;
	}
	st->locked = 0;
}

/* Starts a helper blocking in flock() on our open file description. */
static enum lr_status helper_start(struct lr_store *st, struct lr_err *err)
{
	pid_t parent = getpid();
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0) {
		lr_err_set(err, "cannot wait for %s: %s", st->path,
			   strerror(errno));
		return LR_ERROR;
	}
	st->helper = fork();
	if (st->helper < 0) {
		close(p[0]);
		close(p[1]);
		st->helper = 0;
		lr_err_set(err, "cannot wait for %s: fork: %s", st->path,
			   strerror(errno));
		return LR_ERROR;
	}
	if (st->helper == 0) {
		char c = 'x';

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(p[0]);
		if (flock(st->fd, LOCK_EX) < 0)
			c = 'e';
		if (write(p[1], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	st->helper_rd = p[0];
	return LR_BUSY;
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
	st->notify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (st->notify < 0 ||
	    inotify_add_watch(st->notify, st->path,
			      IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF) < 0) {
		lr_err_set(err, "cannot watch %s: %s", st->path,
			   strerror(errno));
		return LR_ERROR;
	}
	/* The watch was added by name: make sure it is on our file.  If
	 * not, the file was replaced in between: start over. */
	if (!still_ours(st)) {
		unlock_close(st);
		return LR_TIMEOUT;
	}
	g->fence = fence;
	g->ttl_ms = 0;
	return LR_OK;
}

static enum lr_status file_acquire(struct lr_store *st, int64_t deadline,
				   struct lr_grant *g, struct lr_err *err)
{
	enum lr_status rc;
	int tries;

	for (tries = 0; tries < 16; tries++) {
		if (st->helper_rd >= 0) {
			struct pollfd pfd = { st->helper_rd, POLLIN, 0 };
			char c;

			if (poll(&pfd, 1, 0) <= 0) {
				/* --break put a new file at the path: the
				 * helper waits on a dead one.  Start over. */
				if (!names(st->path, st->fd)) {
					unlock_close(st);
					continue;
				}
				return LR_BUSY;
			}
			if (read(st->helper_rd, &c, 1) != 1 || c != 'x') {
				helper_stop(st);
				lr_err_set(err, "cannot lock %s", st->path);
				return LR_ERROR;
			}
			helper_stop(st);
			rc = locked(st, deadline, g, err);
		} else {
			if (st->fd < 0) {
				st->fd = open(st->path,
					      O_RDWR | O_CREAT | O_CLOEXEC |
						      O_NOFOLLOW | O_NOCTTY,
					      0644);
				if (st->fd < 0) {
					lr_err_set(err, "cannot open %s: %s",
						   st->path, strerror(errno));
					return LR_ERROR;
				}
			}
			if (flock(st->fd, LOCK_EX | LOCK_NB) < 0) {
				if (errno != EWOULDBLOCK) {
					lr_err_set(err, "cannot lock %s: %s",
						   st->path, strerror(errno));
					return LR_ERROR;
				}
				return helper_start(st, err);
			}
			rc = locked(st, deadline, g, err);
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
	if (st->locked)
		return st->notify;
	return st->helper_rd;
}

static enum lr_status file_renew(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	(void)deadline;
	if (!st->locked || !still_ours(st)) {
		lr_err_set(err, "lock file %s was deleted or replaced",
			   st->path);
		return LR_LOST;
	}
	return LR_OK;
}

static enum lr_status file_process(struct lr_store *st, short revents,
				   int64_t deadline, struct lr_err *err)
{
	char buf[4096];

	if (!st->locked)
		return LR_OK; /* the helper finished: acquire() reads it */
	while (read(st->notify, buf, sizeof(buf)) > 0)
		;
	return file_renew(st, deadline, err);
}

static enum lr_status file_release(struct lr_store *st, int64_t deadline,
				   struct lr_err *err)
{
	char body[512], fence[32];
	enum lr_status rc = LR_OK;

	(void)deadline;
	if (!st->locked)
		return LR_OK;
	if (!still_ours(st)) {
		lr_err_set(err, "lock file %s was deleted or replaced",
			   st->path);
		rc = LR_LOST;
	} else {
		/* Keep the counter, drop the holder. */
		read_body(st->fd, body, sizeof(body));
		if (!field(body, "fence", fence, sizeof(fence)))
			strcpy(fence, "0");
		snprintf(body, sizeof(body), "fence=%s\n", fence);
		write_body(st->fd, body);
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

/* Is there a flock on dev:ino?  Reads /proc/locks, which is what
 * lslocks does; it takes no lock, so --status never gets in the way. */
static int flock_held(dev_t dev, ino_t ino)
{
	char line[256];
	FILE *f = fopen("/proc/locks", "re");
	int held = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long i;
		char type[16];
		long pid;

		if (strstr(line, "->"))
			continue; /* a waiter, not a holder */
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%llu", type, &pid,
			   &maj, &min, &i) != 5)
			continue;
		if (strcmp(type, "FLOCK") == 0 && maj == major(dev) &&
		    min == minor(dev) && i == (unsigned long long)ino) {
			held = 1;
			break;
		}
	}
	fclose(f);
	return held;
}

static enum lr_status file_inspect(struct lr_store *st, int64_t deadline,
				   struct lr_info *info, struct lr_err *err)
{
	char body[512], v[256];
	struct stat sb;
	int fd, held;

	(void)deadline;
	fd = open(st->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		if (errno != ENOENT) {
			lr_err_set(err, "cannot open %s: %s", st->path,
				   strerror(errno));
			return LR_ERROR;
		}
		info->fence = counter_peek(st); /* free */
		return LR_OK;
	}
	if (fstat(fd, &sb) < 0) {
		lr_err_set(err, "cannot stat %s: %s", st->path, strerror(errno));
		close(fd);
		return LR_ERROR;
	}
	read_body(fd, body, sizeof(body));
	held = flock_held(locks_dev(fd, sb.st_dev), sb.st_ino);
	close(fd);
	if (held < 0) {
		lr_err_set(err, "cannot read /proc/locks: %s", strerror(errno));
		return LR_ERROR;
	}
	info->held = held;
	info->fence = body_fence(body);
	if (!held) {
		/* The last granted: a holder on a removed lock file may have
		 * bumped the counter past this file's. */
		uint64_t n = counter_peek(st);

		if (n > info->fence)
			info->fence = n;
		return LR_OK;
	}
	if (field(body, "host", v, sizeof(v)))
		snprintf(info->host, sizeof(info->host), "%s", v);
	if (field(body, "pid", v, sizeof(v)))
		info->pid = strtol(v, NULL, 10);
	if (field(body, "since", v, sizeof(v)))
		info->since_ms = strtoll(v, NULL, 10);
	return LR_OK;
}

/* Replaces the lock file by a fresh one that keeps its fence line: the
 * holder sees its file replaced (loss) and newcomers lock the new one. */
static enum lr_status file_break(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	char tmp[PATH_MAX + 32], body[512], out[64];
	int fd, n;

	(void)deadline;
	fd = open(st->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return LR_OK;
		lr_err_set(err, "cannot open %s: %s", st->path, strerror(errno));
		return LR_ERROR;
	}
	read_body(fd, body, sizeof(body));
	close(fd);
	n = snprintf(tmp, sizeof(tmp), "%s.break.%ld", st->path,
		     (long)getpid());
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
	    rename(tmp, st->path) < 0) {
		lr_err_set(err, "cannot replace %s: %s", st->path,
			   strerror(errno));
		unlink(tmp);
		return LR_ERROR;
	}
	return LR_OK;
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
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
		  0644);
	if (fd < 0 || pwrite(fd, "\n", 1, 0) != 1) {
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
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
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
	if (run.known && run.fence == fence) {
		st->run_fence = fence; /* ours already */
		return LR_OK;
	}
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
	if (run_write(st, &run, err) != LR_OK)
		return LR_ERROR;
	st->run_fence = fence;
	return LR_OK;
}

/* Only while the lease is still ours on the live lock file: the record
 * is read, changed and replaced under the lease, and after a loss a new
 * holder may be deciding on it.  (--break between the check and the
 * rename can still let the end overwrite a start that came after it.) */
static enum lr_status file_run_end(struct lr_store *st, int status,
				   int64_t deadline, struct lr_err *err)
{
	struct lr_run run;
	int64_t now;

	(void)deadline;
	if (run_read(st, &run, err) < 0)
		return LR_ERROR;
	if (!run.known || !st->run_fence || run.fence != st->run_fence ||
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

static const char *const file_schemes[] = { "file", NULL };

const struct lr_store_ops lr_file_ops = {
	.abi = LR_STORE_ABI,
	.name = "file",
	.schemes = file_schemes,
	.caps = LR_CAP_BREAK,
	.open = file_open,
	.acquire = file_acquire,
	.wait_fd = file_wait_fd,
	.process = file_process,
	.renew = file_renew,
	.release = file_release,
	.inspect = file_inspect,
	.brk = file_break,
	.close = file_close,
	.run_start = file_run_start,
	.run_end = file_run_end,
	.run_last = file_run_last,
};
