/*
 * leaserun - run a command while holding a named lease in a shared store.
 *
 * This file is the command line: options, usage, the child's environment,
 * --status and --break, and the mapping of results to words and exit
 * codes.  It is the only part that exits.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "stores.h"
#include "child.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "state.h"
#include "list.h"
#include "status.h"
#include "supervise.h"
#include "store/url.h"
#include "util.h"

extern char **environ;

/* Signals forwarded to the command (unless inherited as ignored). */
static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
				 SIGUSR2, SIGWINCH, SIGCONT, SIGALRM, SIGTSTP };

enum { OPT_URL_FILE = 256, OPT_RENEW, OPT_SIGNAL, OPT_WARN_SIGNAL,
       OPT_FOREGROUND, OPT_LOG_FORMAT, OPT_SYSLOG, OPT_METRICS_FILE,
       OPT_STATUS, OPT_BREAK, OPT_CHECK, OPT_JSON, OPT_SLOT,
       OPT_ONCE_PER, OPT_MAX_TIME, OPT_SPLAY, OPT_LIST };

/* How long --list may take, the whole listing. */
#define LIST_BUDGET_MS 60000

static const struct option longopts[] = {
	{ "nonblock", no_argument, NULL, 'n' },
	{ "nb", no_argument, NULL, 'n' },
	{ "wait", required_argument, NULL, 'w' },
	{ "timeout", required_argument, NULL, 'w' },
	{ "conflict-exit-code", required_argument, NULL, 'E' },
	{ "command", required_argument, NULL, 'c' },
	{ "url", required_argument, NULL, 'U' },
	{ "url-file", required_argument, NULL, OPT_URL_FILE },
	{ "ttl", required_argument, NULL, 't' },
	{ "renew", required_argument, NULL, OPT_RENEW },
	{ "signal", required_argument, NULL, OPT_SIGNAL },
	{ "warn-signal", required_argument, NULL, OPT_WARN_SIGNAL },
	{ "kill-after", required_argument, NULL, 'k' },
	{ "limit", required_argument, NULL, 'l' },
	{ "shared", no_argument, NULL, 's' },
	{ "exclusive", no_argument, NULL, 'x' },
	{ "foreground", no_argument, NULL, OPT_FOREGROUND },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "log-format", required_argument, NULL, OPT_LOG_FORMAT },
	{ "syslog", no_argument, NULL, OPT_SYSLOG },
	{ "metrics-file", required_argument, NULL, OPT_METRICS_FILE },
	{ "status", no_argument, NULL, OPT_STATUS },
	{ "break", no_argument, NULL, OPT_BREAK },
	{ "list", no_argument, NULL, OPT_LIST },
	{ "slot", required_argument, NULL, OPT_SLOT },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "once-per", required_argument, NULL, OPT_ONCE_PER },
	{ "max-time", required_argument, NULL, OPT_MAX_TIME },
	{ "splay", required_argument, NULL, OPT_SPLAY },
	{ "version", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct opts {
	int nonblock;
	int64_t wait_ms; /* LR_MS_FOREVER: for ever */
	int conflict_code;
	const char *command;
	const char *url;
	const char *url_file;
	char *url_arg;   /* a copy of the last -U, which argv no longer shows */
	size_t url_masked; /* bytes of secrets overwritten in that -U */
	int64_t ttl_ms, renew_ms, grace_ms; /* LR_MS_DEFAULT: from ttl */
	int stop_signal;
	int warn_signal;
	int foreground;
	unsigned limit;  /* --limit: 1..LR_LIMIT_MAX */
	int shared;      /* --shared (or --exclusive: 0) */
	int slot;        /* --break --slot: the slot, or -1 for all */
	int verbosity;
	int json;        /* --log-format json */
	int use_syslog;
	const char *metrics_file;
	int json_out;    /* --json */
	int mode; /* 0 run, OPT_STATUS, OPT_BREAK, OPT_LIST, OPT_CHECK */
	int run_opt;     /* an option given that only a run takes, or 0 */
	const char *pattern; /* --list: the glob over names */
	int64_t once_per_ms, max_time_ms, splay_ms; /* 0: off */
	const char *name;
	char **argv;
};

struct run {
	struct opts *o;
	const struct lr_store_req *req; /* the run's, once the store is open */
	struct lr_store *obs;  /* -v: a handle of its own for who_holds() */
	int obs_failed;        /* ... that could not be opened: not again */
	const struct lr_store_ops *ops;
	struct lr_url *u;
	int *keep;
	size_t nkeep;
	int guard_errno; /* the group guard did not start; 0 */
};

static void usage(void)
{
	fputs("Usage:\n"
	      " leaserun [options] NAME COMMAND [ARG...]\n"
	      " leaserun [options] NAME -c 'shell command'\n"
	      " leaserun [options] --status NAME\n"
	      " leaserun [options] --break [--slot K] NAME\n"
	      " leaserun [-U URL] --list [--json] [PATTERN]\n"
	      " leaserun --check [--json]\n"
	      "\n"
	      "Run a command while holding the named lease in a shared store;\n"
	      "renew it while the command runs, stop the command if it is lost,\n"
	      "release it when the command exits.\n"
	      "\n"
	      "Options:\n"
	      " -n, --nonblock                fail (exit 1) rather than wait\n"
	      " -w, --wait DURATION           wait at most DURATION for the lease,\n"
	      "                               and for a store that is down or\n"
	      "                               failing over (default: for ever)\n"
	      " -E, --conflict-exit-code N    exit code when not acquired (default 1)\n"
	      " -c, --command STRING          run STRING with /bin/sh -c\n"
	      " -U, --url URL                 the store (default file:// in the\n"
	      "                               local lock directory)\n"
	      "     --url-file PATH           read the store URL from PATH\n"
	      " -t, --ttl DURATION            lease time to live (default 10s)\n"
	      "     --renew DURATION          renew interval (default TTL/3)\n"
	      "     --signal SIG              signal to stop the command when the\n"
	      "                               lease is at risk (default TERM)\n"
	      "     --warn-signal SIG         signal the command as soon as a\n"
	      "                               renewal fails (default: none)\n"
	      " -k, --kill-after DURATION     send --signal this long before the\n"
	      "                               lease deadline, SIGKILL 100ms before\n"
	      "                               it (default TTL/5)\n"
	      "     --once-per DURATION       start the command at most once per\n"
	      "                               DURATION, by the store's clock;\n"
	      "                               held back: exit 1 (or -E)\n"
	      "     --max-time DURATION       stop the command after DURATION:\n"
	      "                               --signal, SIGKILL after -k; exit 124\n"
	      "     --splay DURATION          wait a random time below DURATION\n"
	      "                               before the first attempt (not\n"
	      "                               counted in -w)\n"
	      "     --foreground              keep the command in our process group\n"
	      "                               (for commands that read the terminal)\n"
	      " -l, --limit N                 let up to N hold NAME at once, each in a\n"
	      "                               slot 0..N-1 (default 1)\n"
	      " -s, --shared                  hold NAME with other shared holders,\n"
	      "                               never with an exclusive one\n"
	      " -x, --exclusive               hold NAME alone (the default)\n"
	      " -v, --verbose                 log each lifecycle step (twice: more)\n"
	      " -q, --quiet                   log only failures of leaserun itself\n"
	      "     --log-format text|json    log line format (default text)\n"
	      "     --syslog                  log to syslog instead of stderr\n"
	      "     --metrics-file PATH       keep Prometheus counters in PATH\n"
	      "                               (node_exporter's textfile collector)\n"
	      "     --status                  show who holds NAME and its last run;\n"
	      "                               exit 0 if held, 1 if free\n"
	      "     --break                   remove the current holders' leases\n"
	      "     --slot K                  with --break: only the holder of slot K\n"
	      "     --list                    list the held leases whose names match\n"
	      "                               PATTERN (a glob; default all): holders,\n"
	      "                               fences, waiters\n"
	      "     --check                   from the command: is our lease still\n"
	      "                               held? exit 0 if so, 1 if not\n"
	      "     --json                    --status, --list and --check print JSON\n"
	      " -V, --version                 show the version and stores\n"
	      " -h, --help                    show this help\n"
	      "\n"
	      "Durations take ms, s, m or h; a bare number is seconds.\n"
	      "Options also come from LEASERUN_URL, LEASERUN_URL_FILE,\n"
	      "LEASERUN_TTL, LEASERUN_RENEW, LEASERUN_WAIT, LEASERUN_KILL_AFTER,\n"
	      "LEASERUN_SIGNAL, LEASERUN_WARN_SIGNAL, LEASERUN_CONFLICT_EXIT_CODE,\n"
	      "LEASERUN_LOG_FORMAT, LEASERUN_METRICS_FILE, LEASERUN_ONCE_PER,\n"
	      "LEASERUN_MAX_TIME, LEASERUN_SPLAY, LEASERUN_LIMIT.\n"
	      "\n"
	      "Exit status: the command's; 1 (or -E) if not acquired or held back\n"
	      "by --once-per; 124 if the lease was lost (the command stopped, or\n"
	      "found lost at release) or --max-time ran out;\n"
	      "125 if leaserun failed; 126/127 if the command could not be run\n"
	      "or was not found.\n"
	      "\n"
	      "See leaserun(1).\n",
	      stdout);
}

static int metrics_on; /* a run (not --status) that keeps metrics */

/* Counts the end of a run into the metrics file; returns code.  failed:
 * leaserun itself failed (a command's own 125 is not ours). */
static int count_exit(int code, int failed)
{
	char why[512];

	if (!metrics_on)
		return code;
	metrics_on = 0;
	if (failed)
		lr_metrics_count(LR_M_FAILURES);
	lr_metrics_exit(code);
	if (lr_metrics_flush(why, sizeof(why)) < 0)
		lr_log(LR_LOG_WARN, "metrics", "%s", why);
	return code;
}

static void __attribute__((noreturn, format(printf, 1, 2)))
exit_failed(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lr_log(LR_LOG_ERROR, "error", "%s", buf);
	exit(count_exit(LR_EXIT_FAILED, 1));
}

static void usage_error(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "leaserun: %s (see leaserun --help)\n", buf);
	exit(LR_EXIT_FAILED);
}

