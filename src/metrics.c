/*
 * metrics.c - the Prometheus textfile.
 *
 * One file can hold many leases: every sample carries name="..." and
 * store="..." labels, and a flush keeps the series of other names as it
 * found them.  Lease names and store names need no escaping in a label
 * value ([A-Za-z0-9._:@-]).  The file belongs to leaserun: lines it does
 * not know are dropped.
 *
 * Concurrency: a flush holds flock() on the directory while it reads,
 * adds and renames, so two runs on one host never lose each other's
 * counts; the collector only ever sees a whole file.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "metrics.h"

#define MAXB 13 /* finite buckets, at most */

/*
 * Names: leaserun_<subject>_<what>[_<unit>][_total], where the subject is
 * one of the seed's words, so that the names it asks for (lease_acquired,
 * lease_lost, heartbeat_latency) are three of a family rather than
 * exceptions:
 *   lease      the grant itself: acquired, lost, conflicts, wait, hold;
 *   heartbeat  the renewals that keep it: latency, failures, slow;
 *   run        leaserun's own run: its failures, how the last ended, the
 *              runs --once-per held back and --max-time stopped.
 * Prometheus conventions on top: counters end in _total, times are in
 * seconds and say so, timestamps are _timestamp_seconds.
 */
static const char *const counter_name[LR_M_NCOUNTERS] = {
	"leaserun_lease_acquired_total", "leaserun_lease_conflicts_total",
	"leaserun_lease_lost_total", "leaserun_heartbeat_failures_total",
	"leaserun_run_failures_total", "leaserun_heartbeat_slow_total",
	"leaserun_run_skipped_total", "leaserun_run_timeouts_total",
};
static const char *const counter_help[LR_M_NCOUNTERS] = {
	"Leases acquired.",
	"Runs that did not get the lease (held by another; -n or -w).",
	"Runs that lost the lease, while the command ran or found at "
	"release (exit 124).",
	"Renewals that failed (the lease was at risk).",
	"Runs in which leaserun itself failed (exit 125).",
	"Runs whose renewal round trips had a p99 above a tenth of the TTL "
	"(the slow-heartbeat warning).",
	"Runs held back by --once-per: a start was recorded less than the "
	"period ago.",
	"Runs whose command was stopped by --max-time (exit 124).",
};

static const struct {
	const char *name, *help;
	int n;
	double le[MAXB];
} hist[LR_M_NHISTOGRAMS] = {
	{ "leaserun_heartbeat_latency_seconds",
	  "Round trip of a successful renewal.", 13,
	  { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
	    5, 10 } },
	{ "leaserun_lease_wait_seconds",
	  "Time from start to acquiring the lease or giving up.", 9,
	  { 0.01, 0.1, 1, 10, 60, 300, 900, 3600, 14400 } },
	{ "leaserun_lease_hold_seconds",
	  "Time from acquiring the lease to the command's group gone.", 8,
	  { 1, 10, 60, 300, 900, 3600, 14400, 86400 } },
};

enum { G_EXIT, G_RUN, G_SUCCESS, NGAUGES };
static const char *const gauge_name[NGAUGES] = {
	"leaserun_run_last_exit_status",
	"leaserun_run_last_end_timestamp_seconds",
	"leaserun_run_last_success_timestamp_seconds",
};
static const char *const gauge_help[NGAUGES] = {
	"Exit status of leaserun in the last run.",
	"Unix time the last run ended.",
	"Unix time the last run ended with status 0.",
};

struct hcount {
	double b[MAXB + 1]; /* cumulative; b[n] is +Inf (= count) */
	double sum;
};

struct series {
	char name[208];
	char store[32];
	double c[LR_M_NCOUNTERS];
	struct hcount h[LR_M_NHISTOGRAMS];
	double g[NGAUGES];
	unsigned has_g; /* bit per gauge */
};

static const char *m_path;
static struct series mine; /* counted since the last flush */
static int m_dirty;

void lr_metrics_setup(const char *path, const char *name, const char *store)
{
	m_path = path && *path ? path : NULL;
	memset(&mine, 0, sizeof(mine));
	snprintf(mine.name, sizeof(mine.name), "%s", name);
	snprintf(mine.store, sizeof(mine.store), "%s", store);
}

void lr_metrics_count(enum lr_counter c)
{
	mine.c[c] += 1;
	m_dirty = 1;
}

void lr_metrics_observe(enum lr_histogram h, int64_t ms)
{
	double v = (double)ms / 1000;
	int i, n = hist[h].n;

	for (i = 0; i < n; i++)
		if (v <= hist[h].le[i])
			mine.h[h].b[i] += 1;
	mine.h[h].b[n] += 1;
	mine.h[h].sum += v;
	m_dirty = 1;
}

