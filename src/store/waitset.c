/*
 * waitset.c - an epoll set plus a CLOCK_BOOTTIME timer, handed to the
 * core's loop as one fd.  See waitset.h.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "store/waitset.h"

void lr_timerfd_arm(int tfd, int64_t at)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	if (at >= 0) {
		/* 0 would disarm: the earliest time there is instead. */
		if (at < 1)
			at = 1;
		its.it_value.tv_sec = at / 1000;
		its.it_value.tv_nsec = (long)(at % 1000) * 1000000;
	}
	/* The system call itself: libfaketime wraps timerfd_settime() and
	 * shifts an absolute time by its offset even for CLOCK_BOOTTIME,
	 * whose clock_gettime() it leaves alone with
	 * FAKETIME_DONT_FAKE_MONOTONIC=1; a job tested under a faked date
	 * would then find every deadline minutes early or late. */
	syscall(SYS_timerfd_settime, tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

void lr_waitset_init(struct lr_waitset *ws)
{
	ws->ep = ws->tfd = -1;
}

int lr_waitset_open(struct lr_waitset *ws)
{
	ws->ep = epoll_create1(EPOLL_CLOEXEC);
	ws->tfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (ws->ep < 0 || ws->tfd < 0)
		return -1;
	return lr_waitset_watch(ws, ws->tfd, EPOLLIN);
}

void lr_waitset_close(struct lr_waitset *ws)
{
	if (ws->tfd >= 0)
		close(ws->tfd);
	if (ws->ep >= 0)
		close(ws->ep);
	ws->ep = ws->tfd = -1;
}

int lr_waitset_watch(struct lr_waitset *ws, int fd, uint32_t events)
{
	struct epoll_event ev;

	if (ws->ep < 0 || fd < 0) {
		errno = EBADF;
		return -1;
	}
	if (!events) {
		/* Gone already when its socket was closed: no matter. */
		epoll_ctl(ws->ep, EPOLL_CTL_DEL, fd, NULL);
		return 0;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.fd = fd;
	if (epoll_ctl(ws->ep, EPOLL_CTL_MOD, fd, &ev) == 0)
		return 0;
	if (errno != ENOENT)
		return -1;
	return epoll_ctl(ws->ep, EPOLL_CTL_ADD, fd, &ev);
}

int lr_waitset_follow(struct lr_waitset *ws, int *reg, int fd,
		      uint32_t events)
{
	if (*reg >= 0 && *reg != fd)
		lr_waitset_watch(ws, *reg, 0);
	*reg = -1;
	if (fd < 0)
		return 0;
	if (lr_waitset_watch(ws, fd, events) < 0)
		return -1;
	*reg = fd;
	return 0;
}

void lr_waitset_arm(struct lr_waitset *ws, int64_t at)
{
	if (ws->tfd >= 0)
		lr_timerfd_arm(ws->tfd, at);
}

int lr_waitset_ready(struct lr_waitset *ws, struct epoll_event *evs,
		     int max)
{
	int n, i;

	if (ws->ep < 0)
		return 0;
	n = epoll_wait(ws->ep, evs, max, 0);
	if (n < 0)
		return 0;
	for (i = 0; i < n; i++) {
		uint64_t x;

		if (evs[i].data.fd == ws->tfd &&
		    read(ws->tfd, &x, sizeof(x)) < 0) {
			/* re-armed meanwhile: it reports as ready anyway */
		}
	}
	return n;
}