static int64_t duration(const char *what, const char *s)
{
	int64_t ms;

	if (lr_duration_parse(s, &ms) < 0)
		usage_error("invalid %s '%s': expected a duration such as "
			    "500ms, 10s, 5m or 1h",
			    what, s);
	return ms;
}

/* --once-per and --max-time: a period or a run time of nothing is a
 * mistake, not a way to switch them off (leave them out for that). */
static int64_t positive_duration(const char *what, const char *s)
{
	int64_t ms = duration(what, s);

	if (ms <= 0)
		usage_error("invalid %s '%s': must be more than 0", what, s);
	return ms;
}

static int signal_arg(const char *what, const char *s)
{
	int sig = lr_signal_parse(s);

	if (sig < 0 || sig == SIGSTOP || sig == SIGCHLD)
		usage_error("invalid %s '%s': expected a signal name or number",
			    what, s);
	return sig;
}

/* A warning must leave the command running: no stop and no kill, which
 * nothing would ever undo if the lease is renewed after all. */
static int warn_signal_arg(const char *what, const char *s)
{
	int sig = signal_arg(what, s);

	if (sig == SIGKILL || sig == SIGTSTP || sig == SIGTTIN ||
	    sig == SIGTTOU)
		usage_error("invalid %s '%s': a warning must not stop or kill "
			    "the command", what, s);
	return sig;
}

static int code_arg(const char *what, const char *s)
{
	int n = lr_int_parse(s, 255);

	if (n < 0)
		usage_error("invalid %s '%s': expected 0 to 255", what, s);
	return n;
}

static unsigned limit_arg(const char *what, const char *s)
{
	int n = lr_int_parse(s, LR_LIMIT_MAX);

	if (n < 1)
		usage_error("invalid %s '%s': expected 1 to %d", what, s,
			    LR_LIMIT_MAX);
	return (unsigned)n;
}

static void log_format(struct opts *o, const char *what, const char *s)
{
	if (strcmp(s, "text") == 0)
		o->json = 0;
	else if (strcmp(s, "json") == 0)
		o->json = 1;
	else
		usage_error("invalid %s '%s': expected text or json", what, s);
}