void lr_metrics_exit(int code)
{
	double now = (double)(lr_wall_ms() / 1000);

	mine.g[G_EXIT] = code;
	mine.g[G_RUN] = now;
	mine.has_g = 1u << G_EXIT | 1u << G_RUN;
	if (code == 0) {
		mine.g[G_SUCCESS] = now;
		mine.has_g |= 1u << G_SUCCESS;
	}
	m_dirty = 1;
}

/* ---- the file ---- */

struct table {
	struct series *s;
	size_t n, cap;
};

static struct series *find(struct table *t, const char *name,
			   const char *store)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->s[i].name, name) == 0 &&
		    strcmp(t->s[i].store, store) == 0)
			return &t->s[i];
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct series *s = realloc(t->s, cap * sizeof(*s));

		if (!s)
			return NULL;
		t->s = s;
		t->cap = cap;
	}
	memset(&t->s[t->n], 0, sizeof(t->s[0]));
	snprintf(t->s[t->n].name, sizeof(t->s[0].name), "%s", name);
	snprintf(t->s[t->n].store, sizeof(t->s[0].store), "%s", store);
	return &t->s[t->n++];
}

static void fmt_le(char *buf, size_t len, double le)
{
	snprintf(buf, len, "%g", le);
}

/* Reads the value of label key at *p ("key=\"value\""), moving *p past
 * it.  Returns 0, or -1 if *p does not hold that label. */
static int label(char **p, const char *key, char *val, size_t len)
{
	size_t k = strlen(key);
	char *e;

	if (strncmp(*p, key, k) != 0 || (*p)[k] != '=' || (*p)[k + 1] != '"')
		return -1;
	*p += k + 2;
	e = strchr(*p, '"');
	if (!e || (size_t)(e - *p) >= len)
		return -1;
	memcpy(val, *p, (size_t)(e - *p));
	val[e - *p] = '\0';
	*p = e + 1;
	return 0;
}

/* Takes one sample line of ours into t; ignores anything else. */
static void parse_line(struct table *t, char *line)
{
	char name[208], store[32], le[32] = "", *p, *brace, *end;
	struct series *s;
	double v;
	size_t fam;
	int i, j;

	brace = strchr(line, '{');
	if (!brace || strncmp(line, "leaserun_", 9) != 0)
		return;
	*brace = '\0';
	p = brace + 1;
	if (label(&p, "name", name, sizeof(name)) < 0 || *p++ != ',' ||
	    label(&p, "store", store, sizeof(store)) < 0)
		return;
	if (*p == ',' && (p++, label(&p, "le", le, sizeof(le)) < 0))
		return;
	if (*p++ != '}' || *p++ != ' ')
		return;
	v = strtod(p, &end);
	if (end == p)
		return;
	if (!(s = find(t, name, store)))
		return;
	for (i = 0; i < LR_M_NCOUNTERS; i++)
		if (strcmp(line, counter_name[i]) == 0 && !le[0]) {
			s->c[i] = v;
			return;
		}
	for (i = 0; i < NGAUGES; i++)
		if (strcmp(line, gauge_name[i]) == 0 && !le[0]) {
			s->g[i] = v;
			s->has_g |= 1u << i;
			return;
		}
	for (i = 0; i < LR_M_NHISTOGRAMS; i++) {
		fam = strlen(hist[i].name);
		if (strncmp(line, hist[i].name, fam) != 0)
			continue;
		if (strcmp(line + fam, "_sum") == 0 && !le[0]) {
			s->h[i].sum = v;
		} else if (strcmp(line + fam, "_bucket") == 0) {
			char want[32];

			if (strcmp(le, "+Inf") == 0)
				s->h[i].b[hist[i].n] = v;
			for (j = 0; j < hist[i].n; j++) {
				fmt_le(want, sizeof(want), hist[i].le[j]);
				if (strcmp(le, want) == 0)
					s->h[i].b[j] = v;
			}
		}
		/* _count is +Inf again: written, not read */
		return;
	}
}

/* Reads what the file holds.  Returns 0 (also when there is no file),
 * or -1 with why when the path holds something that is not ours: a
 * file of another program is never replaced. */
static int read_file(struct table *t, const char *path, char *why,
		     size_t len)
{
	char line[1024];
	struct stat sb;
	FILE *f;
	int fd, ours = 0, any = 0;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(why, len, "cannot read %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		snprintf(why, len, "%s is not a regular file; not replacing "
				   "it", path);
		close(fd);
		return -1;
	}
	if (!(f = fdopen(fd, "r"))) {
		snprintf(why, len, "cannot read %s: %s", path,
			 strerror(errno));
		close(fd);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		any = 1;
		if (strncmp(line, "leaserun_", 9) == 0 ||
		    strncmp(line, "# TYPE leaserun_", 16) == 0)
			ours = 1;
		line[strcspn(line, "\n")] = '\0';
		if (line[0] != '#')
			parse_line(t, line);
	}
	fclose(f);
	if (any && !ours) {
		snprintf(why, len, "%s holds no leaserun metrics; not "
				   "replacing it", path);
		return -1;
	}
	return 0;
}

