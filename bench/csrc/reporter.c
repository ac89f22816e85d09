// reporter: the child every supervisor in the restart benchmark runs. Its
// first action is to read CLOCK_MONOTONIC; it then appends one line,
// "<monotonic ns> <pid>\n", to $REPORTER_OUT (else argv[1], else ./stamps;
// the harness makes it a FIFO) in a single write, and sleeps until killed.
// The environment wins because s6-supervise passes ./run an argument of its
// own (the service name).
// With $REPORTER_PING_MS and $NOTIFY_SOCKET set it sends WATCHDOG=1 there
// every that many milliseconds instead of sleeping: an agent that pings, so
// that a heartbeat is waiting in supervise whenever it is killed.
// Built static (gcc -O2 -static) so that exec cost is the kernel's alone.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	const char *out = getenv("REPORTER_OUT");
	if ((out == NULL || *out == '\0') && argc > 1)
		out = argv[1];
	if (out == NULL || *out == '\0')
		out = "stamps";
	char line[64];
	int n = snprintf(line, sizeof line, "%lld %d\n",
			 (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (int)getpid());
	int fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (write(fd, line, n) != n)
			return 1;
		close(fd);
	}
	const char *ping = getenv("REPORTER_PING_MS");
	const char *sock = getenv("NOTIFY_SOCKET");
	if (ping != NULL && atoi(ping) > 0 && sock != NULL && *sock != '\0' &&
	    strlen(sock) < sizeof(((struct sockaddr_un *)0)->sun_path)) {
		struct sockaddr_un addr = {.sun_family = AF_UNIX};
		strcpy(addr.sun_path, sock);
		if (addr.sun_path[0] == '@')
			addr.sun_path[0] = '\0';
		socklen_t len = offsetof(struct sockaddr_un, sun_path) + strlen(sock);
		int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct timespec every = {.tv_sec = atoi(ping) / 1000, .tv_nsec = (atoi(ping) % 1000) * 1000000L};
		for (;;) {
			sendto(s, "WATCHDOG=1", 10, 0, (struct sockaddr *)&addr, len);
			nanosleep(&every, NULL);
		}
	}
	for (;;)
		pause();
}