/* Defaults from the environment; options given later override them. */
static void env_defaults(struct opts *o)
{
	const char *v;

	if ((v = getenv("LEASERUN_URL")) && *v)
		o->url = v;
	if ((v = getenv("LEASERUN_URL_FILE")) && *v)
		o->url_file = v;
	if ((v = getenv("LEASERUN_TTL")) && *v)
		o->ttl_ms = duration("LEASERUN_TTL", v);
	if ((v = getenv("LEASERUN_RENEW")) && *v)
		o->renew_ms = duration("LEASERUN_RENEW", v);
	if ((v = getenv("LEASERUN_WAIT")) && *v)
		o->wait_ms = duration("LEASERUN_WAIT", v);
	if ((v = getenv("LEASERUN_KILL_AFTER")) && *v)
		o->grace_ms = duration("LEASERUN_KILL_AFTER", v);
	if ((v = getenv("LEASERUN_SIGNAL")) && *v)
		o->stop_signal = signal_arg("LEASERUN_SIGNAL", v);
	if ((v = getenv("LEASERUN_WARN_SIGNAL")) && *v)
		o->warn_signal = warn_signal_arg("LEASERUN_WARN_SIGNAL", v);
	if ((v = getenv("LEASERUN_METRICS_FILE")) && *v)
		o->metrics_file = v;
	if ((v = getenv("LEASERUN_CONFLICT_EXIT_CODE")) && *v)
		o->conflict_code = code_arg("LEASERUN_CONFLICT_EXIT_CODE", v);
	if ((v = getenv("LEASERUN_LOG_FORMAT")) && *v)
		log_format(o, "LEASERUN_LOG_FORMAT", v);
	if ((v = getenv("LEASERUN_LIMIT")) && *v)
		o->limit = limit_arg("LEASERUN_LIMIT", v);
	if ((v = getenv("LEASERUN_ONCE_PER")) && *v)
		o->once_per_ms = positive_duration("LEASERUN_ONCE_PER", v);
	if ((v = getenv("LEASERUN_MAX_TIME")) && *v)
		o->max_time_ms = positive_duration("LEASERUN_MAX_TIME", v);
	if ((v = getenv("LEASERUN_SPLAY")) && *v)
		o->splay_ms = duration("LEASERUN_SPLAY", v);
}

/* -U URL: keep a copy, then overwrite the password in argv at once (as
 * curl and the MySQL client do), so that ps and /proc/PID/cmdline show
 * it only for the first moments.  Only our options are touched: the
 * command's words come after NAME, where getopt never looks. */
static void url_arg(struct opts *o, char *arg)
{
	lr_wipe_free(o->url_arg);
	o->url_arg = strdup(arg);
	if (!o->url_arg) {
		fputs("leaserun: out of memory\n", stderr);
		exit(LR_EXIT_FAILED);
	}
	o->url_masked = lr_url_mask(arg);
	o->url = o->url_arg;
	o->url_file = NULL;
}

static void print_store(const struct lr_store_avail *a, void *ctx)
{
	(void)ctx;
	if (!a->error)
		printf("  %-6s available%s%s%s\n", a->name,
		       a->note ? " (" : "", a->note ? a->note : "",
		       a->note ? ")" : "");
	else if (!a->installed)
		printf("  %-6s not installed (package %s, or build with "
		       "--with-%s)\n",
		       a->name, a->package, a->name);
	else
		printf("  %-6s installed but unusable: %s\n", a->name,
		       a->error);
}

static void version(void)
{
	printf("leaserun %s\nstores:\n", PACKAGE_VERSION);
	lr_store_each(print_store, NULL);
}

/* -n, -w, -E, -t, --renew, -k, --once-per, --max-time, --splay: when
 * and how long.  1 if c is one of them. */
static int timing_option(struct opts *o, int c)
{
	switch (c) {
	case 'n':
		o->nonblock = 1;
		break;
	case 'w':
		o->wait_ms = duration("--wait", optarg);
		break;
	case 'E':
		o->conflict_code = code_arg("--conflict-exit-code", optarg);
		break;
	case 't':
		o->ttl_ms = duration("--ttl", optarg);
		break;
	case OPT_RENEW:
		o->renew_ms = duration("--renew", optarg);
		break;
	case 'k':
		o->grace_ms = duration("--kill-after", optarg);
		break;
	case OPT_ONCE_PER:
		o->once_per_ms = positive_duration("--once-per", optarg);
		break;
	case OPT_MAX_TIME:
		o->max_time_ms = positive_duration("--max-time", optarg);
		break;
	case OPT_SPLAY:
		o->splay_ms = duration("--splay", optarg);
		break;
	default:
		return 0;
	}
	return 1;
}

/* -c, -U, --url-file, --signal, --warn-signal, --foreground, -l, -s, -x:
 * what runs, in which store, and how the lease is shared.  1 if c is one
 * of them. */
static int run_option(struct opts *o, int c)
{
	switch (c) {
	case 'c':
		o->command = optarg;
		break;
	case 'U':
		url_arg(o, optarg);
		break;
	case OPT_URL_FILE:
		o->url_file = optarg;
		o->url = NULL;
		break;
	case OPT_SIGNAL:
		o->stop_signal = signal_arg("--signal", optarg);
		break;
	case OPT_WARN_SIGNAL:
		o->warn_signal = warn_signal_arg("--warn-signal", optarg);
		break;
	case OPT_FOREGROUND:
		o->foreground = 1;
		break;
	case 'l':
		o->limit = limit_arg("--limit", optarg);
		break;
	case 's':
		o->shared = 1;
		break;
	case 'x':
		o->shared = 0;
		break;
	default:
		return 0;
	}
	return 1;
}

/* -v, -q, --log-format, --syslog, --metrics-file, --json: what is said,
 * and where.  1 if c is one of them. */
static int output_option(struct opts *o, int c)
{
	switch (c) {
	case 'v':
		o->verbosity = o->verbosity < 0 ? 1 : o->verbosity + 1;
		break;
	case 'q':
		o->verbosity = -1;
		break;
	case OPT_LOG_FORMAT:
		log_format(o, "--log-format", optarg);
		break;
	case OPT_SYSLOG:
		o->use_syslog = 1;
		break;
	case OPT_METRICS_FILE:
		if (!*optarg)
			usage_error("--metrics-file needs a path");
		o->metrics_file = optarg;
		break;
	case OPT_JSON:
		o->json_out = 1;
		break;
	default:
		return 0;
	}
	return 1;
}

/* --status, --break, --slot, --check, -V, -h, and what getopt refused:
 * the modes, and the options that end the parse here. */
static void mode_option(struct opts *o, int c, char **argv)
{
	int k;

	switch (c) {
	case OPT_SLOT:
		k = lr_int_parse(optarg, LR_LIMIT_MAX - 1);
		if (k < 0)
			usage_error("invalid --slot '%s': expected 0 to %d",
				    optarg, LR_LIMIT_MAX - 1);
		o->slot = k;
		break;
	case OPT_STATUS:
	case OPT_BREAK:
	case OPT_LIST:
	case OPT_CHECK:
		if (o->mode && o->mode != c)
			usage_error("--status, --break, --list and --check "
				    "exclude each other");
		o->mode = c;
		break;
	case 'V':
		version();
		exit(0);
	case 'h':
		usage();
		exit(0);
	case ':':
		usage_error("option '%s' needs an argument", argv[optind - 1]);
	default:
		if (optopt)
			usage_error("unknown option '-%c'", optopt);
		/* Not what follows '=': "--ur=URL" (ambiguous) may hold a
		 * password. */
		usage_error("unknown option '%.*s'",
			    (int)strcspn(argv[optind - 1], "="),
			    argv[optind - 1]);
	}
}

