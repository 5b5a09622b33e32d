/*
 * waitset.h - one fd for the core's loop to poll: an epoll set of a
 * store's sockets plus a CLOCK_BOOTTIME timer (libstore).
 *
 * The store contract hands the loop one fd (wait_fd()); a store that
 * watches several sockets, or must be woken at a time of its own, puts
 * them here.  Nothing blocks: the loop polls the set, then the store's
 * process() asks which members are ready.
 */
#ifndef LEASERUN_WAITSET_H
#define LEASERUN_WAITSET_H

#include <stdint.h>
#include <sys/epoll.h>

struct lr_waitset {
	int ep;  /* the epoll set: what wait_fd() returns; -1 closed */
	int tfd; /* its timer, a member of ep; -1 closed */
};

/* Creates the set and its timer (disarmed).  Returns 0, or -1 with errno;
 * either way lr_waitset_close() may follow. */
int lr_waitset_open(struct lr_waitset *ws);
/* Closes both fds.  Accepts a zeroed, half-opened or closed set once
 * ws->ep and ws->tfd were set to -1 (lr_waitset_init()). */
void lr_waitset_close(struct lr_waitset *ws);
void lr_waitset_init(struct lr_waitset *ws);
/* Watches fd for events (EPOLLIN, EPOLLOUT), adding it or changing what
 * it waits for; events 0 stops watching it.  A number that now names a
 * new socket is added again.  Returns 0, or -1 with errno. */
int lr_waitset_watch(struct lr_waitset *ws, int fd, uint32_t events);
/* Follows a socket that a library may replace (a reconnect): watches fd
 * (-1: none) for events in place of *reg, the one watched before (-1:
 * none), which leaves the set when the number changes.  A new socket
 * under the old number is added again (as lr_waitset_watch() does).
 * *reg becomes fd, or -1 when it could not be added.  Returns 0, or -1
 * with errno. */
int lr_waitset_follow(struct lr_waitset *ws, int *reg, int fd,
		      uint32_t events);
/* Arms the timer at the CLOCK_BOOTTIME time at (ms), or disarms it when
 * at < 0. */
void lr_waitset_arm(struct lr_waitset *ws, int64_t at);
/* Fills evs with up to max members ready now, without waiting.  The timer
 * appears as an entry with data.fd == ws->tfd, already read (so it does
 * not fire again until armed again).  Returns how many, 0 if none. */
int lr_waitset_ready(struct lr_waitset *ws, struct epoll_event *evs,
		     int max);

/* Arms the CLOCK_BOOTTIME timerfd tfd at the absolute time at (ms), or
 * disarms it when at < 0: shared with the core's own loop. */
void lr_timerfd_arm(int tfd, int64_t at);

#endif