static void merge(struct series *into, const struct series *d)
{
	int i, j;

	for (i = 0; i < LR_M_NCOUNTERS; i++)
		into->c[i] += d->c[i];
	for (i = 0; i < LR_M_NHISTOGRAMS; i++) {
		for (j = 0; j <= hist[i].n; j++)
			into->h[i].b[j] += d->h[i].b[j];
		into->h[i].sum += d->h[i].sum;
	}
	for (i = 0; i < NGAUGES; i++)
		if (d->has_g & 1u << i) {
			into->g[i] = d->g[i];
			into->has_g |= 1u << i;
		}
}

static void write_all(FILE *f, const struct table *t)
{
	size_t k;
	int i, j;

#define LABELS(s) "{name=\"%s\",store=\"%s\""
	for (i = 0; i < LR_M_NCOUNTERS; i++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", counter_name[i],
			counter_help[i], counter_name[i]);
		for (k = 0; k < t->n; k++)
			fprintf(f, "%s" LABELS() "} %.15g\n", counter_name[i],
				t->s[k].name, t->s[k].store, t->s[k].c[i]);
	}
	for (i = 0; i < LR_M_NHISTOGRAMS; i++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", hist[i].name,
			hist[i].help, hist[i].name);
		for (k = 0; k < t->n; k++) {
			const struct series *s = &t->s[k];
			char le[32];

			for (j = 0; j < hist[i].n; j++) {
				fmt_le(le, sizeof(le), hist[i].le[j]);
				fprintf(f, "%s_bucket" LABELS() ",le=\"%s\"} "
					   "%.15g\n",
					hist[i].name, s->name, s->store, le,
					s->h[i].b[j]);
			}
			fprintf(f, "%s_bucket" LABELS() ",le=\"+Inf\"} %.15g\n"
				   "%s_sum" LABELS() "} %.15g\n"
				   "%s_count" LABELS() "} %.15g\n",
				hist[i].name, s->name, s->store,
				s->h[i].b[hist[i].n], hist[i].name, s->name,
				s->store, s->h[i].sum, hist[i].name, s->name,
				s->store, s->h[i].b[hist[i].n]);
		}
	}
	for (i = 0; i < NGAUGES; i++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", gauge_name[i],
			gauge_help[i], gauge_name[i]);
		for (k = 0; k < t->n; k++)
			if (t->s[k].has_g & 1u << i)
				fprintf(f, "%s" LABELS() "} %.15g\n",
					gauge_name[i], t->s[k].name,
					t->s[k].store, t->s[k].g[i]);
	}
#undef LABELS
}

/* Locks the directory that holds path; -1 after about 2s of trying. */
static int lock_dir(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int fd, i;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (i = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; i++) {
		if (errno != EWOULDBLOCK || i >= 200) {
			close(fd);
			if (errno == EWOULDBLOCK)
				errno = ETIMEDOUT;
			return -1;
		}
		poll(NULL, 0, 10);
	}
	return fd;
}

int lr_metrics_flush(char *why, size_t len)
{
	struct table t = { NULL, 0, 0 };
	struct series *s;
	char tmp[4200];
	FILE *f = NULL;
	int dfd, fd = -1, rc = -1;

	if (!m_path || !m_dirty)
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", m_path) >=
	    (int)sizeof(tmp)) {
		snprintf(why, len, "%s: path too long", m_path);
		return -1;
	}
	dfd = lock_dir(m_path);
	if (dfd < 0) {
		snprintf(why, len, "cannot lock the directory of %s: %s",
			 m_path, strerror(errno));
		return -1;
	}
	if (read_file(&t, m_path, why, len) < 0)
		goto out;
	if (!(s = find(&t, mine.name, mine.store))) {
		snprintf(why, len, "out of memory");
		goto out;
	}
	merge(s, &mine);
	fd = mkstemp(tmp);
	if (fd < 0 || fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
		snprintf(why, len, "cannot write %s: %s", tmp, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		goto out;
	}
	write_all(f, &t);
	if (ferror(f) | fclose(f)) {
		snprintf(why, len, "cannot write %s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, m_path) < 0) {
		snprintf(why, len, "cannot rename %s to %s: %s", tmp, m_path,
			 strerror(errno));
		unlink(tmp);
		goto out;
	}
	memset(mine.c, 0, sizeof(mine.c));
	memset(mine.h, 0, sizeof(mine.h));
	mine.has_g = 0;
	m_dirty = 0;
	rc = 0;
out:
	free(t.s);
	close(dfd);
	return rc;
}
