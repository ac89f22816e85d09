// Command noop does nothing: the floor of starting a static Go binary,
// measured beside `supervise notify` in the hook rows of the benchmark.
package main

func main() {}
