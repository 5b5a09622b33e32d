/*
 * notify.c - tell systemd what we are doing (see sd_notify(3)).
 *
 * NOTIFY_SOCKET is an AF_UNIX datagram socket: a path, or an abstract
 * name written with a leading '@'.  Failures are ignored, as sd_notify
 * callers do: a status line is never worth failing a job for.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"
#include "util.h"

static struct sockaddr_un n_addr;
static socklen_t n_len;
static int n_fd = -1;

void lr_notify_setup(void)
{
	const char *p = getenv("NOTIFY_SOCKET");
	size_t len;

	n_len = 0;
	if (!p || (p[0] != '/' && p[0] != '@'))
		return;
	len = strlen(p);
	if (len >= sizeof(n_addr.sun_path))
		return;
	memset(&n_addr, 0, sizeof(n_addr));
	n_addr.sun_family = AF_UNIX;
	memcpy(n_addr.sun_path, p, len);
	if (p[0] == '@')
		n_addr.sun_path[0] = '\0';
	n_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
			    (p[0] == '/'));
}

void lr_notify(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	if (!n_len)
		return;
	if (n_fd < 0)
		n_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n_fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	lr_scrub(msg);
	if ((size_t)n > sizeof(msg) - 2)
		n = sizeof(msg) - 2;
	msg[n++] = '\n';
	/* Never wait for systemd: the loop has deadlines to keep. */
	if (sendto(n_fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT,
		   (struct sockaddr *)&n_addr, n_len) < 0) {
		/* systemd gone or not listening: nothing to do */
	}
}