/* "--wait" for 'w': an option as its long name says it. */
static const char *option_name(int c)
{
	static char buf[64];
	size_t i;

	for (i = 0; longopts[i].name; i++)
		if (longopts[i].val == c) {
			snprintf(buf, sizeof(buf), "--%s", longopts[i].name);
			return buf;
		}
	snprintf(buf, sizeof(buf), "-%c", c);
	return buf;
}

/* The options that go only with a mode, or not with each other. */
static void check_combinations(const struct opts *o)
{
	if (o->json_out && o->mode != OPT_STATUS && o->mode != OPT_LIST)
		usage_error("--json goes with --status, --list or --check");
	if (o->mode == OPT_LIST && o->run_opt)
		usage_error("--list takes no %s: it holds nothing and runs "
			    "nothing",
			    option_name(o->run_opt));
	if (o->slot >= 0 && o->mode != OPT_BREAK)
		usage_error("--slot goes with --break");
	if (o->shared && o->limit > 1)
		usage_error("--shared and --limit %u exclude each other: "
			    "shared holders share one slot",
			    o->limit);
	/* A run recorded per period is one run: a second holder beside it
	 * could record its own start at the same moment. */
	if (o->once_per_ms && !o->mode && (o->shared || o->limit > 1))
		usage_error("--once-per goes with a plain lease only, not with "
			    "%s",
			    o->shared ? "--shared" : "--limit");
}

/* --list [PATTERN]: a glob, and nothing after it. */
static void list_operands(struct opts *o, int argc, char **argv)
{
	o->name = "";
	o->pattern = "*";
	/* getopt took "--" for the end of the options. */
	if (optind > 1 && strcmp(argv[optind - 1], "--") == 0)
		usage_error("--list takes one pattern and no command ('--')");
	if (optind < argc)
		o->pattern = argv[optind++];
	if (optind < argc)
		usage_error("--list takes one pattern and no command ('%s')",
			    argv[optind]);
	if (!*o->pattern)
		usage_error("--list: empty pattern");
}

/* The words after the options: NAME, then the command (or none, for
 * --status and --break). */
static void operands(struct opts *o, int argc, char **argv)
{
	if (o->mode == OPT_LIST) {
		list_operands(o, argc, argv);
		return;
	}
	if (optind >= argc)
		usage_error("no lease name given");
	o->name = argv[optind++];
	/* "NAME -c STRING" and "NAME -- COMMAND", as flock allows. */
	if (optind < argc && (strcmp(argv[optind], "-c") == 0 ||
			      strcmp(argv[optind], "--command") == 0)) {
		if (o->command)
			usage_error("-c given twice");
		if (optind + 1 >= argc)
			usage_error("option '%s' needs an argument",
				    argv[optind]);
		if (optind + 2 < argc)
			usage_error("-c STRING takes no further arguments "
				    "('%s')",
				    argv[optind + 2]);
		o->command = argv[optind + 1];
		optind += 2;
	} else if (optind < argc && strcmp(argv[optind], "--") == 0) {
		optind++;
	}
	o->argv = argv + optind;

	if (o->mode) {
		if (argv[optind] || o->command)
			usage_error("%s takes only a lease name",
				    o->mode == OPT_STATUS ? "--status"
							  : "--break");
	} else if (o->command && argv[optind]) {
		usage_error("give either -c STRING or a command, not both");
	} else if (!o->command && !argv[optind]) {
		usage_error("no command given");
	}
}

/* Does --list take option c?  Only what says where the store is and
 * how to print: nothing of a run (-c, -w, -t, -l, ...). */
static int list_takes(int c)
{
	switch (c) {
	case 'U':
	case OPT_URL_FILE:
	case 'v':
	case 'q':
	case OPT_LOG_FORMAT:
	case OPT_SYSLOG:
	case OPT_JSON:
	case OPT_STATUS:
	case OPT_BREAK:
	case OPT_LIST:
	case OPT_CHECK:
	case 'V':
	case 'h':
	case ':':
	case '?':
		return 1;
	default:
		return 0;
	}
}

static void parse(int argc, char **argv, struct opts *o)
{
	int c;

	o->wait_ms = LR_MS_FOREVER;
	o->ttl_ms = o->renew_ms = o->grace_ms = LR_MS_DEFAULT;
	o->conflict_code = 1;
	o->stop_signal = SIGTERM;
	o->limit = 1;
	o->slot = -1;
	env_defaults(o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:nw:E:c:U:t:k:l:sxvqVh",
				longopts, NULL)) != -1) {
		if (!list_takes(c))
			o->run_opt = c;
		if (!timing_option(o, c) && !run_option(o, c) &&
		    !output_option(o, c))
			mode_option(o, c, argv);
	}
	if (o->mode == OPT_CHECK) {
		if (optind < argc)
			usage_error("--check takes no arguments: it reads "
				    "LEASERUN_STATE");
		return;
	}
	check_combinations(o);
	operands(o, argc, argv);
}

static void finish_timing(struct opts *o)
{
	const char *why;

	if (o->ttl_ms == LR_MS_DEFAULT)
		o->ttl_ms = 10000;
	if (o->renew_ms == LR_MS_DEFAULT)
		o->renew_ms = o->ttl_ms / 3;
	if (o->grace_ms == LR_MS_DEFAULT)
		o->grace_ms = o->ttl_ms / 5 > 150 ? o->ttl_ms / 5 : 150;
	why = lr_timing_check(o->ttl_ms, o->renew_ms, o->grace_ms);
	if (why)
		usage_error("%s", why);
	if (o->nonblock)
		o->wait_ms = 0; /* as -w 0: one attempt, as flock */
}

/* How long a pipe (bash's <(...)) or a FIFO may take to say the URL. */
#define URL_PIPE_MS 5000

/* The URL file may say where we connect and with which password: a file
 * others may write (or own, and so chmod) could send us, and our
 * password, to their server.  A pipe is the caller's own.  Sets *others
 * when others may read it. */
