// reporter: the child every supervisor in the restart benchmark runs. Its
// first action is to read CLOCK_MONOTONIC; it then appends one line,
// "<monotonic ns> <pid>\n", to $REPORTER_OUT (else argv[1], else ./stamps;
// the harness makes it a FIFO) in a single write, and sleeps until killed.
// The environment wins because s6-supervise passes ./run an argument of its
// own (the service name).
// Built static (gcc -O2 -static) so that exec cost is the kernel's alone.
#define _GNU_SOURCE
#include <fcntl.h>
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
	for (;;)
		pause();
}
