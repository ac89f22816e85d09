/*
 * firstmarker: the quickest agent there is. Before anything else at exec
 * it sends turn-begin and a barrier to $NOTIFY_SOCKET, then turn-end
 * completed and a barrier, appends one record of the two answers to
 * $FIRSTMARKER_ANSWERS, and exits 0; run $FIRSTMARKER_LAST waits for a
 * signal instead, so the test can stop supervise there.
 *
 * An answer is the byte supervise wrote before closing the barrier's fd:
 * '1' journaled, '0' refused; 'E' is a close without a byte (unconfirmed),
 * 'T' no answer within 10 s, 'X' an error here.
 *
 * Built by TestFirstMarkerNeverDropped with the C compiler, if any.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int sock;
static struct sockaddr_un addr;

static int send_fd(const char *msg, int fd)
{
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = strlen(msg)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = {.msg_name = &addr, .msg_namelen = sizeof(addr), .msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, 0) < 0 ? -1 : 0;
}

/* barrier sends BARRIER=1 with the write end of a pipe and returns the
 * answer byte. */
static char barrier(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return 'X';
	int err = send_fd("BARRIER=1", p[1]);
	close(p[1]); /* supervise's copy must be the last one */
	if (err < 0) {
		close(p[0]);
		return 'X';
	}
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	char answer = 'T', b;
	if (poll(&pf, 1, 10000) == 1) {
		ssize_t n = read(p[0], &b, 1);
		answer = n == 1 ? b : n == 0 ? 'E' : 'X';
	}
	close(p[0]);
	return answer;
}

int main(void)
{
	const char *path = getenv("NOTIFY_SOCKET"), *run = getenv("SUPERVISE_RUN");
	const char *out = getenv("FIRSTMARKER_ANSWERS"), *last = getenv("FIRSTMARKER_LAST");
	if (!path || !run || !out || !last || strlen(path) >= sizeof(addr.sun_path))
		return 2;
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	addr.sun_family = AF_UNIX;
	strcpy(addr.sun_path, path);
	char msg[256];
	snprintf(msg, sizeof(msg), "X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_TURN=t%s", run);
	char begin = send_fd(msg, -1) < 0 ? 'X' : barrier();
	snprintf(msg, sizeof(msg),
		 "X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_TURN=t%s\nX_SUPERVISE_OUTCOME=completed", run);
	char end = send_fd(msg, -1) < 0 ? 'X' : barrier();
	int f = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	char rec[64];
	int n = snprintf(rec, sizeof(rec), "run=%s begin=%c end=%c\n", run, begin, end);
	if (f < 0 || write(f, rec, n) != n) /* O_APPEND: one write per record */
		return 3;
	if (strcmp(run, last) == 0)
		pause();
	return 0;
}