static int url_file_fd(const char *path, int *others)
{
	struct stat sb;
	struct pollfd p;
	/* O_NONBLOCK: opening a FIFO that no one writes does not wait. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0 || fstat(fd, &sb) < 0)
		exit_failed("cannot read URL file %s: %s", path,
			    strerror(errno));
	*others = 0;
	if (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)) {
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&p, 1, URL_PIPE_MS) <= 0)
			exit_failed("URL file %s: nothing to read within %ds",
				    path, URL_PIPE_MS / 1000);
		return fd;
	}
	if (!S_ISREG(sb.st_mode))
		exit_failed("URL file %s is not a regular file or a pipe",
			    path);
	if (sb.st_uid != geteuid() && sb.st_uid != 0)
		exit_failed("refusing URL file %s: it belongs to uid %ld, "
			    "who could change it at any time",
			    path, (long)sb.st_uid);
	if (sb.st_mode & (S_IWGRP | S_IWOTH))
		exit_failed("refusing URL file %s: others may write it "
			    "(mode %04o); chmod 600 it",
			    path, (unsigned)(sb.st_mode & 07777));
	*others = (sb.st_mode & (S_IRGRP | S_IROTH)) != 0;
	return fd;
}

/* Reads the URL from a file: first line, surrounding blanks trimmed.
 * *others: others may read the file. */
static char *read_url_file(const char *path, int *others)
{
	char buf[4096], *s, *e;
	ssize_t n;
	int fd = url_file_fd(path, others);

	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		exit_failed("cannot read URL file %s: %s", path,
			    strerror(errno));
	buf[n] = '\0';
	s = buf + strspn(buf, " \t\r\n");
	e = s + strcspn(s, "\r\n");
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*e = '\0';
	if (!*s)
		exit_failed("URL file %s is empty", path);
	s = strdup(s);
#ifdef HAVE_EXPLICIT_BZERO
	explicit_bzero(buf, sizeof(buf));
#endif
	if (!s)
		exit_failed("out of memory");
	return s;
}

/* --url-file /dev/fd/N (bash's <(...), or 3< file): the fd held the
 * store's password, so the command does not get it. */
static void forget_url_fd(struct run *r, const char *path)
{
	const char *p = NULL;
	size_t i, j;
	char *end;
	long fd;

	if (strncmp(path, "/dev/fd/", 8) == 0)
		p = path + 8;
	else if (strncmp(path, "/proc/self/fd/", 14) == 0)
		p = path + 14;
	if (!p || !*p)
		return;
	fd = strtol(p, &end, 10);
	if (*end || fd < 3)
		return;
	for (i = j = 0; i < r->nkeep; i++)
		if (r->keep[i] != fd)
			r->keep[j++] = r->keep[i];
	if (j < r->nkeep)
		close((int)fd);
	r->nkeep = j;
}

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	lr_log(LR_LOG_WARN, "guard", "%s", msg);
}

static int is_secret(const struct lr_store_ops *ops, const char *var)
{
	/* NOTIFY_SOCKET is ours: systemd hears from us, not the command. */
	static const char *const ours[] = { "LEASERUN_URL=",
					    "LEASERUN_URL_FILE=",
					    "LEASERUN_NAME=",
					    "LEASERUN_FENCE=",
					    "LEASERUN_STATE=",
					    "LEASERUN_SLOT=",
					    "NOTIFY_SOCKET=", NULL };
	const char *const *p;
	size_t n;

	for (p = ours; *p; p++)
		if (strncmp(var, *p, strlen(*p)) == 0)
			return 1;
	for (p = ops->secret_env; p && *p; p++) {
		n = strlen(*p);
		if (strncmp(var, *p, n) == 0 && var[n] == '=')
			return 1;
	}
	return 0;
}

static pid_t spawn(void *ctx, const struct lr_grant *g, int *code)
{
	struct run *r = ctx;
	struct lr_child_spec spec;
	static char sh_name[] = "/bin/sh", sh_c[] = "-c";
	char **env, name[256 + 16], fence[64], slot[32], *url, *sh[4];
	char *state = NULL;
	const char *path = lr_state_path();
	size_t n = 0, i;
	int errnum;
	pid_t pid;

	for (i = 0; environ[i]; i++)
		;
	env = calloc(i + 6, sizeof(*env));
	url = malloc(strlen(r->u->redacted) + 16);
	if (path && (state = malloc(strlen(path) + 16)))
		sprintf(state, "LEASERUN_STATE=%s", path);
	if (!env || !url || (path && !state)) {
		free(env);
		free(url);
		free(state);
		lr_log(LR_LOG_ERROR, "error", "out of memory");
		*code = LR_EXIT_FAILED;
		return -1;
	}
	for (i = 0; environ[i]; i++)
		if (!is_secret(r->ops, environ[i]))
			env[n++] = environ[i];
	snprintf(name, sizeof(name), "LEASERUN_NAME=%s", r->o->name);
	snprintf(fence, sizeof(fence), "LEASERUN_FENCE=%" PRIu64, g->fence);
	snprintf(slot, sizeof(slot), "LEASERUN_SLOT=%u", g->slot);
	sprintf(url, "LEASERUN_URL=%s", r->u->redacted);
	env[n++] = name;
	env[n++] = fence;
	env[n++] = slot;
	env[n++] = url;
	if (state)
		env[n++] = state;
	env[n] = NULL;

	spec.argv = r->o->argv;
	if (r->o->command) {
		sh[0] = sh_name;
		sh[1] = sh_c;
		sh[2] = (char *)r->o->command;
		sh[3] = NULL;
		spec.argv = sh;
	}
	spec.envp = env;
	spec.foreground = r->o->foreground;
	spec.keep_fds = r->keep;
	spec.nkeep = r->nkeep;
	pid = lr_child_spawn(&spec, code, &errnum);
	if (pid < 0)
		lr_log(LR_LOG_ERROR, "error", "cannot run '%s': %s",
		       spec.argv[0], strerror(errnum));
	free(env);
	free(url);
	free(state);
	return pid;
}

/* The one notice of a run that --once-per held back: who ran last, how
 * long ago, when the next run may start; all by the store's clock. */
