/*
 * cutproxy - a TCP proxy on 127.0.0.1 that loses one reply, for the tests.
 *
 *   cutproxy UPSTREAM_PORT PATTERN MARKFILE
 *
 * Prints the port it listens on, then relays every connection to
 * 127.0.0.1:UPSTREAM_PORT.  The first time a client sends bytes holding
 * PATTERN, those bytes still reach the server, but nothing the server
 * says on that connection reaches the client any more, MARKFILE is
 * created, and 200 ms later both sides are closed.  So a request runs on the
 * server and its reply is lost, as when a connection dies at the wrong
 * moment.  Every other connection is relayed as it is.  Runs until it is
 * killed.
 *
 * With CUTPROXY_DROP set in the environment, the bytes holding PATTERN
 * (and all the client sends after them on that connection) do not reach
 * the server either: the request is lost before it runs, as when the
 * connection dies while it is sent.  CUTPROXY_CLOSE_MS, if set, is how
 * long the cut connection is then kept open, in place of 200 ms: a
 * client that does not hear it close waits for its own timeout.
 *
 * With CUTPROXY_DELAY=MS instead, nothing is lost and nothing is closed:
 * the bytes holding PATTERN, and all the client sends after them on that
 * connection, reach the server MS milliseconds late (in order), as over
 * a network that holds a packet back; MARKFILE is created when they are
 * held.  The server's words go on as they are.
 *
 * CUTPROXY_SKIP=N lets the first N sends holding PATTERN pass as they
 * are: the fault is at the next one.
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXPAIRS 32

struct pair {
	int cl, up;      /* client and upstream sockets, -1 when closed */
	int cut;         /* the server's words are dropped from now on */
	long long close_at; /* ms: when a cut pair is closed */
	char tail[256];  /* the client's last bytes, for a PATTERN split */
	size_t ntail;
	long long send_at; /* CUTPROXY_DELAY: held bytes go then (0: none) */
	char *held;      /* the client's bytes held back, nheld of them */
	size_t nheld;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int dial(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (void *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void pair_close(struct pair *p)
{
	if (p->cl >= 0)
		close(p->cl);
	if (p->up >= 0)
		close(p->up);
	p->cl = p->up = -1;
	free(p->held);
	p->held = NULL;
	p->nheld = 0;
	p->send_at = 0;
}

/* CUTPROXY_DELAY: keeps the client's bytes for later. */
static int hold_back(struct pair *p, const char *buf, size_t n)
{
	char *h = realloc(p->held, p->nheld + n);

	if (!h)
		return -1;
	memcpy(h + p->nheld, buf, n);
	p->held = h;
	p->nheld += n;
	return 0;
}

/* Does the client's stream, tail then buf, hold pat?  Keeps the tail. */
static int holds(struct pair *p, const char *buf, size_t n, const char *pat)
{
	char joined[256 + 65536];
	size_t plen = strlen(pat), len;
	int found = 0;

	memcpy(joined, p->tail, p->ntail);
	memcpy(joined + p->ntail, buf, n);
	len = p->ntail + n;
	if (len >= plen && memmem(joined, len, pat, plen))
		found = 1;
	p->ntail = len < plen ? len : plen - 1;
	if (p->ntail > sizeof(p->tail))
		p->ntail = sizeof(p->tail);
	memcpy(p->tail, joined + len - p->ntail, p->ntail);
	return found;
}

static int relay(int from, int to)
{
	char buf[65536];
	ssize_t n = read(from, buf, sizeof(buf));

	if (n <= 0)
		return -1;
	return write(to, buf, (size_t)n) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct pair pairs[MAXPAIRS];
	int lfd, upstream, done = 0, i, drop = getenv("CUTPROXY_DROP") != NULL;
	long long hold = getenv("CUTPROXY_CLOSE_MS")
				 ? atoll(getenv("CUTPROXY_CLOSE_MS"))
				 : 200;
	long long delay = getenv("CUTPROXY_DELAY") ?
				  atoll(getenv("CUTPROXY_DELAY")) : 0;
	int skip = getenv("CUTPROXY_SKIP") ? atoi(getenv("CUTPROXY_SKIP")) : 0;

	if (argc != 4 || strlen(argv[2]) >= sizeof(pairs[0].tail)) {
		fprintf(stderr, "usage: cutproxy UPSTREAM_PORT PATTERN "
				"MARKFILE\n");
		return 2;
	}
	upstream = atoi(argv[1]);
	memset(pairs, 0, sizeof(pairs));
	for (i = 0; i < MAXPAIRS; i++)
		pairs[i].cl = pairs[i].up = -1;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (void *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, 16) < 0 || getsockname(lfd, (void *)&sa, &len) < 0) {
		perror("cutproxy");
		return 1;
	}
	printf("%u\n", ntohs(sa.sin_port));
	fflush(stdout);
	for (;;) {
		struct pollfd pf[1 + 2 * MAXPAIRS];
		int n = 1, timeout = -1;
		long long t = now_ms();

		pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (i = 0; i < MAXPAIRS; i++) {
			struct pair *p = &pairs[i];

			if (p->cut && p->cl >= 0 && t >= p->close_at)
				pair_close(p);
			if (p->cut && p->cl >= 0)
				timeout = (int)(p->close_at - t);
			if (p->send_at && p->up >= 0 && t >= p->send_at) {
				/* The held bytes go; what follows, at once. */
				if (p->nheld && write(p->up, p->held, p->nheld) !=
							(ssize_t)p->nheld)
					pair_close(p);
				free(p->held);
				p->held = NULL;
				p->nheld = 0;
				p->send_at = 0;
			}
			if (p->send_at && p->cl >= 0 &&
			    (timeout < 0 || p->send_at - t < timeout))
				timeout = (int)(p->send_at - t);
			pf[n++] = (struct pollfd){ .fd = p->cl, .events = POLLIN };
			pf[n++] = (struct pollfd){ .fd = p->up, .events = POLLIN };
		}
		if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR)
			return 1;
		if (pf[0].revents & POLLIN) {
			int cl = accept(lfd, NULL, NULL);

			for (i = 0; cl >= 0 && i < MAXPAIRS; i++)
				if (pairs[i].cl < 0)
					break;
			if (cl >= 0 && i < MAXPAIRS &&
			    (pairs[i].up = dial(upstream)) >= 0) {
				pairs[i].cl = cl;
				pairs[i].cut = 0;
				pairs[i].ntail = 0;
			} else if (cl >= 0) {
				close(cl);
			}
			continue;
		}
		for (i = 0; i < MAXPAIRS; i++) {
			struct pair *p = &pairs[i];
			short cr = pf[1 + 2 * i].revents, ur = pf[2 + 2 * i].revents;

			if (p->cl < 0)
				continue;
			if (cr & (POLLIN | POLLHUP | POLLERR)) {
				char buf[65536];
				ssize_t k = read(p->cl, buf, sizeof(buf));
				int hit;

				if (k <= 0) {
					pair_close(p);
					continue;
				}
				hit = !done && holds(p, buf, (size_t)k, argv[2]);
				if (hit && skip > 0) {
					skip--;
					hit = 0;
				}
				if (delay && hit) {
					done = 1;
					p->send_at = now_ms() + delay;
					close(open(argv[3], O_WRONLY | O_CREAT,
						   0644));
				}
				if (p->send_at) {
					if (hold_back(p, buf, (size_t)k) < 0) {
						pair_close(p);
						continue;
					}
				} else if (!(drop && (hit || p->cut)) &&
					   write(p->up, buf, (size_t)k) != k) {
					pair_close(p);
					continue;
				}
				if (hit && !delay) {
					done = p->cut = 1;
					p->close_at = now_ms() + hold;
					close(open(argv[3], O_WRONLY | O_CREAT,
						   0644));
				}
			}
			if (ur & (POLLIN | POLLHUP | POLLERR)) {
				if (p->cut) {
					char buf[65536];

					if (read(p->up, buf, sizeof(buf)) <= 0)
						pair_close(p);
				} else if (relay(p->up, p->cl) < 0) {
					pair_close(p);
				}
			}
		}
	}
}
