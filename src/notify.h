/*
 * notify.h - systemd's notification protocol (sd_notify), without
 * libsystemd: one datagram per call to the socket named by NOTIFY_SOCKET.
 */
#ifndef LEASERUN_NOTIFY_H
#define LEASERUN_NOTIFY_H

/* Reads NOTIFY_SOCKET; every later lr_notify() is a no-op without it. */
void lr_notify_setup(void);
/* Sends "STATUS=...", "READY=1\nSTATUS=..." and the like. */
void lr_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