static void held_back(struct lr_run *last)
{
	char ago[48] = "", next[48] = "once the period has passed", d[32];
	char who[300], fence[40] = "";
	const struct lr_field f[] = {
		LR_STR("host", who),
		LR_NUM("fence", last->fence),
		LR_NUM("ago_ms", last->ago_ms),
		LR_NUM("next_ms", last->next_ms),
	};

	lr_printable(last->host);
	if (last->host[0] && last->pid)
		snprintf(who, sizeof(who), "%s pid %ld", last->host, last->pid);
	else
		snprintf(who, sizeof(who), "%s",
			 last->host[0] ? last->host : "another host");
	if (last->ago_ms >= 0) {
		lr_duration_human(last->ago_ms, d, sizeof(d));
		snprintf(ago, sizeof(ago), " %s ago", d);
	}
	if (last->next_ms >= 0) {
		lr_duration_human(last->next_ms, d, sizeof(d));
		snprintf(next, sizeof(next), "in %s", d);
	}
	if (last->fence)
		snprintf(fence, sizeof(fence), ", fence %" PRIu64,
			 last->fence);
	lr_logf(LR_LOG_NOTICE, "too-soon", f, 4,
		"last run started%s on %s%s; next run allowed %s", ago, who,
		fence, next);
}

/* Dies of sig as the child did (without a core dump); exit(128+sig) if
 * that signal cannot kill us. */
static void __attribute__((noreturn)) die_of(int sig, int code)
{
	struct rlimit rl = { 0, 0 };
	sigset_t set;

	fflush(stdout);
	setrlimit(RLIMIT_CORE, &rl);
	/* A core_pattern pipe ignores RLIMIT_CORE; this it does not. */
	prctl(PR_SET_DUMPABLE, 0);
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	exit(code);
}

/* Blocks what we handle first thing, before any library (a store's
 * client may start threads) can get a signal delivered; fills set with
 * the signals the loop reads from its signalfd.  SIGCHLD inherited as
 * ignored would make the kernel reap the command behind our back: take
 * it back, as timeout(1) does. */
static void block_signals(sigset_t *set)
{
	size_t i;

	signal(SIGCHLD, SIG_DFL);
	sigemptyset(set);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		struct sigaction sa;

		if (sigaction(forwarded[i], NULL, &sa) == 0 &&
		    sa.sa_handler == SIG_IGN)
			continue; /* inherited as ignored: not forwarded */
		sigaddset(set, forwarded[i]);
	}
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGPIPE);
	sigprocmask(SIG_BLOCK, set, NULL);
	sigdelset(set, SIGPIPE);
}

/* With 0, 1 or 2 closed, our own fds would take those numbers and log
 * lines would land in the lock file or a store socket.  0, or -1. */
static int std_fds(void)
{
	int fd;

	for (fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 &&
		    open("/dev/null", fd ? O_WRONLY : O_RDONLY) < 0)
			return -1;
	return 0;
}

/* The command gets every fd we were started with, however many: notes
 * them in r.  0, or -1 when out of memory. */
static int keep_fds(struct run *r)
{
	static int *keep; /* static: still reachable at exit */
	size_t n;

	for (n = 64;; n *= 2) {
		int *k = realloc(keep, n * sizeof(*keep));

		if (!k)
			return -1;
		keep = k;
		if ((r->nkeep = lr_open_fds(keep, n)) < n)
			break;
	}
	r->keep = keep;
	return 0;
}

/* Every form of the secrets this run knows, for lr_scrub(): the URL's
 * password and secret parameters as written (a library may repeat the
 * URL it was given: libpq does, for one it cannot parse) and as decoded,
 * and the store's secret environment variables. */
static void note_secrets(const struct run *r, const char *url)
{
	const char *const *env;
	char *masked = strdup(url);
	size_t i, j;

	if (masked)
		lr_url_mask(masked);
	for (i = 0; masked && url[i]; i = j) {
		for (j = i; url[j] && masked[j] != url[j]; j++)
			;
		lr_secret_add_n(url + i, j - i);
		if (j == i)
			j++;
	}
	lr_wipe_free(masked);
	lr_secret_add(r->u->password);
	for (i = 0; i < r->u->nparams; i++)
		if (lr_url_param_secret(r->u->params[i].key))
			lr_secret_add(r->u->params[i].value);
	for (env = r->ops ? r->ops->secret_env : NULL; env && *env; env++)
		lr_secret_add(getenv(*env));
}

/* The store the URL names, refused at once when it cannot do what was
 * asked.  Sets r->u and r->ops; *url_buf gets what --url-file read. */
static void choose_store(struct run *r, char **url_buf)
{
	struct opts *o = r->o;
	struct lr_err err = { "" };
	char why[256];
	int others = 0;

	if (o->url_file) {
		o->url = *url_buf = read_url_file(o->url_file, &others);
		forget_url_fd(r, o->url_file);
	}
	if (!o->url)
		o->url = "file://";
	if (lr_url_parse(o->url, &r->u, why, sizeof(why)) < 0)
		usage_error("invalid store URL: %s", why);
	note_secrets(r, o->url);
	if (others && r->u->password)
		lr_log(LR_LOG_WARN, "guard",
		       "URL file %s holds a password that others may read; "
		       "chmod 600 it",
		       o->url_file);
	if (o->url == o->url_arg && o->url_masked)
		lr_log(LR_LOG_WARN, "guard",
		       "a password on the command line is visible in ps until "
		       "leaserun has overwritten it, and stays in the shell's "
		       "history; use LEASERUN_URL or --url-file");
	r->ops = lr_store_find(r->u->scheme, &err);
	if (!r->ops)
		exit_failed("%s", err.msg);
	note_secrets(r, o->url);
	if (o->mode)
		return;
	if (o->limit > 1 && !(r->ops->caps & LR_CAP_LIMIT))
		exit_failed("the %s store cannot let more than one hold a "
			    "lease (--limit %u)", r->ops->name, o->limit);
	if (o->shared && !(r->ops->caps & LR_CAP_SHARED))
		exit_failed("the %s store has no shared leases (--shared)",
			    r->ops->name);
	if (o->once_per_ms && !r->ops->run_start)
		exit_failed("the %s store cannot record runs: --once-per "
			    "needs another store", r->ops->name);
}

/* How long the open may take: the TTL, at least 5s, but with -n a short
 * connect (2s at most: one attempt means one), and never longer than -w
 * (at least a second, enough to connect to a healthy store). */
static int64_t open_budget(const struct opts *o)
{
	int64_t ms = o->ttl_ms > 5000 ? o->ttl_ms : 5000;

	if (o->mode)
		return ms;
	if (o->wait_ms == 0 && ms > 2000)
		return 2000;
	if (o->wait_ms > 0 && o->wait_ms < ms)
		return o->wait_ms > 1000 ? o->wait_ms : 1000;
	return ms;
}

/* One open of the store, bounded as open_budget() says and by what is
 * left of -w since t0.  NULL with err filled (the half-built store
 * closed) on failure. */
static struct lr_store *open_once(struct run *r, struct lr_store_req *req,
				  int64_t t0, struct lr_err *err)
{
	struct opts *o = r->o;
	struct lr_store *st = NULL;
	int64_t now = lr_now_ms(), ms = open_budget(o);
	enum lr_status rc;

	if (!o->mode && o->wait_ms > 0 && t0 + o->wait_ms - now < ms)
		ms = t0 + o->wait_ms - now > 1000 ? t0 + o->wait_ms - now : 1000;
	rc = r->ops->open(req, now + ms, &st, err);
	if (rc == LR_OK)
		return st;
	r->ops->close(st);
	if (rc == LR_TIMEOUT)
		err->heals = 1;
	if (!err->msg[0])
		lr_err_set(err, "%s", lr_status_name(rc));
	return NULL;
}

/* Opens the store for a run (with a fresh owner token) or for --status
 * and --break (without one).  A run that may wait rides out a store
 * that is down, starting, full or failing over for now: it tries again
 * (50ms doubling to a second, jittered) until -w, counted from t0, runs
 * out, saying each new fault once with -v; what cannot heal, -n, and
 * --status and --break fail at once. */
static struct lr_store *open_store(struct run *r, struct lr_store_req *req,
				   int64_t t0)
{
	static char host[256], token[37];
	struct opts *o = r->o;
	static char said[LR_ERRLEN];
	char ubuf[LR_MSG_URL_MAX + 4];
	struct lr_err err = { "", 0 };
	struct lr_store *st;
	int64_t backoff = 50;
	uuid_t uu;

	if (gethostname(host, sizeof(host)) < 0)
		strcpy(host, "unknown");
	host[sizeof(host) - 1] = '\0';
	uuid_generate_random(uu);
	uuid_unparse_lower(uu, token);

	memset(req, 0, sizeof(*req));
	req->url = o->url;
	req->u = r->u;
	req->name = o->name;
	req->token = o->mode ? NULL : token;
	req->acquire_next = !o->mode && !o->splay_ms;
	req->ttl_ms = o->ttl_ms;
	req->host = host;
	req->pid = (long)getpid();
	req->since_ms = lr_wall_ms();
	req->limit = o->limit;
	req->shared = o->shared;
	req->warn = warn_cb;

	for (;;) {
		int64_t pause, left;

		err = (struct lr_err){ "", 0 };
		st = open_once(r, req, t0, &err);
		if (st) {
			if (said[0])
				lr_log(LR_LOG_INFO, "store-back",
				       "the store answers again");
			return st;
		}
		pause = backoff + (int64_t)(random() % (backoff / 2 + 1));
		left = o->wait_ms > 0 ? t0 + o->wait_ms - lr_now_ms() : pause;
		if (!err.heals || o->mode || o->wait_ms == 0 || left <= 0)
			exit_failed("cannot open %s: %s",
				    lr_msg_url(r->u->redacted, ubuf, sizeof(ubuf)),
				    err.msg);
		if (pause > left) /* a last try as the wait runs out */
			pause = left;
		if (strcmp(said, err.msg) != 0) {
			const struct lr_field f[] = { LR_STR("reason",
							     err.msg) };

			snprintf(said, sizeof(said), "%s", err.msg);
			lr_logf(LR_LOG_INFO, "store-fault", f, 1,
				"cannot open %s: %s; trying again until the "
				"wait runs out",
				lr_msg_url(r->u->redacted, ubuf, sizeof(ubuf)),
				err.msg);
		}
		poll(NULL, 0, (int)pause);
		if (backoff < 1000)
			backoff *= 2;
	}
}

/* --list, --status and --break; returns the exit status. */
static int admin(struct run *r, struct lr_store *st)
{
	struct opts *o = r->o;
	struct lr_err err = { "" };
	enum lr_status rc;
	char why[1024];
	int code = 0;

	if (o->mode == OPT_LIST) {
		const struct lr_list_req q = {
			.ops = r->ops,
			.st = st,
			.pattern = o->pattern,
			.url = r->u->redacted,
			.deadline = lr_now_ms() + LIST_BUDGET_MS,
			.json = o->json_out,
		};

		code = lr_list_show(&q, why, sizeof(why));
		r->ops->close(st);
		if (code < 0)
			exit_failed("%s", why);
		return 0;
	}
	if (o->mode == OPT_STATUS) {
		const struct lr_status_req q = {
			.ops = r->ops,
			.st = st,
			.name = o->name,
			.url = r->u->redacted,
			.budget_ms = o->ttl_ms,
			.json = o->json_out,
		};

		code = lr_status_show(&q, why, sizeof(why));
		r->ops->close(st);
		if (code < 0)
			exit_failed("%s", why);
		return code;
	}
	if (!r->ops->break_lease) {
		r->ops->close(st);
		exit_failed("the %s store cannot break a lease", r->ops->name);
	}
	rc = r->ops->break_lease(st, o->slot, lr_now_ms() + o->ttl_ms, &err);
	r->ops->close(st);
	if (rc != LR_OK)
		exit_failed("cannot break %s: %s", o->name,
			    err.msg[0] ? err.msg : lr_status_name(rc));
	if (o->slot >= 0)
		lr_log(LR_LOG_NOTICE, "broken", "slot %d broken", o->slot);
	else
		lr_log(LR_LOG_NOTICE, "broken", "lease broken");
	return 0;
}

/* -v, while waiting: who holds the lease, asked of a store handle of
 * our own (opened at the first question, as --status opens one), so that
 * the run's handle, which may be in the middle of its wait, is left
 * alone. */
static void who_holds(void *ctx, int64_t deadline, char *buf, size_t len)
{
	static struct lr_store_req req;
	struct run *r = ctx;
	struct lr_err err = { "" };
	struct lr_info info;

	buf[0] = '\0';
	if (!r->obs && !r->obs_failed) {
		req = *r->req;
		req.token = NULL;
		if (r->ops->open(&req, deadline, &r->obs, &err) != LR_OK) {
			r->ops->close(r->obs);
			r->obs = NULL;
			r->obs_failed = 1;
		}
	}
	if (!r->obs)
		return;
	lr_info_init(&info);
	if (r->ops->inspect(r->obs, deadline, &info, &err) == LR_OK) {
		lr_info_sort(&info);
		lr_holders_who(&info, buf, len);
	}
	lr_info_free(&info);
}

/* The run itself: the loop of supervise.c, fed from the options. */
static void run(struct run *r, struct lr_store *st, const sigset_t *set,
		struct lr_sup_result *res)
{
	struct opts *o = r->o;
	struct lr_sup_cfg cfg;
	int sigfd;

	sigfd = signalfd(-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0)
		exit_failed("signalfd: %s", strerror(errno));
	/* Orphaned members of the command's group come back to us, so we
	 * can tell when the whole group is gone. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	memset(&cfg, 0, sizeof(cfg));
	cfg.ops = r->ops;
	cfg.st = st;
	cfg.sigfd = sigfd;
	cfg.ttl_ms = o->ttl_ms;
	cfg.renew_ms = o->renew_ms;
	cfg.grace_ms = o->grace_ms;
	cfg.wait_ms = o->wait_ms;
	cfg.stop_signal = o->stop_signal;
	cfg.warn_signal = o->warn_signal;
	cfg.foreground = o->foreground;
	cfg.guard_errno = r->guard_errno;
	cfg.limit = o->limit;
	cfg.shared = o->shared;
	cfg.name = o->name;
	cfg.once_per_ms = o->once_per_ms;
	cfg.max_time_ms = o->max_time_ms;
	cfg.splay_ms = o->splay_ms;
	cfg.spawn = spawn;
	if (o->verbosity > 0 && r->ops->inspect)
		cfg.who_holds = who_holds;
	cfg.ctx = r;
	lr_supervise(&cfg, res);
	r->ops->close(st);
	r->ops->close(r->obs); /* NULL: nothing */
	r->obs = NULL;
	close(sigfd);
}

/* The last word on a run that ended other than by the command's own
 * exit, then its exit status (dying of the command's signal, as it
 * did). */
static int outcome(const struct opts *o, struct lr_sup_result *res)
{
	int code, sig;

	switch (res->outcome) {
	case LR_OUT_CONFLICT: {
		const struct lr_field f[] = { LR_STR("holder", res->holder) };

		lr_logf(LR_LOG_NOTICE, "conflict", f, 1,
			o->wait_ms == 0 ? "held by %s; not waiting"
					: "held by %s; gave up waiting",
			res->holder[0] ? res->holder : "another");
		break;
	}
	case LR_OUT_HELD_BACK:
		held_back(&res->last);
		break;
	case LR_OUT_TIMEOUT: {
		char took[32];

		lr_duration_human(o->max_time_ms, took, sizeof(took));
		lr_log(LR_LOG_WARN, "stopped",
		       "the command was stopped because it ran for %s "
		       "(--max-time)",
		       took);
		break;
	}
	case LR_OUT_LOST:
		if (res->lost_early)
			lr_log(LR_LOG_WARN, "stopped",
			       "the lease was lost before the command "
			       "started: the command did not run");
		else if (res->lost_at_release)
			lr_log(LR_LOG_WARN, "stopped",
			       "the lease was lost before the command ended: "
			       "the run was not exclusive");
		else
			lr_log(LR_LOG_WARN, "stopped",
			       "the command was stopped because the lease "
			       "was lost");
		break;
	case LR_OUT_FAILED:
		if (res->die_signal)
			die_of(res->die_signal,
			       count_exit(128 + res->die_signal, 0));
		lr_log(LR_LOG_ERROR, "error", "%s", res->err.msg);
		break;
	case LR_OUT_CHILD:
		if (res->code) /* the command could not start */
			return count_exit(res->code,
					  res->code == LR_EXIT_FAILED);
		break;
	}
	code = lr_exit_code(res->outcome, res->wstatus, o->conflict_code,
			    &sig);
	if (sig)
		die_of(sig, count_exit(code, 0));
	return count_exit(code, res->outcome == LR_OUT_FAILED);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct run r;
	struct lr_store_req req;
	struct lr_store *st;
	struct lr_sup_result res;
	sigset_t set, fatal;
	char *url_buf = NULL;
	int64_t t_open;
	const char *reason;
	int code = 0;

	block_signals(&set);
	fatal = set;
	sigdelset(&fatal, SIGCHLD);
	/* Our environment and memory hold the store's secrets: neither the
	 * command (same user, /proc/PPID/environ, ptrace) nor a core dump
	 * may read them.  The command's exec makes it dumpable again. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (std_fds() < 0)
		return LR_EXIT_FAILED;
	memset(&o, 0, sizeof(o));
	memset(&r, 0, sizeof(r));
	r.o = &o;
	if (keep_fds(&r) < 0)
		return LR_EXIT_FAILED;

	parse(argc, argv, &o);
	if (o.mode == OPT_CHECK)
		return lr_state_check(o.json_out, o.verbosity < 0);
	lr_log_setup(o.verbosity, o.json, 0, NULL);
	if (o.mode != OPT_LIST && (reason = lr_name_check(o.name)))
		usage_error("invalid lease name: %s", reason);
	finish_timing(&o);
	lr_log_setup(o.verbosity, o.json, o.use_syslog,
		     o.mode == OPT_LIST ? NULL : o.name);

	/* The group guard (child.h) shares our descriptors, so it can start
	 * before any is open; its start then overlaps with loading the
	 * store and connecting instead of with the command's. */
	if (!o.mode && !o.foreground && lr_child_guard_start() < 0)
		r.guard_errno = errno ? errno : EAGAIN;
	/* Until the store is open nothing is held and nothing has started:
	 * a signal ends the run at once, by its default action (as
	 * timeout(1) dies of one), wherever a store or its library waits
	 * (libpq resolves a host name with no deadline; a URL file may be
	 * a pipe).  The stores start no threads that could inherit this
	 * mask; the loop reads the signals from here on. */
	t_open = lr_now_ms();
	sigprocmask(SIG_UNBLOCK, &fatal, NULL);
	choose_store(&r, &url_buf);
	if (!o.mode) {
		lr_metrics_setup(o.metrics_file, o.name, r.ops->name);
		metrics_on = o.metrics_file != NULL;
		lr_notify_setup();
	}
	srandom((unsigned)getpid() ^ (unsigned)t_open);
	st = open_store(&r, &req, t_open);
	r.req = &req;
	sigprocmask(SIG_BLOCK, &fatal, NULL);
	/* -w counts from our start: the open took its share. */
	if (o.wait_ms > 0)
		o.wait_ms = o.wait_ms > lr_now_ms() - t_open
				    ? o.wait_ms - (lr_now_ms() - t_open)
				    : 1;
	if (o.mode)
		code = admin(&r, st);
	else
		run(&r, st, &set, &res);
	lr_url_free(r.u);
	lr_wipe_free(url_buf);
	lr_wipe_free(o.url_arg);
	return o.mode ? code : outcome(&o, &res);
}
